// `admit run --redis` end to end against a real redis-server: real processes queued in a known order — FIFO admission
// (the fencing tokens give the order of the grants) and never more than N at once; a SIGKILLed holder's permit free
// again within its lease's TTL; the lease lost while the command runs (SIGTERM within the TTL, or SIGKILL; exit 124, a
// message naming the lease), also for a holder cut off from Redis while another is granted its permit; four workers
// sharing `--concurrency 3` in front of a tiny "database" that counts its connections; --rate's spacing; the
// environment; Redis failures (75, 69) and bad names (2); --timeout
// kept when Redis stops answering.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit_run_redis.hpp"
#include "admit_run_testing.hpp"
#include "child_process.hpp"
#include "redis_server.hpp"
#include "self_exec.hpp"
#include "tcp_proxy.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::redis_server;
using admit::redis::testing::run_result;
using admit::redis::testing::tcp_proxy;
using steady = std::chrono::steady_clock;

ADMIT_CHILD_ROLE_TEST(AdmitRunRedisChild, run_role)

#ifdef ADMIT_CLI

// A tiny "database" on a free loopback port: each connection is held `hold`, then answered "ok" and closed. It counts
// the connections open at once (the count drops before the answer, so before the client can end and give its permit
// back) and in all.
class tiny_database {
 public:
  explicit tiny_database(std::chrono::milliseconds hold) : hold_(hold) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("tiny_database: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::jthread([this](std::stop_token stop) { accept_loop(stop); });
  }
  ~tiny_database() {
    acceptor_.request_stop();
    acceptor_.join();
    const std::lock_guard lock(m_);
    for (auto& t : handlers_) t.join();
    ::close(fd_);
  }
  tiny_database(const tiny_database&) = delete;
  tiny_database& operator=(const tiny_database&) = delete;

  std::uint16_t port() const { return port_; }
  int most() const {
    const std::lock_guard lock(m_);
    return most_;
  }
  int total() const {
    const std::lock_guard lock(m_);
    return total_;
  }

 private:
  void accept_loop(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      const std::lock_guard lock(m_);
      ++now_;
      ++total_;
      most_ = std::max(most_, now_);
      handlers_.emplace_back([this, c] {
        std::this_thread::sleep_for(hold_);
        {
          const std::lock_guard counting(m_);
          --now_;
        }
        [[maybe_unused]] const auto n = ::write(c, "ok", 2);
        ::close(c);
      });
    }
  }

  std::chrono::milliseconds hold_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  mutable std::mutex m_;
  int now_ = 0, most_ = 0, total_ = 0;
  std::vector<std::thread> handlers_;
  std::jthread acceptor_;
};

// 1. Twenty queued at --concurrency 3: admitted in their order of arrival, never more than 3 at once.
TEST_F(AdmitRunRedis, FifoAndAtMostThreeAtOnce) {
  fifo_one_release_at_a_time(ADMIT_CLI, {"--redis", server_.url()}, dir_, 20);
}

TEST_F(AdmitRunRedis, AtMostThreeAtOnceFreeRunningGrantedInArrivalOrder) {
  fifo_free_running(ADMIT_CLI, {"--redis", server_.url()}, dir_, 20, 150);
}

// 2. The holder SIGKILLed: nobody releases its lease, which expires by itself; the next waiter starts within the TTL
// and a margin.
TEST_F(AdmitRunRedis, SigkillOfTheHolderFreesThePermitWithinTheLeaseTtl) {
  const auto holder = hold("k", {"--lease-ttl", "1s"});
  child_process waiter(run("k", args{"--concurrency", "1", "--lease-ttl", "1s", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  const auto killed = steady::now();
  ASSERT_EQ(::kill(holder->pid(), SIGKILL), 0);
  ASSERT_TRUE(wait_for_event(waiter, {"started"}, 10s)) << waiter.err();
  const auto delay = std::chrono::duration<double, std::milli>(steady::now() - killed).count();
  std::cout << "[ measured ] the next waiter started " << delay << " ms after the holder's SIGKILL (lease TTL 1 s)\n";
  EXPECT_LT(delay, 1000.0 + 1500.0);
  EXPECT_EQ(finish(waiter).status, 0) << waiter.err();
  EXPECT_TRUE(ran());
  // The SIGKILLed admit run's command (sleep 60) got SIGKILL as well.
  const auto command_pid = event(holder->err(), "started").value("pid", std::int64_t{-1});
  ASSERT_GT(command_pid, 0) << holder->err();
  EXPECT_TRUE(eventually([&] { return process_gone(command_pid); }, 5s)) << "still runs: pid " << command_pid;
}

// 3. Exit statuses through Redis; not admitted: 75 and the command does not run.
TEST_F(AdmitRunRedis, ExitStatusesAndNotAdmitted) {
  // A unix socket URL too.
  EXPECT_EQ(admit(args{ADMIT_CLI, "run", "--redis", "unix://" + server_.unix_path(), "--name", "unix", "--concurrency",
                       "1", "--", "true"})
                .status,
            0);
  for (const int status : {0, 1, 42}) {
    const run_result r =
        // --no-wait: each finds the lease its predecessor held released (not left to expire).
        admit(run("exit",
                  {"--concurrency", "1", "--no-wait", "--", "sh", "-c", "exit \"$1\"", "sh", std::to_string(status)}));
    EXPECT_EQ(r.status, status) << r.err;
  }
  const auto holder = hold("busy");
  const auto before = steady::now();
  const run_result timed_out =
      admit(run("busy", args{"--concurrency", "1", "--timeout", "200ms", "--json", "--"} + records_ran()), 10s);
  EXPECT_EQ(timed_out.status, 75) << timed_out.err;
  EXPECT_GE(steady::now() - before, 200ms);
  EXPECT_EQ(event(timed_out.err, "not_admitted").value("reason", ""), "timeout") << timed_out.err;
  EXPECT_EQ(event(timed_out.err, "not_admitted").value("message", ""),
            "not admitted: no permit of \"busy\" at " + where() + " within --timeout 200ms")
      << timed_out.err;
  rate_refusal_named(ADMIT_CLI, {"--redis", server_.url()}, "at " + where());
  const run_result busy =
      admit(run("busy", args{"--concurrency", "1", "--no-wait", "--json", "--"} + records_ran()), 10s);
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_EQ(event(busy.err, "not_admitted").value("reason", ""), "busy") << busy.err;

  // --max-waiters 1 with one already waiting: full. A waiter's SIGTERM takes it out of Redis's queue at once.
  child_process waiter(run("busy", args{"--concurrency", "1", "--max-waiters", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  const run_result full =
      admit(run("busy", args{"--concurrency", "1", "--max-waiters", "1", "--json", "--"} + records_ran()), 10s);
  EXPECT_EQ(full.status, 75) << full.err;
  EXPECT_EQ(event(full.err, "not_admitted").value("reason", ""), "queue_full") << full.err;
  EXPECT_NE(event(full.err, "not_admitted").value("message", "").find("1 or more already wait for \"busy\""),
            std::string::npos)
      << full.err;
  ASSERT_EQ(::kill(waiter.pid(), SIGINT), 0);
  EXPECT_EQ(finish(waiter, 10s).status, 128 + SIGINT) << waiter.err();
  EXPECT_EQ(event(waiter.err(), "not_admitted").value("reason", ""), "signal") << waiter.err();
  const run_result inspected = admit({ADMIT_CLI, "inspect", "--redis", server_.url(), "--json", "busy"}, 10s);
  const auto j = nlohmann::json::parse(inspected.out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("queue")) << inspected.out << inspected.err;
  EXPECT_EQ(j["queue"].size(), 0U) << "the signalled waiter is still queued: " << inspected.out;
  EXPECT_FALSE(ran());
}

// Redis failures before the command starts: 75 when waiting may help (refused), 69 when not (auth); bad names: 2.
TEST_F(AdmitRunRedis, RedisFailuresAndBadNames) {
  const run_result brace = admit(
      args{ADMIT_CLI, "run", "--redis", server_.url(), "--name", "a{b}", "--concurrency", "1", "--"} + records_ran());
  EXPECT_EQ(brace.status, 2) << brace.err;
  for (const args& bad : {args{"--on-lease-lost=later"}, args{"--lease-ttl", "0s"}, args{"--kill-after", "soon"}}) {
    const run_result r = admit(run("x", args{"--concurrency", "1"} + bad + args{"--"} + records_ran()));
    EXPECT_EQ(r.status, 2) << testing::PrintToString(bad) << r.err;
  }
  // A rate Redis would slow (it spaces starts a whole number of microseconds apart) is refused, as admit decide
  // refuses it: 3000/s ran as 2994/s.
  const run_result slowed = admit(run("x", args{"--rate", "3000/s", "--"} + records_ran()));
  EXPECT_EQ(slowed.status, 2) << slowed.err;
  EXPECT_EQ(slowed.err,
            "admit run: --rate 3000/s would be slowed to 2994.012/s: Redis spaces requests a whole number of "
            "microseconds apart (334, not 333.333); use --rate 1/333us or 1/334us (3003.003/s or 2994.012/s)\n");
  EXPECT_EQ(admit(run("kept", {"--rate", "1/334us", "--", "true"})).status, 0);
  // A rate too slow for Redis is named as it was written (it was named as its conversion, "0.0000000003170979.../s").
  const run_result glacial = admit(run("x", args{"--rate", "1/100year", "--"} + records_ran()));
  EXPECT_EQ(glacial.status, 2) << glacial.err;
  EXPECT_EQ(glacial.err.rfind("admit run: invalid --rate \"1/100year\" with --burst 1: ", 0), 0U) << glacial.err;

  redis_server locked({.requirepass = "right"});
  const std::string wrong = "redis://:wrong@127.0.0.1:" + std::to_string(locked.port());
  const run_result auth =
      admit(args{ADMIT_CLI, "run", "--redis", wrong, "--name", "x", "--concurrency", "1", "--"} + records_ran());
  EXPECT_EQ(auth.status, 69) << auth.err;
  EXPECT_EQ(auth.err.find("wrong"), std::string::npos) << "the password shown: " << auth.err;

  // Redis not answering (its calls time out): 75 too.
  server_.pause(2000ms);
  const run_result silent = admit(run("x", args{"--concurrency", "1", "--json", "--"} + records_ran()), 30s);
  EXPECT_EQ(silent.status, 75) << silent.err;
  EXPECT_EQ(event(silent.err, "not_admitted").value("reason", ""), "redis") << silent.err;

  const std::string url = where();
  server_.kill();
  const run_result refused = admit(
      args{ADMIT_CLI, "run", "--redis", url, "--name", "x", "--concurrency", "1", "--json", "--"} + records_ran(), 30s);
  EXPECT_EQ(refused.status, 75) << refused.err;
  EXPECT_EQ(event(refused.err, "not_admitted").value("reason", ""), "redis") << refused.err;
  EXPECT_FALSE(ran());
}

// --timeout is kept when Redis stops answering while a run waits (paused: its calls get no answer; killed: refused):
// the run gives up within 100 ms of it, and says that Redis, at its URL, did not answer (the call that would take
// the waiter out of the queue) or why it cannot be reached — not only that the limit was busy. Its process ends soon
// after (the teardown waits for no answer either).
TEST_F(AdmitRunRedis, TheTimeoutIsKeptWhenRedisStopsAnswering) {
  const auto holder = hold("silent");
  const auto waits_while = [&](const std::function<void()>& fault, const std::string& reason) {
    const auto start = steady::now();
    child_process waiter(run("silent", args{"--concurrency", "1", "--timeout", "1s", "--json", "--"} + records_ran()));
    EXPECT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
    fault();
    const run_result r = finish(waiter);
    const auto took = steady::now() - start;
    EXPECT_EQ(r.status, 75) << r.err;
    const auto refused = event(r.err, "not_admitted");
    EXPECT_EQ(refused.value("reason", ""), reason) << r.err;
    EXPECT_LE(refused.value("waited_s", 99.0), 1.1) << r.err;
    EXPECT_LT(took, 1800ms) << r.err;  // a teardown that waited for Redis's answer would add its 1 s call timeout
    return refused.value("message", "");
  };
  const std::string paused = waits_while([&] { server_.pause(5000ms); }, "redis");
  EXPECT_NE(paused.find("not admitted within --timeout: " + where() + " did not answer (no reply within 50ms"),
            std::string::npos)
      << paused;
  server_.unpause();
  const std::string killed = waits_while([&] { server_.kill(); }, "redis");
  EXPECT_NE(killed.find("cannot connect to " + where() + ": connection refused"), std::string::npos) << killed;
  EXPECT_FALSE(ran());
}

// With --timeout, Redis has all of it to answer at start: paused for its first second of a 10 s --timeout, it admits
// the run (the start's check gave up after 1 s).
TEST_F(AdmitRunRedis, RedisSlowToAnswerAtStartHasTheWholeTimeout) {
  server_.pause(1500ms);
  const run_result r = run_to_end(run("slow", args{"--concurrency", "1", "--timeout", "10s", "--"} + records_ran()));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ran());
}

// Without --timeout a run waits through a Redis outage, and says so: once when Redis goes away (it used to stay
// silent until killed), once when it is back — also when the wait ends at once then (it used to end without saying
// so); then it runs. (Redis comes back empty: the holder's lease is gone.)
TEST_F(AdmitRunRedis, AWaitWithoutTimeoutSaysRedisWentAwayAndRunsOnceItIsBack) {
  const auto holder = hold("outage");
  child_process waiter(run("outage", args{"--concurrency", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  server_.kill();
  ASSERT_TRUE(wait_for_event(waiter, {"redis_unreachable"}, 10s)) << waiter.err();
  server_.start();
  const run_result r = finish(waiter);
  EXPECT_EQ(r.status, 0) << r.err;
  const auto gone = event(r.err, "redis_unreachable");
  EXPECT_NE(gone.value("message", "").find("cannot connect to " + where()), std::string::npos) << r.err;
  EXPECT_FALSE(event(r.err, "redis_back").is_null()) << r.err;
  EXPECT_TRUE(ran());
}

// 4. The environment: ADMIT_NAME, ADMIT_LEASE_ID (the "started" event's), ADMIT_FENCING_TOKEN strictly increasing.
TEST_F(AdmitRunRedis, Environment) {
  std::int64_t last = -1;
  for (int i = 0; i < 3; ++i) {
    const run_result r = admit(run("env", {"--concurrency", "2", "--json", "--", "sh", "-c",
                                           "printf '%s|%s|%s' \"$ADMIT_NAME\" \"$ADMIT_LEASE_ID\" "
                                           "\"$ADMIT_FENCING_TOKEN\""}));
    ASSERT_EQ(r.status, 0) << r.err;
    const auto started = event(r.err, "started");
    ASSERT_TRUE(started.is_object()) << r.err;
    ASSERT_TRUE(started["fencing_token"].is_number_integer()) << r.err;
    const auto token = started["fencing_token"].get<std::int64_t>();
    EXPECT_FALSE(started.value("lease_id", "").empty()) << r.err;
    EXPECT_EQ(r.out, "env|" + started.value("lease_id", "") + "|" + std::to_string(token));
    EXPECT_GT(token, last);
    last = token;
  }
}

// 5. The lease lost while the command runs (Redis does not answer for longer than the TTL): the command gets SIGTERM,
// admit run exits 124 and says which lease it lost. The text form with a TTL of 3 s also times the SIGTERM: the lease
// is lost once the TTL has passed since the last renewal Redis confirmed (from then on Redis may grant the permit to
// another), not when a later renewal's call times out or Redis answers again. The pause begins just after a renewal
// (the only script call while the command runs), so the lease expires 3 s after it; bound: 3 s and a margin of 500 ms.
TEST_F(AdmitRunRedis, LeaseLostTerminatesTheCommandAndExits124) {
  const std::string script =
      "trap 'echo TERM >> \"$1\"; exit 0' TERM\n"
      "echo \"ready $ADMIT_LEASE_ID\" >> \"$1\"\n"
      "while :; do sleep 1 </dev/null >/dev/null 2>&1 & wait $!; done\n";
  for (const bool json : {false, true}) {
    SCOPED_TRACE(json ? "--json, TTL 1 s" : "text, TTL 3 s");
    std::filesystem::remove(ran_);
    const args ttl = json ? args{"--lease-ttl", "1s", "--json"} : args{"--lease-ttl", "3s"};
    child_process c(run("lost", args{"--concurrency", "1"} + ttl + args{"--"} + records_ran(script)));
    ASSERT_TRUE(eventually([&] { return read_text(ran_).find('\n') != std::string::npos; })) << c.err();
    const std::string lease = read_text(ran_).substr(6, read_text(ran_).find('\n') - 6);
    ASSERT_FALSE(lease.empty());
    const long long renewals = server_.calls("fcall");
    ASSERT_TRUE(eventually([&] { return server_.calls("fcall") > renewals; }, 5s));
    const auto paused = steady::now();
    server_.pause(json ? 2500ms : 5000ms);
    EXPECT_TRUE(eventually([&] { return read_text(ran_).find("TERM") != std::string::npos; }, 10s));
    const auto delay = std::chrono::duration<double, std::milli>(steady::now() - paused).count();
    server_.unpause();  // the next round starts with a server that answers
    const run_result r = finish(c, 15s);
    EXPECT_EQ(r.status, 124) << r.err;
    EXPECT_EQ(read_text(ran_), "ready " + lease + "\nTERM\n");
    if (!json) {
      std::cout << "[ measured ] the command got SIGTERM " << delay
                << " ms after Redis stopped answering, just after a renewal (TTL 3 s)\n";
      EXPECT_LT(delay, 3500.0) << "the command ran on after its lease expired";
      EXPECT_NE(r.err.find(lease), std::string::npos) << "no message naming the lease " << lease << ": " << r.err;
      EXPECT_NE(r.err.find("lost"), std::string::npos) << r.err;
      continue;
    }
    const auto lost = event(r.err, "lease_lost");
    ASSERT_TRUE(lost.is_object()) << r.err;
    EXPECT_EQ(lost.value("lease_id", ""), lease) << r.err;
    EXPECT_EQ(lost.value("action", ""), "term") << r.err;
    EXPECT_EQ(event(r.err, "exited")["admit_exit_status"], 124) << r.err;
  }
}

// Redis restarted without its data while a run holds its lease: the next renewal finds the lease gone, the command is
// told to stop, and the message says Redis no longer has the lease, a restart without its data among the causes (it
// said "Redis did not renew it within --lease-ttl", a second after Redis had answered again).
TEST_F(AdmitRunRedis, ALeaseLostToARestartWithoutDataIsSaidSo) {
  const std::string script =
      "trap 'exit 0' TERM\n"
      "echo ready >> \"$1\"\n"
      "while :; do sleep 1 </dev/null >/dev/null 2>&1 & wait $!; done\n";
  child_process c(run("restarted", args{"--concurrency", "1", "--lease-ttl", "1500ms", "--"} + records_ran(script)));
  ASSERT_TRUE(eventually([&] { return read_text(ran_) == "ready\n"; })) << c.err();
  server_.restart();  // empty: no persistence
  const run_result r = finish(c, 15s);
  EXPECT_EQ(r.status, 124) << r.err;
  EXPECT_NE(r.err.find("was lost (Redis no longer has it: no renewal reached Redis within --lease-ttl, or Redis lost "
                       "it, restarted or failed over without its data)"),
            std::string::npos)
      << r.err;
}

// The holder cut off from Redis (its requests and replies lost) while another queues directly: Redis lets the
// holder's lease expire after the TTL and grants the permit to the other. By then the holder's command must have been
// told to stop: the two commands overlap by no more than a margin (150 ms) for the signal to be handled.
TEST_F(AdmitRunRedis, PartitionedHolderStopsBeforeItsPermitIsGrantedAgain) {
  tcp_proxy proxy(server_.port());
  const std::string log = dir_ / "partition.log";
  child_process holder(args{ADMIT_CLI, "run", "--redis", proxy.url(), "--name", "part", "--concurrency", "1",
                            "--lease-ttl", "3s", "--json", "--"} +
                       record_command(log, "holder", "term"));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  ASSERT_TRUE(eventually([&] { return start_order(read_log(log)).size() == 1; })) << read_text(log);
  const long long renewals = server_.calls("fcall");
  ASSERT_TRUE(eventually([&] { return server_.calls("fcall") > renewals; }, 5s));
  proxy.drop_requests(true);
  proxy.drop_replies(true);
  child_process waiter(run(
      "part", args{"--concurrency", "1", "--lease-ttl", "3s", "--json", "--"} + record_command(log, "waiter", "0")));
  ASSERT_TRUE(wait_for_event(waiter, {"started"}, 15s)) << waiter.err();
  EXPECT_EQ(finish(waiter, 10s).status, 0) << waiter.err();
  EXPECT_EQ(finish(holder, 15s).status, 124) << holder.err();
  std::int64_t holder_end = 0, waiter_start = 0;
  for (const auto& e : read_log(log)) {
    if (!e.start && e.label == "holder") holder_end = e.ns;
    if (e.start && e.label == "waiter") waiter_start = e.ns;
  }
  ASSERT_TRUE(holder_end > 0 && waiter_start > 0) << read_text(log);
  const double overlap_ms = static_cast<double>(holder_end - waiter_start) / 1e6;
  std::cout << "[ measured ] the partitioned holder's command ended " << overlap_ms
            << " ms after the next holder's started (negative: before)\n";
  EXPECT_LT(overlap_ms, 150.0) << "two commands ran at once under --concurrency 1\n" << read_text(log);
}

// --on-lease-lost=kill: SIGKILL at once; term with --kill-after: SIGTERM, then SIGKILL for a command that stays.
TEST_F(AdmitRunRedis, LeaseLostKillAndKillAfter) {
  const std::string script =
      "trap 'echo TERM >> \"$1\"' TERM\n"
      "echo ready >> \"$1\"\n"
      "while :; do sleep 1 </dev/null >/dev/null 2>&1 & wait $!; done\n";
  for (const bool kill_at_once : {true, false}) {
    SCOPED_TRACE(kill_at_once ? "kill" : "term, kill after 300ms");
    std::filesystem::remove(ran_);
    const args how = kill_at_once ? args{"--on-lease-lost=kill"} : args{"--kill-after", "300ms"};
    child_process c(run(
        "lost", args{"--concurrency", "1", "--lease-ttl", "1s", "--json"} + how + args{"--"} + records_ran(script)));
    ASSERT_TRUE(eventually([&] { return read_text(ran_) == "ready\n"; })) << c.err();
    server_.pause(2500ms);
    const run_result r = finish(c, 15s);
    EXPECT_EQ(r.status, 124) << r.err;
    EXPECT_EQ(read_text(ran_), kill_at_once ? "ready\n" : "ready\nTERM\n");
    EXPECT_EQ(event(r.err, "lease_lost").value("action", ""), kill_at_once ? "kill" : "term") << r.err;
    const auto exited = event(r.err, "exited");
    ASSERT_TRUE(exited.is_object()) << r.err;
    EXPECT_EQ(exited["signal"], "SIGKILL") << r.err;
    EXPECT_EQ(exited["admit_exit_status"], 124) << r.err;
  }
}

// --rate through Redis: 8 queued starts at 5/s, burst 1, at least 200 ms apart from the first's.
TEST_F(AdmitRunRedis, RateSpacesTheStarts) { rate_spacing(ADMIT_CLI, {"--redis", server_.url()}, dir_, 8); }

// --rate alone: queued runs of several processes start in their order of arrival, as the fencing tokens of their
// admissions say. (Each waiter used to retry on its own: 6 runs started in orders such as 1 2 6 4 5 3.)
TEST_F(AdmitRunRedis, RateOnlyRunsStartInArrivalOrder) {
  const std::string log = dir_ / "paced.log";
  std::vector<std::optional<child_process>> children(6);
  for (std::size_t i = 0; i < children.size(); ++i) {
    children[i].emplace(run("paced", {"--rate", "10/s", "--json", "--"}) + record_command(log, std::to_string(i), "0"));
    ASSERT_TRUE(wait_for_event(*children[i], {"waiting", "started"})) << i << ": " << children[i]->err();
  }
  for (auto& c : children) EXPECT_EQ(c->wait(), 0) << c->err();
  EXPECT_EQ(labels_by_token(read_log(log)), labels(6)) << read_text(log);
}

// --concurrency with --rate is one decision: a run that waits for the rate holds no permit meanwhile — inspect lists it
// in the queue, and the permit stays free. (It used to take the permit first and hold it while it waited.)
TEST_F(AdmitRunRedis, ARunWaitingForTheRateHoldsNoPermit) {
  const args both{"--concurrency", "2", "--rate", "1/min", "--json", "--"};
  child_process first(run("both", both + args{"sleep", "60"}));
  ASSERT_TRUE(wait_for_event(first, {"started"})) << first.err();
  child_process second(run("both", both + records_ran()));
  ASSERT_TRUE(wait_for_event(second, {"waiting"})) << second.err();
  const run_result r = admit({ADMIT_CLI, "inspect", "--redis", server_.url(), "--json", "both"}, 10s);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j["holders"].is_array() && j["queue"].is_array()) << r.out;
  EXPECT_EQ(j["holders"].size(), 1U) << r.out;
  EXPECT_EQ(j["queue"].size(), 1U) << r.out;
  EXPECT_EQ(j["capacity"], 2) << r.out;
  EXPECT_EQ(j["available"], 1) << r.out;  // the waiter's permit is not taken
  EXPECT_EQ(j["rate"]["rate"], "1/min") << r.out;
  EXPECT_EQ(j["rate"]["tokens"], 0) << r.out;
  const auto waiting = event(second.err(), "waiting");
  EXPECT_EQ(waiting["held"], 1) << waiting.dump();
  // The rate is what it waits for, and the status says so.
  EXPECT_TRUE(waiting["rate_wait_ms"].is_number()) << waiting.dump();
  EXPECT_FALSE(ran());
}

// --classes: a run within its class's guaranteed share starts before an earlier run of a class that borrows.
TEST_F(AdmitRunRedis, ARunWithinItsClassShareStartsBeforeAnEarlierBorrower) {
  class_share_before_arrival(ADMIT_CLI, {"--redis", server_.url()}, dir_);
}

// 7. Four workers, 25 queries each, through `admit run --concurrency 3` in front of a database that counts its
// connections: it never sees more than 3 at once, and all 100 queries run.
TEST_F(AdmitRunRedis, FourWorkersNeverOverloadTheDatabase) {
  tiny_database db(5ms);
  const std::string loop =
      "admit=$1 url=$2; shift 2\n"
      "for i in $(seq 25); do \"$admit\" run --redis \"$url\" --concurrency 3 --name db -- \"$@\" || exit 1; done\n";
  std::vector<std::optional<child_process>> workers(4);
  for (auto& w : workers) {
    w.emplace(args{"/bin/sh", "-c", loop, "sh", ADMIT_CLI, server_.url()} +
              admit::redis::testing::role_argv(role_test, {"query", std::to_string(db.port())}));
  }
  for (auto& w : workers) EXPECT_EQ(w->wait(), 0) << w->err();
  std::cout << "[ measured ] the database saw at most " << db.most() << " connections at once\n";
  EXPECT_LE(db.most(), 3);
  EXPECT_EQ(db.total(), 100);
}

#endif

}  // namespace
