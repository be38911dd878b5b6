// `admit decide` and `admit inspect` end to end: the real binary (run without a shell) against a real redis-server —
// decide's exit statuses (0 admitted, 75 refused, 2 bad input), the JSON form, state shared with the library under
// {name}:key, --wait until admitted, and the failure policy when Redis is not there; each Redis failure's exit status
// (75 may pass by waiting, 69 will not) and message, --wait retrying the transient ones; inspect's view of a
// semaphore held and waited on by the library.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "child_process.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using admit::redis::testing::child_process;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using admit::redis::testing::run_result;
using args = std::vector<std::string>;

#ifdef ADMIT_CLI
// Runs `admit <args...>` (no shell: arguments go to the program as they are).
run_result admit_cli(args a) {
  a.insert(a.begin(), ADMIT_CLI);
  return admit::redis::testing::run_program(std::move(a));
}

// `a` followed by `more`.
args operator+(args a, const args& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}
#endif

class AdmitDecide : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef ADMIT_CLI
    GTEST_SKIP() << "the admit command line tool is not built (ADMIT_BUILD_TOOLS=OFF)";
#endif
  }
};

#ifdef ADMIT_CLI

TEST_F(AdmitDecide, AdmitsThenRefusesWithExitStatus75) {
  redis_server server;
  const args common = {"decide", "--redis", server.url(), "--rate", "1/h", "--burst", "2", "--name", "jobs", "nightly"};
  const run_result first = admit_cli(common);
  EXPECT_EQ(first.status, 0) << first.out;
  EXPECT_EQ(first.out.rfind("admitted: \"nightly\" n=1 limit=2 remaining=1", 0), 0u) << first.out;
  EXPECT_EQ(admit_cli(common).status, 0);
  const run_result third = admit_cli(common + args{"--json"});
  EXPECT_EQ(third.status, 75) << third.out;
  EXPECT_NE(third.out.find("\"admitted\": false"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("\"decided_by\": \"redis\""), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("\"retry_after_s\": 3599."), std::string::npos) << third.out;  // 1 h, less a bit

  // The same state as the library's limiter with that name.
  io_thread io;
  admit::redis::connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "jobs", admit::rate::per(1, std::chrono::hours(1)), 2, patient());
  EXPECT_EQ(server.admin({"EXISTS", limiter.storage_key("nightly")}), "1");
  EXPECT_FALSE(limiter.decide("nightly").decision.admitted);
}

TEST_F(AdmitDecide, WaitRetriesUntilAdmitted) {
  redis_server server;
  // A wait of up to 1 s: longer than starting the process.
  const args common = {"decide", "--redis", server.url(), "--rate", "1/s", "--burst", "1", "k"};
  ASSERT_EQ(admit_cli(common).status, 0);
  const run_result waited = admit_cli(common + args{"--wait", "--max-wait", "5s"});
  EXPECT_EQ(waited.status, 0) << waited.out;
  EXPECT_NE(waited.out.find(" waited="), std::string::npos) << waited.out;
  // --max-wait shorter than the wait: refused without waiting.
  const run_result hourly = admit_cli({"decide", "--redis", server.url(), "--rate", "1/h", "--name", "h", "k"});
  ASSERT_EQ(hourly.status, 0);
  EXPECT_EQ(
      admit_cli({"decide", "--redis", server.url(), "--rate", "1/h", "--name", "h", "--wait", "--max-wait", "1s", "k"})
          .status,
      75);
}

TEST_F(AdmitDecide, WindowsAndCostAboveTheLimit) {
  redis_server server;
  const args common = {"decide", "--redis", server.url(), "-a", "sliding-log", "--rate", "3/s", "--window", "1s"};
  EXPECT_EQ(admit_cli(common + args{"-n", "3", "k"}).status, 0);
  EXPECT_EQ(admit_cli(common + args{"k"}).status, 75);
  EXPECT_EQ(admit_cli(common + args{"-n", "4", "k"}).status, 2);  // can never be admitted
}

TEST_F(AdmitDecide, RedisDownIsRefusedUnlessFailOpen) {
  redis_server server;
  const std::string url = server.url();
  server.kill();
  EXPECT_EQ(admit_cli({"decide", "--redis", url, "--timeout", "100ms", "--rate", "1/s", "k"}).status, 75);
  const run_result open =
      admit_cli({"decide", "--redis", url, "--timeout", "100ms", "--rate", "1/s", "--fail-open", "--json", "k"});
  EXPECT_EQ(open.status, 0);
  EXPECT_NE(open.out.find("\"decided_by\": \"failure_policy\""), std::string::npos) << open.out;
  EXPECT_NE(open.out.find("\"error\": \"cannot connect to " + url.substr(0, url.size() - 2) + ": connection refused"),
            std::string::npos)
      << open.out;
  EXPECT_NE(open.err.find("admitted by --fail-open"), std::string::npos) << open.err;
}

TEST_F(AdmitDecide, BadInputIsExitStatus2) {
  redis_server server;
  const std::string url = server.url();
  EXPECT_EQ(admit_cli({"decide", "--redis", url, "--rate", "fast", "k"}).status, 2);
  EXPECT_EQ(admit_cli({"decide", "--redis", "http://x", "--rate", "1/s", "k"}).status, 2);
  // The options' values are read as replay reads them (cli/values.hpp): the same words for the same mistakes.
  const auto refused = [&](const args& more, const std::string& message) {
    const run_result r = admit_cli(args{"decide", "--redis", url, "--rate", "1/s"} + more + args{"k"});
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err, "admit decide: " + message + "\n");
    EXPECT_EQ(r.out, "");
  };
  refused({"-a", "pacer"},
          "invalid --algorithm \"pacer\": it has no distributed form; use gcra, token-bucket, fixed-window, "
          "sliding-window or sliding-log");
  refused({"--cost", "-1"}, "invalid --cost \"-1\": must not be negative");
  refused({"--cost", "1.5"}, "invalid --cost \"1.5\": expected a whole number from 0 to 1000000000");
  refused({"--timeout", "soon"},
          "invalid --timeout \"soon\": expected a duration such as 500ms, 1s, 10s, 2min (units ns, us, ms, s, min, "
          "h, d)");
  refused({"--timeout", "1"},
          "invalid --timeout \"1\": missing a unit after the number (units ns, us, ms, s, min, h, "
          "d), e.g. 1s");
  refused({"--timeout", "0s"}, "invalid --timeout \"0s\": must be positive");
  refused({"--wait", "--max-wait", "5 min"},
          "invalid --max-wait \"5 min\": expected a duration such as 500ms, 1s, 10s, 2min, without spaces (units ns, "
          "us, ms, s, min, h, d)");
  EXPECT_EQ(server.admin({"DBSIZE"}), "0");  // nothing was decided
}

// Redis counts time in whole microseconds. A window it would round up is refused, and so is a rate whose interval,
// rounded up to whole microseconds, would be more than 0.1% slower: the limit enforced is the one asked for.
TEST_F(AdmitDecide, WhatRedisWouldRoundIsRefused) {
  redis_server server;
  const std::string url = server.url();
  const run_result window =
      admit_cli({"decide", "--redis", url, "-a", "fixed-window", "--rate", "2000000/s", "--window", "1500ns", "k"});
  EXPECT_EQ(window.status, 2) << window.err;
  EXPECT_EQ(window.err,
            "admit decide: --window 1500ns is not a whole number of microseconds, which Redis counts windows in; use "
            "--window 1us or 2us\n");
  for (const char* algorithm : {"sliding-window", "sliding-log"}) {
    EXPECT_EQ(
        admit_cli({"decide", "--redis", url, "-a", algorithm, "--rate", "2000000/s", "--window", "1500ns", "k"}).status,
        2)
        << algorithm;
  }
  for (const char* algorithm : {"gcra", "token-bucket"}) {
    const run_result rate = admit_cli({"decide", "--redis", url, "-a", algorithm, "--rate", "3000/s", "k"});
    EXPECT_EQ(rate.status, 2) << rate.err;
    EXPECT_EQ(rate.err,
              "admit decide: --rate 3000/s would be slowed to 2994.012/s: Redis spaces requests a whole number of "
              "microseconds apart (334, not 333.333); use --rate 1/333us or 1/334us (3003.003/s or 2994.012/s)\n");
  }
  EXPECT_EQ(server.admin({"DBSIZE"}), "0");  // refused before deciding anything

  // What fits is decided: a whole number of microseconds, a rate slowed by less than 0.1% (3/s: 333334us apart).
  EXPECT_EQ(
      admit_cli({"decide", "--redis", url, "-a", "fixed-window", "--rate", "2000000/s", "--window", "2us", "k"}).status,
      0);
  EXPECT_EQ(admit_cli({"decide", "--redis", url, "--rate", "1/334us", "--name", "fast", "k"}).status, 0);
  const run_result slow = admit_cli({"decide", "--redis", url, "--rate", "3/s", "--burst", "1", "--name", "r", "k"});
  EXPECT_EQ(slow.status, 0) << slow.err;
  io_thread io;
  admit::redis::connection conn(io.executor(), url);
  admit::redis::gcra limiter(conn, "r", admit::rate::per_second(3), 1, patient());
  EXPECT_EQ(limiter.emission_interval(), std::chrono::microseconds(333'334));
  EXPECT_EQ(server.admin({"EXISTS", limiter.storage_key("k")}), "1");
}

// Each Redis failure: its exit status (75 may pass by waiting, 69 will not) and a message that names the cause and the
// server, never the password.
TEST_F(AdmitDecide, RefusedConnectionIsExitStatus75) {
  redis_server server;
  const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
  server.kill();  // a port that was free and is free again: nothing listens
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "k"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find("cannot connect to " + url + ": connection refused"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("timed out"), std::string::npos) << r.err;
  const run_result i = admit_cli({"inspect", "--redis", url, "db"});
  EXPECT_EQ(i.status, 75) << i.err;
  EXPECT_NE(i.err.find("cannot connect to " + url + ": connection refused"), std::string::npos) << i.err;
}

TEST_F(AdmitDecide, WrongPasswordIsExitStatus69) {
  redis_server server({.requirepass = "the-right-one"});
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  const std::string url = "redis://:not-the-password@" + where;
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "k"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("authentication failed at redis://" + where + ": WRONGPASS"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not-the-password"), std::string::npos) << r.err;
  const run_result i = admit_cli({"inspect", "--redis", url, "db"});
  EXPECT_EQ(i.status, 69) << i.err;
  EXPECT_NE(i.err.find("WRONGPASS"), std::string::npos) << i.err;
  EXPECT_EQ(i.err.find("not-the-password"), std::string::npos) << i.err;

  // No password at all: the server says NOAUTH to the first command.
  const run_result none = admit_cli({"decide", "--redis", "redis://" + where, "--rate", "1/s", "k"});
  EXPECT_EQ(none.status, 69) << none.err;
  EXPECT_NE(none.err.find("authentication failed at redis://" + where + ": NOAUTH"), std::string::npos) << none.err;
  const run_result inspect_none = admit_cli({"inspect", "--redis", "redis://" + where, "db"});
  EXPECT_EQ(inspect_none.status, 69) << inspect_none.err;
  EXPECT_NE(inspect_none.err.find("NOAUTH"), std::string::npos) << inspect_none.err;
}

TEST_F(AdmitDecide, MissingDatabaseIsExitStatus69) {
  redis_server server;  // 16 databases, the default
  const std::string url = "redis://127.0.0.1:" + std::to_string(server.port()) + "/99";
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "k"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("database 99 does not exist at " + url + " (ERR DB index is out of range)"), std::string::npos)
      << r.err;
  const run_result i = admit_cli({"inspect", "--redis", url, "db"});
  EXPECT_EQ(i.status, 69) << i.err;
  EXPECT_NE(i.err.find("database 99 does not exist"), std::string::npos) << i.err;
}

TEST_F(AdmitDecide, UnknownHostIsExitStatus69) {
  // The .invalid top-level domain never resolves (RFC 6761). Whether the resolver can say so depends on the machine:
  // with a name server (or none configured) the answer is "no such name", a permanent mistake (69); with a name
  // server configured but unreachable it is "try again", which may pass by waiting (75). The test asks the resolver
  // first, so it holds on either machine.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo("no-such-host.invalid", "6379", &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  ASSERT_NE(gai, 0) << "no-such-host.invalid resolved";
  const bool temporary = gai == EAI_AGAIN;
  const std::string url = "redis://no-such-host.invalid:6379";
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "k"});
  if (temporary) {
    EXPECT_EQ(r.status, 75) << r.err;
    return;
  }
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("cannot connect to " + url + ": unknown host \"no-such-host.invalid\""), std::string::npos)
      << r.err;
  const run_result i = admit_cli({"inspect", "--redis", url, "db"});
  EXPECT_EQ(i.status, 69) << i.err;
  EXPECT_NE(i.err.find("unknown host"), std::string::npos) << i.err;
}

TEST_F(AdmitDecide, BadUrlIsExitStatus2WithoutThePassword) {
  const run_result r = admit_cli({"decide", "--redis", "redis://:s3cret@127.0.0.1:port", "--rate", "1/s", "k"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--redis: redis URL: bad port 'port' in 'redis://:***@127.0.0.1:port'"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
  const run_result i = admit_cli({"inspect", "--redis", "valkey://:s3cret@h", "db"});
  EXPECT_EQ(i.status, 2) << i.err;
  EXPECT_NE(i.err.find("unsupported scheme"), std::string::npos) << i.err;
  EXPECT_EQ(i.err.find("s3cret"), std::string::npos) << i.err;
}

// A TCP server on a free loopback port that is not Redis: it greets every connection with an HTTP error.
class not_redis_server {
 public:
  not_redis_server() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("not_redis_server: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::jthread([this](std::stop_token stop) {
      std::vector<int> clients;
      while (!stop.stop_requested()) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;  // a bounded poll, to see the stop request
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        constexpr std::string_view greeting = "HTTP/1.1 400 Bad Request\r\n\r\n";
        (void)!::write(c, greeting.data(), greeting.size());
        clients.push_back(c);
      }
      for (const int c : clients) ::close(c);
    });
  }
  ~not_redis_server() {
    thread_.request_stop();
    thread_.join();
    ::close(fd_);
  }
  not_redis_server(const not_redis_server&) = delete;
  not_redis_server& operator=(const not_redis_server&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::jthread thread_;
};

// A TCP server on a free loopback port that speaks just enough RESP to play a Redis in trouble: `answer(name, i)`
// gives the raw reply to the i-th command (from 0, over all connections) named `name` (upper case), or nothing for
// no reply at all.
class scripted_redis_server {
 public:
  using script = std::function<std::optional<std::string>(const std::string& name, int index)>;
  explicit scripted_redis_server(script answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("scripted_redis_server: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::jthread([this](std::stop_token stop) { serve(stop); });
  }
  ~scripted_redis_server() {
    thread_.request_stop();
    thread_.join();
    ::close(fd_);
  }
  scripted_redis_server(const scripted_redis_server&) = delete;
  scripted_redis_server& operator=(const scripted_redis_server&) = delete;
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  // The name of the first whole command in `buffer`, taken out of it; nothing until one has fully arrived.
  static std::optional<std::string> take_command(std::string& buffer) {
    std::size_t pos = 0;
    const auto line = [&]() -> std::optional<std::string> {
      const std::size_t end = buffer.find("\r\n", pos);
      if (end == std::string::npos) return std::nullopt;
      std::string l = buffer.substr(pos, end - pos);
      pos = end + 2;
      return l;
    };
    const auto head = line();
    if (!head || head->size() < 2 || (*head)[0] != '*') return std::nullopt;
    const int count = std::stoi(head->substr(1));
    std::string name;
    for (int i = 0; i < count; ++i) {
      const auto size = line();
      if (!size || size->size() < 2) return std::nullopt;
      const std::size_t n = std::stoul(size->substr(1));
      if (buffer.size() < pos + n + 2) return std::nullopt;
      if (i == 0) name = buffer.substr(pos, n);
      pos += n + 2;
    }
    buffer.erase(0, pos);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return name;
  }

  void serve(const std::stop_token& stop) {
    std::vector<std::pair<int, std::string>> clients;  // socket, bytes not yet read as a command
    std::map<std::string, int> seen;
    while (!stop.stop_requested()) {
      std::vector<pollfd> fds{{fd_, POLLIN, 0}};
      for (const auto& c : clients) fds.push_back({c.first, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;  // a bounded poll, to see the stop request
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
        auto& [c, buffer] = clients[i - 1];
        char bytes[4096];
        const ssize_t got = ::read(c, bytes, sizeof bytes);
        if (got <= 0) continue;
        buffer.append(bytes, static_cast<std::size_t>(got));
        while (const auto name = take_command(buffer)) {
          if (const auto reply = answer_(*name, seen[*name]++)) (void)!::write(c, reply->data(), reply->size());
        }
      }
      if ((fds[0].revents & POLLIN) != 0) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) clients.emplace_back(c, std::string());
      }
    }
    for (const auto& c : clients) ::close(c.first);
  }

  script answer_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::jthread thread_;
};

TEST_F(AdmitDecide, NotRedisIsExitStatus69) {
  not_redis_server http;
  const std::string url = "redis://127.0.0.1:" + std::to_string(http.port());
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "k"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find(url + " does not speak the Redis protocol"), std::string::npos) << r.err;
  const run_result i = admit_cli({"inspect", "--redis", url, "db"});
  EXPECT_EQ(i.status, 69) << i.err;
  EXPECT_NE(i.err.find("does not speak the Redis protocol"), std::string::npos) << i.err;
}

// The server becomes LOADING, BUSY or MASTERDOWN between inspect's PING and its script: may pass by waiting (75),
// with the server's words. Any other error reply will not (69), with its words too.
TEST_F(AdmitDecide, InspectErrorReplyAfterThePing) {
  for (const std::string error :
       {"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
        "LOADING Redis is loading the dataset in memory",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."}) {
    scripted_redis_server troubled([&](const std::string& name, int) -> std::optional<std::string> {
      return name == "PING" ? "+PONG\r\n" : "-" + error + "\r\n";
    });
    const run_result i = admit_cli({"inspect", "--redis", troubled.url(), "db"});
    EXPECT_EQ(i.status, 75) << i.err;
    EXPECT_EQ(i.err, "admit inspect: " + troubled.url() + " cannot answer now: " + error + "\n");
  }
  redis_server server;
  server.admin({"SET", "{db}:meta", "not a hash"});
  const run_result wrong = admit_cli({"inspect", "--redis", server.url(), "db"});
  EXPECT_EQ(wrong.status, 69) << wrong.err;
  EXPECT_NE(wrong.err.find(" answered with an error: "), std::string::npos) << wrong.err;
  EXPECT_NE(wrong.err.find("WRONGTYPE"), std::string::npos) << wrong.err;
}

// --max-wait bounds every attempt of --wait, not only the pauses between them: here the first PING says LOADING at
// once and the next one is never answered; with --timeout 5s a retry left to its own timeouts would end 5 s late.
TEST_F(AdmitDecide, WaitNeverOverrunsMaxWait) {
  scripted_redis_server stalled([](const std::string& name, int index) -> std::optional<std::string> {
    if (name == "PING" && index == 0) return "-LOADING Redis is loading the dataset in memory\r\n";
    return std::nullopt;
  });
  const auto before = std::chrono::steady_clock::now();
  const run_result r = admit_cli(
      {"decide", "--redis", stalled.url(), "--rate", "1/s", "--timeout", "5s", "--wait", "--max-wait", "300ms", "k"});
  const auto took = std::chrono::steady_clock::now() - before;
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find("LOADING Redis is loading the dataset in memory; retrying in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no answer from " + stalled.url() + " within "), std::string::npos) << r.err;
  // 300 ms and the start of a process (under a sanitizer, on a loaded machine), with a wide margin; a retry left to
  // its own timeout would take 5 s more.
  EXPECT_LT(took, std::chrono::milliseconds(300) + std::chrono::milliseconds(3000));

  // The same when the decision itself is not answered: the first one says BUSY at once, the next one nothing.
  scripted_redis_server silent([](const std::string& name, int index) -> std::optional<std::string> {
    if (name == "PING") return "+PONG\r\n";
    if (index == 0)
      return "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.\r\n";
    return std::nullopt;
  });
  const auto asked = std::chrono::steady_clock::now();
  const run_result d = admit_cli(
      {"decide", "--redis", silent.url(), "--rate", "1/s", "--timeout", "5s", "--wait", "--max-wait", "300ms", "k"});
  const auto decided = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(d.status, 75) << d.err;
  EXPECT_NE(d.err.find("cannot answer now: BUSY"), std::string::npos) << d.err;
  EXPECT_NE(d.err.find("no answer from " + silent.url() + " within "), std::string::npos) << d.err;
  EXPECT_LT(decided, std::chrono::milliseconds(300) + std::chrono::milliseconds(3000));

  // The first asking is not waiting: it has its whole --timeout, and --max-wait 0s still asks once.
  redis_server server;
  const run_result once =
      admit_cli({"decide", "--redis", server.url(), "--rate", "1/s", "--wait", "--max-wait", "0s", "k"});
  EXPECT_EQ(once.status, 0) << once.err;
}

// --json prints n as the number it is, whatever the --cost text was.
TEST_F(AdmitDecide, JsonNIsTheParsedCost) {
  redis_server server;
  const run_result r =
      admit_cli({"decide", "--redis", server.url(), "--rate", "10/s", "--burst", "10", "--cost", "007", "--json", "k"});
  EXPECT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // throws on invalid JSON ("n": 007)
  EXPECT_EQ(j.at("n"), 7);
  const run_result text =
      admit_cli({"decide", "--redis", server.url(), "--rate", "10/s", "--burst", "10", "--cost", "02", "k2"});
  EXPECT_NE(text.out.find(" n=2 "), std::string::npos) << text.out;
}

TEST_F(AdmitDecide, WaitRetriesUntilRedisIsBack) {
  redis_server server;
  const std::uint16_t port = server.port();
  server.kill();
  child_process decide({ADMIT_CLI, "decide", "--redis", "redis://127.0.0.1:" + std::to_string(port), "--rate", "1/s",
                        "--wait", "--max-wait", "60s", "k"});
  // The server comes back only once decide has failed and said it will retry.
  ASSERT_TRUE(decide.wait_for_stderr("connection refused (is the server running?); retrying in ")) << decide.err();
  server.start();
  EXPECT_EQ(decide.wait(), 0) << decide.err();
  EXPECT_EQ(decide.out().rfind("admitted: \"k\" n=1 limit=1 remaining=0", 0), 0u) << decide.out();
  EXPECT_NE(decide.out().find(" waited="), std::string::npos) << decide.out();
}

TEST_F(AdmitDecide, WaitRetriesWhileRedisIsBusy) {
  redis_server server;
  server.admin({"CONFIG", "SET", "busy-reply-threshold", "10"});  // BUSY after a script has run 10 ms, not 5 s
  io_thread io;
  admit::redis::connection conn(io.executor(), server.url());
  auto endless = std::async(
      std::launch::async, [&] { return conn.execute_for(std::chrono::minutes(1), "EVAL", "while true do end", "0"); });
  ASSERT_TRUE(admit::redis::testing::eventually([&] { return server.admin({"PING"}).starts_with("-BUSY"); }));

  const run_result busy = admit_cli({"decide", "--redis", server.url(), "--rate", "1/s", "k"});
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find(" cannot answer now: BUSY"), std::string::npos) << busy.err;

  child_process decide(
      {ADMIT_CLI, "decide", "--redis", server.url(), "--rate", "1/s", "--wait", "--max-wait", "60s", "k"});
  ASSERT_TRUE(decide.wait_for_stderr("BUSY")) << decide.err();
  EXPECT_EQ(server.admin({"SCRIPT", "KILL"}), "OK");
  EXPECT_EQ(decide.wait(), 0) << decide.err();
  EXPECT_NE(decide.err().find("; retrying in "), std::string::npos) << decide.err();
  EXPECT_EQ(decide.out().rfind("admitted: ", 0), 0u) << decide.out();
  EXPECT_TRUE(endless.get().value.is_error()) << "killed";
}

TEST_F(AdmitDecide, WaitGivesUpOnWhatWaitingCannotFix) {
  redis_server server({.requirepass = "the-right-one"});
  const run_result r = admit_cli({"decide", "--redis", "redis://:wrong@127.0.0.1:" + std::to_string(server.port()),
                                  "--rate", "1/s", "--wait", "--max-wait", "60s", "k"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_EQ(r.err.find("retrying"), std::string::npos) << r.err;
}

TEST_F(AdmitDecide, WaitGivesUpOnATransientFailureAtMaxWait) {
  redis_server server;
  const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
  server.kill();
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "--wait", "--max-wait", "200ms", "k"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find("; retrying in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("connection refused (is the server running?); not admitted"), std::string::npos) << r.err;
}

#endif

#ifdef ADMIT_CLI

// inspect checks every argument before connecting: bad input is exit status 2 even when Redis is down (not 75).
TEST_F(AdmitDecide, InspectChecksItsArgumentsBeforeConnecting) {
  redis_server server;
  const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
  server.kill();
  const run_result down = admit_cli({"inspect", "--redis", url, "db"});
  ASSERT_EQ(down.status, 75) << down.err;  // the server is down indeed
  const auto refused = [&](const args& a, const std::string& message) {
    const run_result r = admit_cli(args{"inspect", "--redis", url} + a);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err, "admit inspect: " + message + "\n");
  };
  refused({"a{b}"},
          "admit::redis::semaphore: name must not contain '{' or '}' (it becomes the hash tag), got \"a{b}\"");
  refused({"--most", "0", "db"}, "invalid --most \"0\": must be a whole number from 1 to 1000000000");
  refused({"--timeout", "0s", "db"}, "invalid --timeout \"0s\": must be positive");
  refused({"--timeout", "1", "db"},
          "invalid --timeout \"1\": missing a unit after the number (units ns, us, ms, s, min, h, d), e.g. 1s");
}

TEST_F(AdmitDecide, InspectShowsASemaphoresHoldersAndQueue) {
  redis_server server;
  io_thread io;
  admit::redis::connection conn(io.executor(), server.url());
  admit::redis::semaphore s(conn, "db", 2);
  auto held = s.try_acquire(2);
  ASSERT_TRUE(held);
  std::jthread waiting([&](std::stop_token stop) { (void)s.try_acquire_for(std::chrono::seconds(20), 1, stop); });
  ASSERT_TRUE(admit::redis::testing::eventually([&] { return s.inspect().first.waiter_count == 1; }));

  const run_result text = admit_cli({"inspect", "--redis", server.url(), "db"});
  EXPECT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("semaphore \"db\": capacity 2, available 0, 1 holder(s), 1 waiting"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(held->id() + "  permits 2  fencing token " + std::to_string(held->fencing_token())),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("1. "), std::string::npos) << text.out;

  const run_result json = admit_cli({"inspect", "--redis", server.url(), "--json", "db"});
  EXPECT_EQ(json.status, 0) << json.out;
  EXPECT_NE(json.out.find("\"capacity\": 2, \"available\": 0"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"fencing_token\": " + std::to_string(held->fencing_token())), std::string::npos)
      << json.out;

  EXPECT_EQ(admit_cli({"inspect", "--redis", server.url(), "nothing-here"}).status, 1);  // looking creates nothing
  EXPECT_EQ(server.admin({"EXISTS", "{nothing-here}:meta"}), "0");
  EXPECT_EQ(admit_cli({"inspect", "--redis", server.url(), "--most", "0", "db"}).status, 2);
  EXPECT_EQ(admit_cli({"inspect", "--redis", server.url(), "a{b}"}).status, 2);
  waiting.request_stop();
}

#endif

}  // namespace
