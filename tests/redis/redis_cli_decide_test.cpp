// `admit decide` and `admit inspect` end to end: the real binary against a real redis-server — decide's exit statuses
// (0 admitted, 75 refused, 2 bad input), the JSON form, state shared with the library under {name}:key, --wait until
// admitted, and the failure policy when Redis is not there; inspect's view of a semaphore held and waited on by the
// library.
#include <gtest/gtest.h>

#include <chrono>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admit/redis/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "child_process.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;

using admit::redis::testing::child_process;
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
  EXPECT_EQ(admit_cli({"decide", "--redis", url, "-a", "pacer", "--rate", "1/s", "k"}).status, 2);
  EXPECT_EQ(admit_cli({"decide", "--redis", "http://x", "--rate", "1/s", "k"}).status, 2);
  EXPECT_EQ(admit_cli({"decide", "--redis", url, "--rate", "1/s", "--cost", "-1", "k"}).status, 2);
  EXPECT_EQ(admit_cli({"decide", "--redis", url, "--rate", "1/s", "--timeout", "soon", "k"}).status, 2);
}

#endif

#ifdef ADMIT_CLI

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
