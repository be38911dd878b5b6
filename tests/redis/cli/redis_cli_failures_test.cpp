// `admit decide` and `admit inspect` when Redis fails, end to end (the real binary against a real redis-server, or a
// TCP server that is not Redis or answers as scripted): each failure's exit status (75 may pass by waiting, 69 will
// not) and message, a URL's password never shown, --wait retrying the transient failures and never overrunning
// --max-wait, and giving up on the others.
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
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "child_process.hpp"
#include "cli_testing.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using admit::redis::testing::child_process;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::run_result;
using namespace admit::redis::testing::cli;

class AdmitDecideFailures : public cli_test {};

#ifdef ADMIT_CLI

// Each Redis failure: its exit status (75 may pass by waiting, 69 will not) and a message that names the cause and the
// server, never the password.
TEST_F(AdmitDecideFailures, RefusedConnectionIsExitStatus75) {
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
  // An error, said by `admit run --quiet` too (which leaves out only the limit's answers).
  const run_result q =
      admit_cli({"run", "--redis", url, "--name", "db", "--concurrency", "1", "--quiet", "--", "true"});
  EXPECT_EQ(q.status, 75) << q.err;
  EXPECT_NE(q.err.find("connection refused"), std::string::npos) << q.err;
}

// A Sentinel URL: the message names the sentinels and the master's name, the URL's password left out (it named
// redis://127.0.0.1:6379, the unused default host and port of a URL without them).
TEST_F(AdmitDecideFailures, ASentinelUrlIsNamedAsGiven) {
  redis_server a, b;
  const std::string sentinels = "127.0.0.1:" + std::to_string(a.port()) + ",127.0.0.1:" + std::to_string(b.port());
  a.kill();
  b.kill();
  const std::string shown = "redis+sentinel://u@" + sentinels + "/mymaster/2";
  for (const char* command : {"decide", "inspect", "run"}) {
    std::vector<std::string> args{command, "--redis", "redis+sentinel://u:secret@" + sentinels + "/mymaster/2"};
    if (std::string_view(command) == "decide") args.insert(args.end(), {"--rate", "1/s", "k"});
    if (std::string_view(command) == "inspect") args.emplace_back("k");
    if (std::string_view(command) == "run") args.insert(args.end(), {"-c", "1", "--name", "k", "--", "true"});
    const run_result r = admit_cli(args);
    EXPECT_EQ(r.status, 75) << command << ": " << r.err;
    EXPECT_NE(r.err.find(shown), std::string::npos) << command << ": " << r.err;
    EXPECT_EQ(r.err.find("6379"), std::string::npos) << command << ": " << r.err;
    EXPECT_EQ(r.err.find("secret"), std::string::npos) << command << ": " << r.err;
  }
}

// rediss:// for a plain port: Redis takes the TLS hello for the start of a command and answers nothing. The message
// says that it is the handshake that got no answer, and asks whether the port is a TLS port (it said "no answer
// within 1s" alone, where the connection knew better).
TEST_F(AdmitDecideFailures, ATlsUrlForAPlainPortIsSaidToBeOne) {
  redis_server server;
  const std::string url = "rediss://127.0.0.1:" + std::to_string(server.port());
  for (const args& command :
       {args{"decide", "--redis", url, "--rate", "1/s", "k"}, args{"inspect", "--redis", url, "db"}}) {
    const run_result r = admit_cli(command);
    EXPECT_EQ(r.status, 75) << r.err;
    EXPECT_NE(r.err.find("cannot connect to " + url +
                         ": no answer within 1s to the TLS handshake (is the port a TLS "
                         "port?)"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(AdmitDecideFailures, WrongPasswordIsExitStatus69) {
  redis_server server({.requirepass = "the-right-one"});
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  const std::string url = "redis://:not-the-password@" + where;
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "k"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("authentication failed at redis://" + where + ": WRONGPASS"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not-the-password"), std::string::npos) << r.err;
  // Waiting cannot fix a wrong password: the refusal names no time to retry after.
  EXPECT_NE(r.out.find("refused: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("retry_after"), std::string::npos) << r.out;
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

TEST_F(AdmitDecideFailures, MissingDatabaseIsExitStatus69) {
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

TEST_F(AdmitDecideFailures, UnknownHostIsExitStatus69) {
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

TEST_F(AdmitDecideFailures, BadUrlIsExitStatus2WithoutThePassword) {
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

TEST_F(AdmitDecideFailures, NotRedisIsExitStatus69) {
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
TEST_F(AdmitDecideFailures, InspectErrorReplyAfterThePing) {
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

// The same for `admit run`: its semaphore keeps no error reply's words, and the run asks Redis once more what it says
// (it said "unexpected answer ...: unexpected reply from redis", exit 69, of a Redis that was loading).
TEST_F(AdmitDecideFailures, RunErrorReplyAfterThePing) {
  const std::string error = "LOADING Redis is loading the dataset in memory";
  scripted_redis_server troubled([&](const std::string& name, int) -> std::optional<std::string> {
    return name == "PING" ? "+PONG\r\n" : "-" + error + "\r\n";
  });
  const run_result r =
      admit_cli({"run", "--redis", troubled.url(), "-c", "1", "--name", "db", "--no-wait", "--", "true"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find(troubled.url() + " cannot answer now: " + error), std::string::npos) << r.err;
}

TEST_F(AdmitDecideFailures, WaitRetriesUntilRedisIsBack) {
  redis_server server;
  const std::uint16_t port = server.port();
  server.kill();
  child_process decide({ADMIT_CLI, "decide", "--redis", "redis://127.0.0.1:" + std::to_string(port), "--rate", "1/s",
                        "--wait", "--max-wait", "60s", "k"});
  // The server comes back only once decide has failed and said it will retry.
  ASSERT_TRUE(
      decide.wait_for_stderr("connection refused (is the server running?); retrying at the connection's next "
                             "attempt (50 ms to 1 s apart, doubling; waited "))
      << decide.err();
  server.start();
  EXPECT_EQ(decide.wait(), 0) << decide.err();
  EXPECT_EQ(decide.out().rfind("admitted: \"k\" n=1 limit=1 remaining=0", 0), 0u) << decide.out();
  EXPECT_NE(decide.out().find(" waited="), std::string::npos) << decide.out();
}

TEST_F(AdmitDecideFailures, WaitRetriesWhileRedisIsBusy) {
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

TEST_F(AdmitDecideFailures, WaitGivesUpOnWhatWaitingCannotFix) {
  redis_server server({.requirepass = "the-right-one"});
  const run_result r = admit_cli({"decide", "--redis", "redis://:wrong@127.0.0.1:" + std::to_string(server.port()),
                                  "--rate", "1/s", "--wait", "--max-wait", "60s", "k"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_EQ(r.err.find("retrying"), std::string::npos) << r.err;
}

TEST_F(AdmitDecideFailures, WaitGivesUpOnATransientFailureAtMaxWait) {
  redis_server server;
  const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
  server.kill();
  const run_result r = admit_cli({"decide", "--redis", url, "--rate", "1/s", "--wait", "--max-wait", "200ms", "k"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find("; retrying at the connection's next attempt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("connection refused (is the server running?); not admitted"), std::string::npos) << r.err;
}

// --max-wait bounds every attempt of --wait, not only the pauses between them: here the first PING says LOADING at
// once and the next one is never answered; with --timeout 5s a retry left to its own timeouts would end 5 s late.
TEST_F(AdmitDecideFailures, WaitNeverOverrunsMaxWait) {
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

// Sentinels that accept and never answer: each is asked for up to the connect timeout in turn, and the whole attempt
// is bounded by --timeout (three took three times it). A --timeout of 1s, ended within 1s and a process start.
TEST_F(AdmitDecideFailures, SilentSentinelsTakeNoLongerThanTheTimeout) {
  const auto never = [](const std::string&, int) -> std::optional<std::string> { return std::nullopt; };
  scripted_redis_server a(never), b(never), c(never);
  const auto port = [](const scripted_redis_server& s) { return s.url().substr(s.url().rfind(':') + 1); };
  const std::string url =
      "redis+sentinel://127.0.0.1:" + port(a) + ",127.0.0.1:" + port(b) + ",127.0.0.1:" + port(c) + "/mymaster";
  const auto before = std::chrono::steady_clock::now();
  const run_result r = admit_cli({"inspect", "--redis", url, "--timeout", "1s", "k"});
  const auto took = std::chrono::steady_clock::now() - before;
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find("no answer from " + url + " within 1s"), std::string::npos) << r.err;
  EXPECT_LT(took, std::chrono::milliseconds(2800));  // (three sentinels asked in turn took 3 s and more)
}

#endif

}  // namespace
