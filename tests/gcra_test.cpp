// Tests of admit/gcra.hpp: redis-cell's CL.THROTTLE answers, exact retry/reset values, the edge cases of the rate and
// the burst, a clock going backwards, a property test on pseudo-random arrivals and multi-threaded stress. What every
// limiter shares (n > burst, retry_after, the clock-reading overloads, one instant under contention) is checked in
// limiter_contract_test.cpp.
#include "admit/gcra.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace gcra_test {

namespace {

using namespace std::chrono_literals;
using admit::decision;
using admit::gcra;
using admit::oversize_policy;
using admit::rate;
using tp = std::chrono::steady_clock::time_point;
using std::chrono::nanoseconds;

const tp t0 = tp{} + 1000h;

TEST(Gcra, StartsFullAdmitsTheBurstThenSpacesByTheInterval) {
  gcra lim{rate::per_second(10), 3};  // T = 100ms
  EXPECT_TRUE(lim.try_acquire_at(t0));
  EXPECT_TRUE(lim.try_acquire_at(t0));
  EXPECT_TRUE(lim.try_acquire_at(t0));
  EXPECT_FALSE(lim.try_acquire_at(t0));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 99ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 100ms));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 100ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 200ms));
}

// redis-cell's README: "CL.THROTTLE user123 15 30 60" (max_burst 15, 30 per 60 s) answers 0 16 15 -1 2 on the first
// call. Its limit is max_burst + 1, which is admit's burst.
TEST(Gcra, FirstDecisionMatchesRedisCellReadme) {
  gcra lim{rate::per(30, 60s), 16};
  const decision d = lim.decide_at(t0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.limit, 16);
  EXPECT_EQ(d.remaining, 15);
  EXPECT_EQ(d.retry_after, 0ns);
  EXPECT_EQ(d.reset_after, 2s);
}

TEST(Gcra, DecisionsReportExactRemainingRetryAndReset) {
  gcra lim{rate::per(30, 60s), 16};  // T = 2s, tau = 32s
  for (int i = 0; i < 15; ++i) ASSERT_TRUE(lim.try_acquire_at(t0));
  decision d = lim.decide_at(t0);  // the 16th
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 32s);

  d = lim.decide_at(t0);  // the 17th: one interval to wait
  EXPECT_FALSE(d.admitted);
  EXPECT_FALSE(d.exceeds_capacity());
  EXPECT_EQ(d.limit, 16);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 2s);
  EXPECT_EQ(d.reset_after, 32s);

  d = lim.decide_at(t0 + 1500ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 500ms);
  EXPECT_EQ(d.reset_after, 30500ms);

  d = lim.decide_at(t0 + 7s, 2);  // 3.5 intervals accrued: 2 fit, 1 left
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.reset_after, 29s);

  d = lim.decide_at(t0 + 7s, 3);  // needs 2.5 more... 1.5 intervals = 3s
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 3s);
  EXPECT_EQ(lim.time_until_available_at(t0 + 7s, 3), 3s);
  EXPECT_TRUE(lim.try_acquire_at(t0 + 10s, 3));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 10s));
}

TEST(Gcra, RetryAfterIsExactToTheNanosecond) {
  gcra lim{rate::every(1ms), 1};
  ASSERT_TRUE(lim.try_acquire_at(t0));
  const decision d = lim.decide_at(t0 + 1ns);
  EXPECT_EQ(d.retry_after, 999999ns);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 999999ns));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1ms));
}

TEST(Gcra, DebtPolicyAdmitsOversizeWhenFullAndMakesOthersWait) {
  gcra lim{rate::per_second(10), 4, oversize_policy::debt};  // T = 100ms
  EXPECT_TRUE(lim.try_acquire_at(t0, 1));
  decision d = lim.decide_at(t0, 8);  // not full: wait until it is (one interval)
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 100ms);
  d = lim.decide_at(t0 + 100ms, 8);  // full again: admitted, 4 in debt
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 800ms);
  d = lim.decide_at(t0 + 100ms);  // waits out the debt plus its own interval
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 500ms);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 599ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 600ms));
}

TEST(Gcra, InfiniteRateAdmitsEverything) {
  gcra lim{rate::inf(), 2};
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(lim.try_acquire_at(t0, 1000));
  const decision d = lim.decide_at(t0, 1'000'000);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_after, 0ns);
  EXPECT_EQ(lim.time_until_available_at(t0, 5), 0ns);
  EXPECT_EQ(lim.emission_interval(), 0ns);
}

TEST(Gcra, ZeroRateSpendsTheBurstAndNeverRefills) {
  gcra lim{rate{}, 3};
  EXPECT_TRUE(lim.try_acquire_at(t0, 2));
  decision d = lim.decide_at(t0 + 1h);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, nanoseconds::max());
  d = lim.decide_at(t0 + 10000h);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, nanoseconds::max());
  EXPECT_EQ(lim.time_until_available_at(t0 + 20000h), nanoseconds::max());
  EXPECT_EQ(lim.emission_interval(), nanoseconds::max());

  gcra fresh{rate{}, 3};
  EXPECT_EQ(fresh.decide_at(t0, 0).reset_after, 0ns);
  EXPECT_EQ(fresh.remaining_at(t0), 3);
}

TEST(Gcra, ZeroRequestIsAlwaysAdmittedAndChangesNothing) {
  gcra lim{rate::per_second(1), 1};
  ASSERT_TRUE(lim.try_acquire_at(t0));
  EXPECT_TRUE(lim.try_acquire_at(t0, 0));
  EXPECT_TRUE(lim.try_acquire_at(t0 - 1h, 0));  // even with the clock far back
  const decision d = lim.decide_at(t0, 0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 1s);
  EXPECT_EQ(lim.time_until_available_at(t0, 0), 0ns);
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1s));
}

TEST(Gcra, ClockGoingBackwardsNeverAddsCapacity) {
  gcra lim{rate::per_second(10), 2};  // T = 100ms
  ASSERT_TRUE(lim.try_acquire_at(t0 + 1s, 2));
  ASSERT_TRUE(lim.try_acquire_at(t0 + 1100ms));  // one interval accrued
  // Back to before any of it: nothing accrues, the wait counts from the earlier now.
  const decision d = lim.decide_at(t0 + 900ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 300ms);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_FALSE(lim.try_acquire_at(t0));
  // Forward again: the interval 900ms..1200ms is not counted twice.
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1199ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 1200ms));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1200ms));
}

TEST(Gcra, TimeUntilAvailableConsumesNothing) {
  gcra lim{rate::per_second(10), 2};
  EXPECT_EQ(lim.time_until_available_at(t0, 2), 0ns);
  EXPECT_EQ(lim.time_until_available_at(t0, 2), 0ns);
  ASSERT_TRUE(lim.try_acquire_at(t0, 2));
  EXPECT_EQ(lim.time_until_available_at(t0, 1), 100ms);
  EXPECT_EQ(lim.time_until_available_at(t0, 2), 200ms);
  EXPECT_EQ(lim.time_until_available_at(t0 + 50ms, 2), 150ms);
  EXPECT_EQ(lim.remaining_at(t0 + 150ms), 1);
}

TEST(Gcra, FractionalIntervalRoundsUpAndStillAdmitsTheWholeBurst) {
  gcra lim{rate::per_second(3), 3};  // 333333333.3ns, enforced as 333333334ns
  EXPECT_EQ(lim.emission_interval(), 333333334ns);
  EXPECT_TRUE(lim.try_acquire_at(t0, 1));
  EXPECT_TRUE(lim.try_acquire_at(t0, 1));
  EXPECT_TRUE(lim.try_acquire_at(t0, 1));
  EXPECT_FALSE(lim.try_acquire_at(t0, 1));
  EXPECT_FALSE(lim.try_acquire_at(t0 + 333333333ns));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 333333334ns));
  EXPECT_EQ(gcra(rate::per_second(1000), 1).emission_interval(), 1ms);  // exact intervals stay exact
}

TEST(Gcra, SlowRateWithLargeBurstWorksUpToTheRangeOfNanoseconds) {
  gcra lim{rate::every(24h), 100'000};  // tau = 100,000 days, ~274 years
  EXPECT_TRUE(lim.try_acquire_at(t0, 99'999));
  const decision d = lim.decide_at(t0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 24h * 100'000);
  EXPECT_EQ(lim.decide_at(t0).retry_after, 24h);
  EXPECT_THROW(gcra(rate::every(24h), 200'000), std::invalid_argument);  // ~548 years
}

TEST(Gcra, InvalidBurstThrowsNamingTheValue) {
  const std::string message = admit::testing::invalid_argument_message([] { gcra lim{rate::per_second(1), 0}; });
  EXPECT_NE(message.find("got 0"), std::string::npos) << message;
  EXPECT_THROW(gcra(rate::per_second(1), -5), std::invalid_argument);
}

// Over any interval [a, b] of the arrival times, admitted <= burst + (b − a) · rate.
TEST(Gcra, PropertyAdmittedNeverExceedsBurstPlusRateTimesWindow) {
  std::mt19937_64 rng(12345);
  for (const auto& [per_second, burst] : {std::pair{100.0, 5L}, std::pair{3.0, 1L}, std::pair{7777.0, 50L}}) {
    gcra lim{rate::per_second(per_second), burst};
    const double interval_ns = 1e9 / per_second;
    std::vector<std::pair<std::int64_t, std::int64_t>> admitted;  // (time ns, n)
    std::int64_t t = 0;
    for (int i = 0; i < 3000; ++i) {
      t += static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(3 * interval_ns));
      if (rng() % 10 == 0) t += static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(50 * interval_ns));
      const auto n = static_cast<std::int64_t>(1 + rng() % static_cast<std::uint64_t>(std::min<long>(burst, 3)));
      if (lim.try_acquire_at(t0 + nanoseconds{t}, n)) admitted.emplace_back(t, n);
    }
    ASSERT_GT(admitted.size(), 100U);
    for (std::size_t i = 0; i < admitted.size(); ++i) {
      std::int64_t sum = 0;
      for (std::size_t j = i; j < admitted.size(); ++j) {
        sum += admitted[j].second;
        const double bound =
            static_cast<double>(burst) + static_cast<double>(admitted[j].first - admitted[i].first) / interval_ns;
        ASSERT_LE(static_cast<double>(sum), bound + 1e-9) << "rate " << per_second << " from " << i << " to " << j;
      }
    }
  }
}

// Threads with their own advancing times (not synchronized with each other): the total stays within
// burst + rate · (latest − earliest time); with a budget nobody can exhaust every request is admitted.
TEST(Gcra, StressTotalWithinBoundWhileTimeAdvances) {
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  gcra lim{rate::every(1us), 10};
  std::atomic<std::int64_t> admitted{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      std::int64_t mine = 0;
      for (int j = 0; j < per_thread; ++j) {
        mine += lim.try_acquire_at(t0 + nanoseconds{j * 100 + i}) ? 1 : 0;
      }
      admitted += mine;
    });
  }
  for (auto& th : pool) th.join();
  const std::int64_t span_ns = (per_thread - 1) * 100 + threads;
  EXPECT_LE(admitted.load(), 10 + span_ns / 1000 + 1);
  EXPECT_GT(admitted.load(), 0);

  gcra roomy{rate::per_second(1e9), std::int64_t{1} << 40};
  std::atomic<std::int64_t> refused{0};
  pool.clear();
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      for (int j = 0; j < per_thread; ++j) {
        if (!roomy.try_acquire_at(t0 + nanoseconds{j + i})) ++refused;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(refused.load(), 0);
}

}  // namespace

namespace {

// A bug once: the interval was rounded up only beyond 1e-6 ns above a whole number, so 1000.0000000001 ns became
// 1000 — slightly faster than asked. Now strictly up, as the token bucket.
TEST(Gcra, IntervalIsRoundedStrictlyUp) {
  admit::gcra limiter{admit::rate::every(std::chrono::duration<double, std::nano>(1000.0000000001)), 1};
  EXPECT_EQ(limiter.emission_interval(), std::chrono::nanoseconds(1001));
  admit::gcra exact{admit::rate::per_second(1e6), 1};
  EXPECT_EQ(exact.emission_interval(), std::chrono::nanoseconds(1000));
}

}  // namespace

}  // namespace gcra_test
