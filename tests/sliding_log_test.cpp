// Tests of admit/sliding_log.hpp: exactness against a model, the window boundary (never 2·limit, where the fixed window
// lets exactly 2·limit through), exact retry_after, requests of n, a clock going backwards, and multi-threaded stress
// with the exact bound checked on the times the threads passed in. What every limiter shares (n == 0, n > limit,
// retry_after, the clock-reading overloads, one instant under contention) is checked in limiter_contract_test.cpp.
#include "admit/sliding_log.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"

#include "admit/fixed_window.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace sliding_log_test {

namespace {

using namespace std::chrono_literals;
using admit::decision;
using admit::sliding_log;
using tp = std::chrono::steady_clock::time_point;
using std::chrono::nanoseconds;

const tp t0 = tp{} + 1000h;  // a whole number of seconds: the start of a 1 s fixed window

// Every interval (t − window, t] of the given sorted unit times holds at most `limit` of them.
void expect_within_limit(const std::vector<std::int64_t>& sorted, std::int64_t limit, std::int64_t window_ns) {
  std::size_t lo = 0;
  for (std::size_t hi = 0; hi < sorted.size(); ++hi) {
    while (sorted[lo] <= sorted[hi] - window_ns) ++lo;
    ASSERT_LE(static_cast<std::int64_t>(hi - lo + 1), limit) << "window ending at " << sorted[hi];
  }
}

TEST(SlidingLog, AdmitsAtMostTheLimitInTheLastWindow) {
  sliding_log lim{3, 1s};
  EXPECT_TRUE(lim.try_acquire_at(t0));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 100ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 200ms));
  const decision d = lim.decide_at(t0 + 500ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 500ms);  // the entry at t0 leaves the window (t − 1s, t] at t0 + 1s
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 700ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1s - 1ns));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1s));
  EXPECT_EQ(lim.decide_at(t0 + 1s).retry_after, 100ms);
}

// The classic boundary case: the fixed window passes exactly 2·limit within a nanosecond across its boundary; the
// sliding log passes the limit and not one more.
TEST(SlidingLog, NeverAdmitsTwiceTheLimitAcrossABoundaryAsTheFixedWindowDoes) {
  constexpr std::int64_t limit = 5;
  admit::fixed_window fixed{limit, 1s};
  sliding_log log{limit, 1s};
  int fixed_admitted = 0;
  int log_admitted = 0;
  for (const tp t : {t0 + 1s - 1ns, t0 + 1s}) {
    for (int i = 0; i < 10; ++i) {
      fixed_admitted += fixed.try_acquire_at(t) ? 1 : 0;
      log_admitted += log.try_acquire_at(t) ? 1 : 0;
    }
  }
  EXPECT_EQ(fixed_admitted, 2 * limit);
  EXPECT_EQ(log_admitted, limit);
  EXPECT_EQ(log.time_until_available_at(t0 + 1s), 1s - 1ns);
  EXPECT_TRUE(log.try_acquire_at(t0 + 2s - 1ns, limit));
}

TEST(SlidingLog, RequestOfNWaitsForItsNthOldestEntry) {
  sliding_log lim{3, 1s};
  ASSERT_TRUE(lim.try_acquire_at(t0));
  ASSERT_TRUE(lim.try_acquire_at(t0 + 300ms));
  ASSERT_TRUE(lim.try_acquire_at(t0 + 600ms));
  EXPECT_EQ(lim.decide_at(t0 + 700ms, 2).retry_after, 600ms);  // needs t0 and t0 + 300ms gone
  EXPECT_EQ(lim.time_until_available_at(t0 + 700ms, 3), 900ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1300ms - 1ns, 2));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1300ms, 2));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1300ms));
  EXPECT_EQ(lim.decide_at(t0 + 1300ms, 0).reset_after, 1s);
}

TEST(SlidingLog, RemainingCountsTheEntriesThatLeftTheWindow) {
  sliding_log lim{4, 1s};
  EXPECT_EQ(lim.decide_at(t0, 0).remaining, 4);
  EXPECT_EQ(lim.decide_at(t0, 0).reset_after, 0ns);
  ASSERT_TRUE(lim.try_acquire_at(t0));
  ASSERT_TRUE(lim.try_acquire_at(t0 + 100ms));
  const decision d = lim.decide_at(t0 + 200ms);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.limit, 4);
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.reset_after, 1s);
  EXPECT_EQ(lim.decide_at(t0 + 1150ms, 0).remaining, 3);  // t0 and t0 + 100ms have left
  EXPECT_EQ(lim.decide_at(t0 + 5s, 0).remaining, 4);
  EXPECT_EQ(lim.decide_at(t0 + 5s, 0).reset_after, 0ns);
}

TEST(SlidingLog, ClockGoingBackwardsCountsLaterEntriesAndNeverOverAdmits) {
  sliding_log lim{2, 1s};
  ASSERT_TRUE(lim.try_acquire_at(t0 + 2s));
  // Earlier than the entry: the entry counts (it is later than now − window) — one place left.
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1500ms));  // recorded at t0 + 2s, keeping the log in time order
  decision d = lim.decide_at(t0 + 1500ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 1500ms);  // until t0 + 3s, measured from the now passed in
  EXPECT_EQ(d.reset_after, 1500ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 - 10s));
  d = lim.decide_at(t0 + 2900ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 100ms);
  EXPECT_TRUE(lim.try_acquire_at(t0 + 3s, 2));
}

TEST(SlidingLog, InvalidConfigurationThrowsNamingTheValue) {
  using admit::testing::invalid_argument_message;
  EXPECT_NE(invalid_argument_message([] { sliding_log lim(0, 1s); }).find("got 0"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { sliding_log lim(16777216, 1s); }).find("got 16777216"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { sliding_log lim(5, 0s); }).find("got 0ns"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { sliding_log lim(5, -7ns); }).find("got -7ns"), std::string::npos);
}

// On pseudo-random arrivals (bunched around window-sized boundaries), the log agrees exactly with a model that keeps
// every admitted request, its retry_after is tight, and no interval of one window's length holds more than the limit.
TEST(SlidingLog, PropertyIsExactAgainstAModel) {
  std::mt19937_64 rng(31337);
  constexpr std::int64_t limit = 6;
  constexpr std::int64_t window_ns = 10'000'000;
  sliding_log lim{limit, nanoseconds{window_ns}};
  std::deque<std::int64_t> model;  // admitted unit times
  std::vector<std::int64_t> all;
  std::int64_t t = 0;
  for (int i = 0; i < 20000; ++i) {
    t += rng() % 4 == 0 ? static_cast<std::int64_t>(rng() % 8'000'000) : static_cast<std::int64_t>(rng() % 5000);
    const auto n = static_cast<std::int64_t>(1 + rng() % 3);
    while (!model.empty() && model.front() <= t - window_ns) model.pop_front();
    const bool fits = static_cast<std::int64_t>(model.size()) + n <= limit;
    const auto wait = lim.time_until_available_at(t0 + nanoseconds{t}, n);
    const bool ok = lim.try_acquire_at(t0 + nanoseconds{t}, n);
    ASSERT_EQ(ok, fits) << "at " << t;
    if (ok) {
      ASSERT_EQ(wait, 0ns);
      for (std::int64_t j = 0; j < n; ++j) {
        model.push_back(t);
        all.push_back(t);
      }
    } else {
      // The n-th oldest entry of the window must leave: model[size − (limit − n) − 1].
      const std::size_t gone = model.size() - static_cast<std::size_t>(limit - n) - 1;
      ASSERT_EQ(wait.count(), model[gone] + window_ns - t) << "at " << t;
    }
  }
  ASSERT_GT(all.size(), 1000U);
  expect_within_limit(all, limit, window_ns);
}

// Threads with their own advancing, mutually skewed times: on the times the threads passed in, no interval of one
// window's length holds more than the limit.
TEST(SlidingLog, StressExactBoundOnTheTimesPassedIn) {
  for (const std::int64_t limit : {std::int64_t{1}, std::int64_t{4}, std::int64_t{10}}) {
    constexpr std::int64_t window_ns = 100'000;
    constexpr int per_thread = 20000;
    sliding_log lim{limit, nanoseconds{window_ns}};
    std::mutex m;
    std::vector<std::int64_t> times;
    std::vector<std::thread> pool;
    for (int i = 0; i < 4; ++i) {
      pool.emplace_back([&, i] {
        std::vector<std::int64_t> mine;
        for (int j = 0; j < per_thread; ++j) {
          const std::int64_t t = std::int64_t{j} * 1000 + i * 3700;  // thread i runs 3.7 µs·i ahead
          const auto n = static_cast<std::int64_t>(1 + (j % 2) * (limit > 1 ? 1 : 0));
          if (lim.try_acquire_at(t0 + nanoseconds{t}, n)) mine.insert(mine.end(), static_cast<std::size_t>(n), t);
        }
        std::lock_guard lock(m);
        times.insert(times.end(), mine.begin(), mine.end());
      });
    }
    for (auto& th : pool) th.join();
    std::sort(times.begin(), times.end());
    EXPECT_GE(static_cast<std::int64_t>(times.size()), limit);
    expect_within_limit(times, limit, window_ns);
  }
}

}  // namespace

}  // namespace sliding_log_test
