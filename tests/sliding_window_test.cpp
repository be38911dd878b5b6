// Tests of admit/sliding_window.hpp: the weighting of the previous window, exact retry_after (within the window, in
// the next one, two windows on), the window boundary, a clock going backwards, a property test against a model
// computed from the admitted requests, and multi-threaded stress. What every limiter shares (n == 0, n > limit,
// retry_after, the clock-reading overloads, one instant under contention) is checked in limiter_contract_test.cpp.
#include "admit/sliding_window.hpp"

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
namespace sliding_window_test {

namespace {

using namespace std::chrono_literals;
using admit::decision;
using admit::sliding_window;
using tp = std::chrono::steady_clock::time_point;
using std::chrono::nanoseconds;

const tp t0 = tp{} + 1000h;  // a whole number of seconds: the start of a 1 s window

TEST(SlidingWindow, WeightsThePreviousWindowByItsRemainingOverlap) {
  sliding_window lim{10, 1s};
  ASSERT_TRUE(lim.try_acquire_at(t0 + 200ms, 10));

  decision d = lim.decide_at(t0 + 1s);  // estimate 10·1 + 0
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 100ms);  // at 1.1s the estimate is 9
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 1s);  // the previous window's weight is gone at the end of this one

  d = lim.decide_at(t0 + 1100ms);  // estimate 10·0.9 = 9
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 1900ms);  // this window's count weighs on the next one until its end

  d = lim.decide_at(t0 + 1100ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 100ms);

  EXPECT_FALSE(lim.try_acquire_at(t0 + 1500ms, 5));  // estimate 10·0.5 + 1 = 6
  EXPECT_EQ(lim.time_until_available_at(t0 + 1500ms, 5), 100ms);
  d = lim.decide_at(t0 + 1500ms, 4);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 1500ms);
  EXPECT_EQ(lim.decide_at(t0 + 1800ms, 0).remaining, 3);  // 10 − 5 − ceil(10·0.2)
}

// The earliest time point: its window began before it, where no time point can say (it overflowed computing the
// window's start: undefined behaviour, which the sanitizer build's tests turn into a failure).
TEST(SlidingWindow, TheEarliestTimePointIsDecided) {
  sliding_window lim{1, 1s};
  EXPECT_TRUE(lim.decide_at(tp::min()).admitted);
  EXPECT_FALSE(lim.decide_at(tp::min()).admitted);
  EXPECT_FALSE(lim.try_acquire_at(tp::min() + 1ns));
}

TEST(SlidingWindow, RetryAfterIsTheExactNanosecond) {
  sliding_window lim{3, 1s};
  ASSERT_TRUE(lim.try_acquire_at(t0, 3));
  // Window 1: 3·(1 − e) + 1 <= 3 from e = 1/3 s, rounded up to the nanosecond.
  EXPECT_EQ(lim.decide_at(t0 + 1s).retry_after, 333333334ns);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1s + 333333333ns));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1s + 333333334ns));
}

TEST(SlidingWindow, RetryAfterReachesIntoTheNextWindow) {
  sliding_window lim{4, 1s};
  ASSERT_TRUE(lim.try_acquire_at(t0 + 1s, 4));  // window 1 full, nothing before it
  const decision d = lim.decide_at(t0 + 1s);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 1250ms);  // window 2: 4·(1 − e) + 1 <= 4 from e = 0.25 s
  EXPECT_EQ(d.reset_after, 2s);
  // A request of the whole limit must wait for a window with no weight from before: the one after the next.
  EXPECT_EQ(lim.time_until_available_at(t0 + 1s, 4), 2s);
  EXPECT_EQ(lim.time_until_available_at(t0 + 2500ms, 4), 500ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 2250ms - 1ns));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 2250ms));
}

TEST(SlidingWindow, DoesNotAdmitTwiceTheLimitAcrossABoundary) {
  constexpr std::int64_t limit = 5;
  sliding_window lim{limit, 1s};
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += lim.try_acquire_at(t0 + 1s - 1ns) ? 1 : 0;
  for (int i = 0; i < 10; ++i) admitted += lim.try_acquire_at(t0 + 1s) ? 1 : 0;
  EXPECT_EQ(admitted, limit);
  // It is an estimate, not a log: half a window on, half the previous window's requests are assumed gone.
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1500ms, 2));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1500ms));
}

TEST(SlidingWindow, ClockGoingBackwardsIsJudgedAtTheStartOfTheNewestWindow) {
  sliding_window lim{10, 1s};
  ASSERT_TRUE(lim.try_acquire_at(t0 + 500ms, 10));
  ASSERT_TRUE(lim.try_acquire_at(t0 + 1500ms, 5));  // estimate 10·0.5 + 0 = 5
  // Back into window 0: judged at 1.0s, where the estimate is 10 + 5 — refused, never a fresh window 0.
  decision d = lim.decide_at(t0 + 900ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 700ms);  // at 1.6s: 10·0.4 + 5 + 1 = 10
  EXPECT_EQ(d.reset_after, 2100ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 - 5s));
  // Back within window 1: a larger weight on window 0, so refused sooner, never admitted more.
  d = lim.decide_at(t0 + 1200ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 400ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1599ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1600ms));
}

TEST(SlidingWindow, LongIdleGapsForgetEverything) {
  // At the largest limit only 16 bits of window index are packed: a gap of exactly 2^16 windows must still read as
  // "long ago", not as the current window.
  constexpr std::int64_t limit = sliding_window::max_limit;
  sliding_window lim{limit, 1us};
  ASSERT_TRUE(lim.try_acquire_at(t0, limit));
  EXPECT_FALSE(lim.try_acquire_at(t0));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 65536us, limit));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 65536us * 3 + 1us, limit));
}

TEST(SlidingWindow, LargestLimitAndLongWindowDoNotOverflow) {
  constexpr std::int64_t limit = sliding_window::max_limit;
  sliding_window lim{limit, 24h * 365};
  const tp start = tp{} + 24h * 365 * 10;
  ASSERT_TRUE(lim.try_acquire_at(start, limit));
  const decision d = lim.decide_at(start + 24h * 365);
  EXPECT_FALSE(d.admitted);
  // limit·(w − e) <= (limit − 1)·w from e = w / limit, rounded up (the products exceed 64 bits).
  const auto w = std::chrono::duration_cast<nanoseconds>(24h * 365).count();
  EXPECT_EQ(d.retry_after.count(), (w + limit - 1) / limit);
}

TEST(SlidingWindow, InvalidConfigurationThrowsNamingTheValue) {
  using admit::testing::invalid_argument_message;
  EXPECT_NE(invalid_argument_message([] { sliding_window lim(0, 1s); }).find("got 0"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { sliding_window lim(16777216, 1s); }).find("got 16777216"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { sliding_window lim(5, 0s); }).find("got 0ns"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { sliding_window lim(5, -2ns); }).find("got -2ns"), std::string::npos);
}

// On pseudo-random arrivals, the limiter agrees exactly with a model computed from the requests it admitted: it
// admits n iff prev·(w − e) + (cur + n)·w <= limit·w, with prev and cur counted from its own admissions.
TEST(SlidingWindow, PropertyAgreesWithTheEstimateOfItsAdmissions) {
  std::mt19937_64 rng(4242);
  constexpr std::int64_t limit = 9;
  constexpr std::int64_t window_ns = 10'000'000;
  sliding_window lim{limit, nanoseconds{window_ns}};
  const std::int64_t base = std::chrono::duration_cast<nanoseconds>(t0.time_since_epoch()).count();
  std::map<std::int64_t, std::int64_t> per_window;
  std::int64_t t = 0;
  int admitted = 0;
  for (int i = 0; i < 20000; ++i) {
    t += static_cast<std::int64_t>(rng() % 2'500'000);
    const auto n = static_cast<std::int64_t>(1 + rng() % 4);
    const std::int64_t abs = base + t;
    const std::int64_t k = abs / window_ns;
    const std::int64_t e = abs % window_ns;
    const std::int64_t prev = per_window.count(k - 1) ? per_window[k - 1] : 0;
    const std::int64_t cur = per_window.count(k) ? per_window[k] : 0;
    const bool model = prev * (window_ns - e) + (cur + n) * window_ns <= limit * window_ns;
    const auto wait = lim.time_until_available_at(t0 + nanoseconds{t}, n);
    const bool ok = lim.try_acquire_at(t0 + nanoseconds{t}, n);
    ASSERT_EQ(ok, model) << "at " << t << " n " << n << " prev " << prev << " cur " << cur;
    ASSERT_EQ(wait == 0ns, ok);
    if (ok) {
      per_window[k] += n;
      ++admitted;
    }
  }
  EXPECT_GT(admitted, 1000);
}

// retry_after is exact: the request is refused one nanosecond before it and admitted at it.
TEST(SlidingWindow, PropertyRetryAfterIsTight) {
  std::mt19937_64 rng(99);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto limit = static_cast<std::int64_t>(1 + rng() % 20);
    const auto window = nanoseconds{static_cast<std::int64_t>(1 + rng() % 1'000'000'000)};
    sliding_window a{limit, window};
    sliding_window b{limit, window};
    tp t = t0;
    for (int i = 0; i < 5; ++i) {
      t += nanoseconds{static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(window.count()))};
      const auto n = static_cast<std::int64_t>(1 + rng() % static_cast<std::uint64_t>(limit));
      const bool ok_a = a.try_acquire_at(t, n);
      ASSERT_EQ(ok_a, b.try_acquire_at(t, n));
    }
    const auto n = static_cast<std::int64_t>(1 + rng() % static_cast<std::uint64_t>(limit));
    const decision d = a.decide_at(t, n);
    if (d.admitted) continue;
    ASSERT_GT(d.retry_after, 0ns);
    ASSERT_FALSE(b.try_acquire_at(t + d.retry_after - 1ns, n)) << "trial " << trial;
    ASSERT_TRUE(b.try_acquire_at(t + d.retry_after, n)) << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

// Threads with their own advancing, mutually skewed times across many windows: each window's own count stays within
// the limit, so the total stays within limit per window touched.
TEST(SlidingWindow, StressTotalWithinLimitPerWindow) {
  constexpr std::int64_t limit = 10;
  constexpr int per_thread = 20000;
  sliding_window lim{limit, 100us};
  std::atomic<std::int64_t> admitted{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < 4; ++i) {
    pool.emplace_back([&, i] {
      std::int64_t mine = 0;
      for (int j = 0; j < per_thread; ++j) mine += lim.try_acquire_at(t0 + nanoseconds{j * 1000 + i * 37}) ? 1 : 0;
      admitted += mine;
    });
  }
  for (auto& th : pool) th.join();
  const std::int64_t windows = (per_thread * 1000) / 100'000 + 1;
  EXPECT_LE(admitted.load(), limit * windows);
  EXPECT_GE(admitted.load(), limit);
}

}  // namespace

}  // namespace sliding_window_test
