// The differential test with time moving: the same random sequence of steps — time advancing by 0 to 250 ms, then a
// try_acquire of 1 to 3 in a random class, or the release of a random held request — decided by the local admission
// on a manual clock and by admit::redis::admission on the same times, set in Redis through the script's debug clock
// (the library's debug builds: meta's debug_now). After every step both have admitted the same requests: the rate's
// refill, the burst, the classes' assured buckets and guarantees agree as time passes, not only at one instant.
// Skipped where the script has no debug clock (a release build).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "admit/admission.hpp"
#include "admit/admission_options.hpp"
#include "admit/rate.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "admit/testing/manual_clock.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"

namespace admission_time_test {

using namespace std::chrono_literals;
using admit::admission_options;
using admit::redis::connection;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using clock = admit::testing::basic_manual_clock<struct admission_time_test_tag>;

// The Redis time the test starts at (µs since the Unix epoch): any fixed value; the local clock starts at 0.
constexpr std::int64_t origin_us = 1'800'000'000'000'000;

// Whether the script runs on meta's debug_now: a debug build's script reports that time as the server's.
bool has_debug_clock(connection& conn, redis_server& server, const std::string& name) {
  (void)server.admin({"HSET", "{" + name + "}:meta", "debug_now", std::to_string(origin_us)});
  admit::redis::admission probe(conn, name, {.max_in_flight = 1});
  (void)probe.try_acquire(0);  // makes it (looking alone would not)
  const auto [snap, ec] = probe.inspect();
  (void)server.admin({"DEL", "{" + name + "}:meta"});
  return !ec && snap.server_time == std::chrono::microseconds(origin_us);
}

void expect_the_same_decisions_over_time(const admission_options& limits, const std::string& name, unsigned seed) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  if (!has_debug_clock(conn, server, name + "-probe")) GTEST_SKIP() << "the script has no debug clock in this build";
  clock::reset();
  admit::basic_admission<clock> local(limits);
  const std::string meta = "{" + name + "}:meta";
  (void)server.admin({"HSET", meta, "debug_now", std::to_string(origin_us)});
  admit::redis::admission remote(conn, name, limits, {.lease_ttl = std::chrono::hours(1), .auto_renew = false});

  std::mt19937 rng(seed);
  std::map<int, std::pair<admit::permit, admit::redis::lease>> held;
  std::int64_t elapsed_us = 0;
  int admitted = 0, refused = 0;
  for (int step = 0; step < 300; ++step) {
    const std::int64_t dt_us = static_cast<std::int64_t>(rng() % 6) * 50'000;  // 0 to 250 ms, whole milliseconds
    elapsed_us += dt_us;
    clock::advance(std::chrono::microseconds(dt_us));
    (void)server.admin({"HSET", meta, "debug_now", std::to_string(origin_us + elapsed_us)});
    if (!held.empty() && rng() % 100 < 40) {
      auto it = held.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % held.size()));
      it->second.first.release();
      ASSERT_EQ(it->second.second.release().first, admit::redis::lease::release_status::released) << "step " << step;
      held.erase(it);
      continue;
    }
    const std::size_t priority = rng() % std::max<std::size_t>(limits.classes.size(), 1);
    const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 3);
    auto l = local.try_acquire(priority, n);
    auto r = remote.try_acquire(priority, n);
    ASSERT_EQ(static_cast<bool>(l), static_cast<bool>(r))
        << "step " << step << " at " << elapsed_us / 1000 << " ms: class " << priority << ", n " << n << " — local "
        << (l ? "admitted" : make_error_code(l.error()).message()) << ", Redis "
        << (r ? "admitted" : r.error().message());
    if (l) {
      ++admitted;
      held.emplace(step, std::pair{std::move(*l), std::move(*r)});
    } else {
      ++refused;
      EXPECT_EQ(make_error_code(l.error()), r.error()) << "step " << step;
    }
  }
  EXPECT_GT(admitted, 30);  // both outcomes were exercised, many times
  EXPECT_GT(refused, 30);
}

// A rate of 10/s with a burst of 4 and 8 permits, one class: the bucket refills between steps, and binds more often
// than the permits (a rate of 11/s on one side fails the test at step 109 of the first seed).
TEST(RedisAdmissionTime, DecidesAsTheLocalAdmissionDoesAsTimeMoves) {
  for (unsigned seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_the_same_decisions_over_time({.rate = admit::rate::parse("10/s"), .burst = 4, .max_in_flight = 8},
                                        "time-" + std::to_string(seed), seed);
  }
}

// Classes: shares 0.5, 0.3 and 0, so each class has its own assured bucket refilling at its share of the rate (4/s;
// 5/s on one side fails the test within 15 steps).
TEST(RedisAdmissionTime, DecidesAsTheLocalAdmissionDoesAsTimeMovesWithClasses) {
  for (unsigned seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_the_same_decisions_over_time({.rate = admit::rate::parse("4/s"),
                                         .burst = 6,
                                         .max_in_flight = 12,
                                         .classes = {{"interactive", 0.5}, {"batch", 0.3}, {"scavenger", 0.0}}},
                                        "time-classes-" + std::to_string(seed), seed);
  }
}

}  // namespace admission_time_test
