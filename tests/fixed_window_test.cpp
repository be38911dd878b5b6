// Tests of admit/fixed_window.hpp: window alignment, the classic 2·limit burst across a boundary (exactly that much),
// exact retry/reset values, a clock going backwards, a property test and multi-threaded stress. What every limiter
// shares (n == 0, n > limit, retry_after, the clock-reading overloads, one instant under contention) is checked in
// limiter_contract_test.cpp.
#include "admit/fixed_window.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace fixed_window_test {

namespace {

using namespace std::chrono_literals;
using admit::decision;
using admit::fixed_window;
using tp = std::chrono::steady_clock::time_point;
using std::chrono::nanoseconds;

const tp t0 = tp{} + 1000h;  // a whole number of seconds: the start of a 1 s window

TEST(FixedWindow, AdmitsTheLimitPerAlignedWindow) {
  fixed_window lim{3, 1s};
  EXPECT_TRUE(lim.try_acquire_at(t0 + 500ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 600ms, 2));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 700ms));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 999999999ns));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1s));  // the next window starts on the whole second
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1s, 2));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1s));
}

TEST(FixedWindow, WindowsAlignToMultiplesOfTheWindowOnTheEpoch) {
  fixed_window lim{1, 300ms};
  const tp t = tp{} + 2s;  // windows ..., [1.8s, 2.1s), [2.1s, 2.4s), ...
  EXPECT_TRUE(lim.try_acquire_at(t));
  const decision d = lim.decide_at(t);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 100ms);
  EXPECT_TRUE(lim.try_acquire_at(tp{} + 2100ms));
}

TEST(FixedWindow, TimePointsBeforeTheEpochAlignWithFloorDivision) {
  fixed_window lim{1, 1s};
  EXPECT_TRUE(lim.try_acquire_at(tp{} - 500ms));  // window [-1s, 0)
  EXPECT_EQ(lim.decide_at(tp{} - 500ms).retry_after, 500ms);
  EXPECT_FALSE(lim.try_acquire_at(tp{} - 1ns));
  EXPECT_TRUE(lim.try_acquire_at(tp{}));
}

// The classic weakness, pinned down: `limit` at the very end of one window and `limit` at the very start of the next
// pass — 2·limit within 1 ns — and not one more.
TEST(FixedWindow, AdmitsExactlyTwiceTheLimitAcrossABoundary) {
  constexpr std::int64_t limit = 5;
  fixed_window lim{limit, 1s};
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += lim.try_acquire_at(t0 + 1s - 1ns) ? 1 : 0;
  for (int i = 0; i < 10; ++i) admitted += lim.try_acquire_at(t0 + 1s) ? 1 : 0;
  EXPECT_EQ(admitted, 2 * limit);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 2s - 1ns));
}

TEST(FixedWindow, DecisionsReportExactRemainingRetryAndReset) {
  fixed_window lim{4, 1s};
  decision d = lim.decide_at(t0 + 250ms);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.limit, 4);
  EXPECT_EQ(d.remaining, 3);
  EXPECT_EQ(d.retry_after, 0ns);
  EXPECT_EQ(d.reset_after, 750ms);

  d = lim.decide_at(t0 + 400ms, 3);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 600ms);

  d = lim.decide_at(t0 + 900ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_FALSE(d.exceeds_capacity());
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 100ms);
  EXPECT_EQ(d.reset_after, 100ms);
  EXPECT_EQ(lim.time_until_available_at(t0 + 900ms), 100ms);

  // A new, unused window: nothing to reset.
  d = lim.decide_at(t0 + 1500ms, 0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 4);
  EXPECT_EQ(d.reset_after, 0ns);
}

TEST(FixedWindow, ClockGoingBackwardsNeverReopensAPastWindow) {
  fixed_window lim{3, 1s};
  ASSERT_TRUE(lim.try_acquire_at(t0 + 1500ms, 2));
  // Back into the previous window: counted against the newest window (one left), never a fresh window.
  EXPECT_TRUE(lim.try_acquire_at(t0 + 500ms));
  const decision d = lim.decide_at(t0 + 500ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 1500ms);  // until the window after the newest one
  EXPECT_EQ(d.reset_after, 1500ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 - 10s));
  EXPECT_EQ(lim.time_until_available_at(t0 - 10s), 12s);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1999ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 2s, 3));
}

TEST(FixedWindow, InvalidConfigurationThrowsNamingTheValue) {
  using admit::testing::invalid_argument_message;
  EXPECT_NE(invalid_argument_message([] { fixed_window lim(0, 1s); }).find("got 0"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { fixed_window lim(-3, 1s); }).find("got -3"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { fixed_window lim(5, 0s); }).find("got 0ns"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { fixed_window lim(5, -1ms); }).find("-1000000ns"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { fixed_window lim(1000, 1000ns); }).find("limit 1000"), std::string::npos);
  EXPECT_NO_THROW(fixed_window(999'999'998, 1s));
  EXPECT_NO_THROW(fixed_window(1, 2ns));
}

// On pseudo-random arrivals: every aligned window admits at most `limit`, and so every interval of one window's
// length admits at most 2·limit; a window's count never exceeds what was offered in it.
TEST(FixedWindow, PropertyEachAlignedWindowAdmitsAtMostTheLimit) {
  std::mt19937_64 rng(777);
  constexpr std::int64_t limit = 7;
  constexpr std::int64_t window_ns = 10'000'000;
  fixed_window lim{limit, nanoseconds{window_ns}};
  std::map<std::int64_t, std::int64_t> per_window;
  std::vector<std::pair<std::int64_t, std::int64_t>> admitted;
  std::int64_t t = 0;
  for (int i = 0; i < 20000; ++i) {
    t += static_cast<std::int64_t>(rng() % 3'000'000);
    const auto n = static_cast<std::int64_t>(1 + rng() % 3);
    const bool ok = lim.try_acquire_at(t0 + nanoseconds{t}, n);
    const std::int64_t k = (t + std::chrono::duration_cast<nanoseconds>(t0.time_since_epoch()).count()) / window_ns;
    if (ok) {
      per_window[k] += n;
      admitted.emplace_back(t, n);
    } else {
      EXPECT_GT(per_window[k] + n, limit) << "refused although it fits, at " << t;
    }
  }
  for (const auto& [k, count] : per_window) ASSERT_LE(count, limit) << "window " << k;
  std::size_t lo = 0;
  std::int64_t sum = 0;
  for (std::size_t hi = 0; hi < admitted.size(); ++hi) {
    sum += admitted[hi].second;
    while (admitted[hi].first - admitted[lo].first >= window_ns) sum -= admitted[lo++].second;
    ASSERT_LE(sum, 2 * limit);
  }
}

// Threads with their own advancing times spanning many windows: at most limit per window touched.
TEST(FixedWindow, StressTotalWithinLimitPerWindow) {
  constexpr std::int64_t limit = 10;
  constexpr int per_thread = 20000;
  fixed_window lim{limit, 100us};
  std::atomic<std::int64_t> admitted{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < 4; ++i) {
    pool.emplace_back([&, i] {
      std::int64_t mine = 0;
      for (int j = 0; j < per_thread; ++j) mine += lim.try_acquire_at(t0 + nanoseconds{j * 1000 + i}) ? 1 : 0;
      admitted += mine;
    });
  }
  for (auto& th : pool) th.join();
  const std::int64_t windows = (per_thread * 1000) / 100'000 + 1;
  EXPECT_LE(admitted.load(), limit * windows);
  EXPECT_GE(admitted.load(), limit);  // the first window at least fills up
}

}  // namespace

}  // namespace fixed_window_test
