// `admit decide` and `admit inspect` end to end: the real binary (run without a shell) against a real redis-server —
// decide's exit statuses (0 admitted, 75 refused, 2 bad input), the JSON form, state shared with the library under
// {name}:key, --wait until admitted, and the failure policy when Redis is not there; inspect's checks of its
// arguments and its view of a semaphore held and waited on by the library. Redis failures: redis_cli_failures_test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "child_process.hpp"
#include "cli_testing.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using admit::redis::testing::child_process;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using admit::redis::testing::run_program;
using admit::redis::testing::run_result;
using namespace admit::redis::testing::cli;

// `a` followed by `more`.
args operator+(args a, const args& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

class AdmitDecide : public cli_test {};

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

// A decision that cannot be written (a full disk, a closed reader) is not a success: exit 1, said on stderr, as
// replay and recommend do. It exited 0 (or 75) in silence, and a script reading the answer got none.
TEST_F(AdmitDecide, AWriteErrorOnStandardOutputIsExitStatus1) {
  redis_server server;
  for (const bool json : {false, true}) {
    args a = {"/bin/sh", "-c", "exec \"$0\" \"$@\" > /dev/full", ADMIT_CLI, "decide", "--redis", server.url(), "--rate",
              "100/s",   "k"};
    if (json) a.push_back("--json");
    const run_result r = run_program(a);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(r.err, "admit decide: write error on standard output\n");
  }
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

// Another algorithm on a key that one already keeps its state in: refused (a failure waiting cannot fix), the message
// naming the key and why, for each pair of state shapes (integers: gcra, token-bucket; windows: fixed, sliding).
TEST_F(AdmitDecide, AnotherAlgorithmsKeyIsNamedWithTheCause) {
  redis_server server;
  // A rate of 5/h and windows of 1h: no state expires between the two calls (with 5/s a gcra key lived 200 ms and a
  // fixed window's until its second ended, and the second call, finding none, was admitted).
  const auto decide = [&](std::string_view algorithm, const std::string& key) {
    args a{"decide", "--redis", server.url(), "--rate", "5/h", "--name", "api", "-a", std::string(algorithm)};
    if (algorithm.ends_with("window") || algorithm == "sliding-log") a = a + args{"--window", "1h"};
    return admit_cli(a + args{key});
  };
  // (A sliding log keeps a sorted set, the others a string: Redis answers WRONGTYPE, which names no key, to each on
  // the other's.)
  for (const auto& [first, second] :
       {std::pair{"gcra", "sliding-window"}, std::pair{"fixed-window", "gcra"},
        std::pair{"sliding-window", "token-bucket"}, std::pair{"gcra", "fixed-window"},
        std::pair{"fixed-window", "sliding-log"}, std::pair{"sliding-log", "gcra"},
        std::pair{"sliding-log", "token-bucket"}, std::pair{"sliding-log", "fixed-window"},
        std::pair{"sliding-log", "sliding-window"}}) {
    const std::string key = std::string(first) + "-then-" + second;
    ASSERT_EQ(decide(first, key).status, 0) << first;
    const run_result r = decide(second, key);
    EXPECT_EQ(r.status, 69) << key << ": " << r.err;
    EXPECT_NE(r.err.find("key {api}:" + key + " does not hold"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("another algorithm's state"), std::string::npos) << r.err;
  }
  // A key something else wrote, of a type no algorithm keeps: the same.
  server.admin({"LPUSH", "{api}:listed", "x"});
  for (const char* algorithm : {"gcra", "token-bucket", "fixed-window", "sliding-window", "sliding-log"}) {
    const run_result r = decide(algorithm, "listed");
    EXPECT_EQ(r.status, 69) << algorithm << ": " << r.err;
    EXPECT_NE(r.err.find("key {api}:listed does not hold"), std::string::npos) << algorithm << ": " << r.err;
  }
}

// An ACL user: one whose rules leave PING out (docs/redis.md's smallest rule set does) is served; one refused a
// command is told it is not allowed (NOPERM), not that authentication failed; a database it may not select is not
// said not to exist.
TEST_F(AdmitDecide, AclRefusalsAreNamedForWhatTheyAre) {
  redis_server server;
  const auto add_user = [&](const std::string& name, const args& rules) {
    ASSERT_EQ(server.admin(args{"ACL", "SETUSER", name, "reset", "on", ">pw", "~{api}", "~{api}:*"} + rules), "OK");
  };
  add_user("noping", {"+@all", "-ping", "-select"});
  add_user("noscripts", {"+@all", "-fcall", "-evalsha", "-eval", "-function", "-script"});
  const std::string at = "@127.0.0.1:" + std::to_string(server.port());
  const auto decide = [&](const std::string& url) {
    return admit_cli({"decide", "--redis", url, "--name", "api", "--rate", "5/s", "k"});
  };
  const run_result served = decide("redis://noping:pw" + at);
  EXPECT_EQ(served.status, 0) << served.err;
  const run_result select = decide("redis://noping:pw" + at + "/3");
  EXPECT_EQ(select.status, 69) << select.err;
  EXPECT_NE(select.err.find("may not select database 3"), std::string::npos) << select.err;
  EXPECT_EQ(select.err.find("does not exist"), std::string::npos) << select.err;
  const run_result refused = decide("redis://noscripts:pw" + at);
  EXPECT_EQ(refused.status, 69) << refused.err;
  EXPECT_NE(refused.err.find("not allowed at redis://noscripts@"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("NOPERM"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("authentication failed"), std::string::npos) << refused.err;
  const run_result missing = decide("redis://127.0.0.1:" + std::to_string(server.port()) + "/99");
  EXPECT_NE(missing.err.find("database 99 does not exist"), std::string::npos) << missing.err;
}

// A cost above the limit is bad input whether Redis answers or not: never the failure policy's answer (with
// --fail-open an admission), never retried by --wait.
TEST_F(AdmitDecide, ACostAboveTheLimitIsBadInputWithRedisDown) {
  redis_server server;
  const std::string url = server.url();
  server.kill();
  for (const args& more : {args{}, args{"--fail-open"}, args{"--wait"}}) {
    const run_result r = admit_cli(
        args{"decide", "--redis", url, "--timeout", "100ms", "--rate", "10/s", "--cost", "2"} + more + args{"k"});
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--cost 2 is more than the limit 1: it can never be admitted"), std::string::npos) << r.err;
  }
  // Rate inf: admitted without asking Redis, whatever the cost.
  const run_result inf =
      admit_cli({"decide", "--redis", url, "--timeout", "100ms", "--rate", "inf", "--cost", "2", "k"});
  EXPECT_EQ(inf.status, 0) << inf.err;
  EXPECT_NE(inf.out.find("decided_by=unlimited"), std::string::npos) << inf.out;
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
  // The options' values are read as replay reads them (cli/common/values.hpp): the same words for the same mistakes.
  const auto refused = [&](const args& more, const std::string& message) {
    const run_result r = admit_cli(args{"decide", "--redis", url, "--rate", "1/s"} + more + args{"k"});
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err, "admit decide: " + message + "\n");
    EXPECT_EQ(r.out, "");
  };
  refused({"-a", "pacer"},
          "invalid --algorithm \"pacer\": it has no distributed form; use gcra, token-bucket, fixed-window, "
          "sliding-window or sliding-log");
  refused({"--cost", "-1"}, "invalid --cost \"-1\": must be a whole number from 0 to 1000000000");
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
  // (The second: said before the rate is fitted to the window, where a rate fitted to a window that is refused anyway
  // was the advice.)
  for (const auto& [rate, window, nearest] :
       {std::tuple{"2000000/s", "1500ns", "1us or 2us"}, std::tuple{"100/s", "1.0000001s", "1s or 1000001us"}}) {
    const run_result r =
        admit_cli({"decide", "--redis", url, "-a", "fixed-window", "--rate", rate, "--window", window, "k"});
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err, "admit decide: --window " + std::string(window) +
                         " is not a whole number of microseconds, which Redis counts windows in; use --window " +
                         nearest + "\n");
  }
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
  refused({"a{b}"}, "invalid NAME \"a{b}\": name must not contain '{' or '}' (it becomes the hash tag), got \"a{b}\"");
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
  EXPECT_NE(text.out.find("limit \"db\" at redis://127.0.0.1:" + std::to_string(server.port()) +
                          ": capacity 2, available 0, 1 holder(s), 1 waiting"),
            std::string::npos)
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

  const run_result none = admit_cli({"inspect", "--redis", server.url(), "nothing-here"});
  EXPECT_EQ(none.status, 1);  // looking creates nothing
  EXPECT_NE(none.err.find("no limit named \"nothing-here\" on redis://"), std::string::npos) << none.err;
  EXPECT_EQ(server.admin({"EXISTS", "{nothing-here}:meta"}), "0");
  EXPECT_EQ(admit_cli({"inspect", "--redis", server.url(), "--most", "0", "db"}).status, 2);
  EXPECT_EQ(admit_cli({"inspect", "--redis", server.url(), "a{b}"}).status, 2);
  waiting.request_stop();
}

#endif

}  // namespace
