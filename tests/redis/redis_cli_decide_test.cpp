// `admit decide` and `admit inspect` end to end: the real binary against a real redis-server — decide's exit statuses
// (0 admitted, 75 refused, 2 bad input), the JSON form, state shared with the library under {name}:key, --wait until
// admitted, and the failure policy when Redis is not there; inspect's view of a semaphore held and waited on by the
// library.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <stop_token>
#include <string>
#include <thread>

#include "admit/redis/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;

struct run_result {
  int status = -1;
  std::string out;
};

#ifdef ADMIT_CLI
// Runs `admit <args>` with stderr discarded (args are test literals, no quoting needed).
run_result admit_cli(const std::string& args) {
  run_result r;
  FILE* p = popen((std::string(ADMIT_CLI) + " " + args + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  for (std::size_t got; (got = std::fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), got);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
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
  const std::string common = "decide --redis " + server.url() + " --rate 1/h --burst 2 --name jobs nightly";
  const run_result first = admit_cli(common);
  EXPECT_EQ(first.status, 0) << first.out;
  EXPECT_EQ(first.out.rfind("admitted: \"nightly\" n=1 limit=2 remaining=1", 0), 0u) << first.out;
  EXPECT_EQ(admit_cli(common).status, 0);
  const run_result third = admit_cli(common + " --json");
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
  const std::string common = "decide --redis " + server.url() +
                             " --rate 1/s --burst 1 k";  // a wait of up to 1 s: longer than starting the process
  ASSERT_EQ(admit_cli(common).status, 0);
  const run_result waited = admit_cli(common + " --wait --max-wait 5s");
  EXPECT_EQ(waited.status, 0) << waited.out;
  EXPECT_NE(waited.out.find(" waited="), std::string::npos) << waited.out;
  // --max-wait shorter than the wait: refused without waiting.
  const run_result hourly = admit_cli("decide --redis " + server.url() + " --rate 1/h --name h k");
  ASSERT_EQ(hourly.status, 0);
  EXPECT_EQ(admit_cli("decide --redis " + server.url() + " --rate 1/h --name h --wait --max-wait 1s k").status, 75);
}

TEST_F(AdmitDecide, WindowsAndCostAboveTheLimit) {
  redis_server server;
  const std::string common = "decide --redis " + server.url() + " -a sliding-log --rate 3/s --window 1s";
  EXPECT_EQ(admit_cli(common + " -n 3 k").status, 0);
  EXPECT_EQ(admit_cli(common + " k").status, 75);
  EXPECT_EQ(admit_cli(common + " -n 4 k").status, 2);  // can never be admitted
}

TEST_F(AdmitDecide, RedisDownIsRefusedUnlessFailOpen) {
  redis_server server;
  const std::string url = server.url();
  server.kill();
  EXPECT_EQ(admit_cli("decide --redis " + url + " --timeout 100ms --rate 1/s k").status, 75);
  const run_result open = admit_cli("decide --redis " + url + " --timeout 100ms --rate 1/s --fail-open --json k");
  EXPECT_EQ(open.status, 0);
  EXPECT_NE(open.out.find("\"decided_by\": \"failure_policy\""), std::string::npos) << open.out;
}

TEST_F(AdmitDecide, BadInputIsExitStatus2) {
  redis_server server;
  const std::string url = server.url();
  EXPECT_EQ(admit_cli("decide --redis " + url + " --rate fast k").status, 2);
  EXPECT_EQ(admit_cli("decide --redis " + url + " -a pacer --rate 1/s k").status, 2);
  EXPECT_EQ(admit_cli("decide --redis http://x --rate 1/s k").status, 2);
  EXPECT_EQ(admit_cli("decide --redis " + url + " --rate 1/s --cost -1 k").status, 2);
  EXPECT_EQ(admit_cli("decide --redis " + url + " --rate 1/s --timeout soon k").status, 2);
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

  const run_result text = admit_cli("inspect --redis " + server.url() + " db");
  EXPECT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("semaphore \"db\": capacity 2, available 0, 1 holder(s), 1 waiting"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(held->id() + "  permits 2  fencing token " + std::to_string(held->fencing_token())),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("1. "), std::string::npos) << text.out;

  const run_result json = admit_cli("inspect --redis " + server.url() + " --json db");
  EXPECT_EQ(json.status, 0) << json.out;
  EXPECT_NE(json.out.find("\"capacity\": 2, \"available\": 0"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"fencing_token\": " + std::to_string(held->fencing_token())), std::string::npos)
      << json.out;

  EXPECT_EQ(admit_cli("inspect --redis " + server.url() + " nothing-here").status, 1);  // looking creates nothing
  EXPECT_EQ(server.admin({"EXISTS", "{nothing-here}:meta"}), "0");
  EXPECT_EQ(admit_cli("inspect --redis " + server.url() + " --most 0 db").status, 2);
  EXPECT_EQ(admit_cli("inspect --redis " + server.url() + " \"a{b}\"").status, 2);
  waiting.request_stop();
}

#endif

}  // namespace
