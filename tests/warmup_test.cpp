// admit::warmup (Guava's SmoothWarmingUp) single-threaded on the manual clock: configuration refused by name, Guava's
// shape and its RateLimiterTest sequences reproduced, going cold again after idling, debt, decisions, earlier times, a
// clock read before another caller's commit, and a property test against the stable rate. The blocking forms and
// threads: warmup_concurrency_test.cpp.
#include "admit/warmup.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"
#include "admit/testing/manual_clock.hpp"
#include "warmup_testing.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::testing::warmup_tests;
using admit::rate;
using admit::testing::invalid_argument_message;

// Replays a Guava RateLimiterTest-style script on a fake clock: "R<n>" = acquire(n), recording the wait (what
// Guava's FakeStopwatch records as R); "U<ms>" = the user sleeps. Returns the waits in nanoseconds.
std::vector<std::int64_t> replay(warmup& w, const std::string& script) {
  std::istringstream in(script);
  std::string op;
  std::int64_t t = 0;
  std::vector<std::int64_t> waits;
  while (in >> op) {
    const std::int64_t v = std::stoll(op.substr(1));
    if (op[0] == 'R') {
      const auto wait = wait_at(w, at(std::chrono::nanoseconds{t}), v);
      waits.push_back(wait.count());
      t += wait.count();  // acquire() sleeps the wait out
    } else {
      t += v * 1'000'000;
    }
  }
  return waits;
}

// Guava computes in whole microseconds (truncating), admit in nanoseconds (rounding costs up): allow 2us per step.
void expect_near_guava(const std::vector<std::int64_t>& ours_ns, const std::vector<std::int64_t>& guava_us) {
  ASSERT_EQ(ours_ns.size(), guava_us.size());
  for (std::size_t i = 0; i < ours_ns.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(ours_ns[i]), static_cast<double>(guava_us[i]) * 1000.0, 2000.0) << "step " << i;
  }
}

TEST(Warmup, InvalidConfigurationThrowsNamingTheValue) {
  for (const auto& [factor, text] :
       std::vector<std::pair<double, std::string>>{{1.0, "got 1"},
                                                   {0.5, "got 0.5"},
                                                   {-2.0, "got -2"},
                                                   {std::nan(""), "got nan"},
                                                   {std::numeric_limits<double>::infinity(), "got inf"}}) {
    EXPECT_NE(invalid_argument_message([f = factor] { warmup w(rate::per_second(2), 4s, f); }).find(text),
              std::string::npos)
        << text;
  }
  EXPECT_NE(invalid_argument_message([] { warmup w(rate{}, 4s); }).find("0/s"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { warmup w(rate::per_second(2), -7ns); }).find("-7ns"), std::string::npos);
  EXPECT_NO_THROW(warmup(rate::per_second(2), 0s));
  EXPECT_NO_THROW(warmup(rate::per_second(2), 4s, 1.0001));
}

TEST(Warmup, ComputesGuavasShape) {
  const warmup w{rate::per_second(2), 4s};       // stable 0.5s, cold 1.5s
  EXPECT_DOUBLE_EQ(w.threshold_permits(), 4.0);  // warmup / (2 stable)
  EXPECT_DOUBLE_EQ(w.max_permits(), 8.0);        // threshold + 2 warmup / (stable + cold)
  EXPECT_EQ(w.cold_factor(), 3.0);
  EXPECT_EQ(w.warmup_period(), 4s);
  EXPECT_EQ(w.stable_rate(), rate::per_second(2));
  EXPECT_DOUBLE_EQ(w.stored_permits_at(at(0s)), 8.0);  // starts cold
}

// Guava's RateLimiterTest.testWarmUp, exactly: R0.00, R1.38 (1.375), R1.13 (1.125), R0.88, R0.63, R0.50...
TEST(Warmup, ReproducesGuavasWarmUpSequence) {
  warmup w{rate::per_second(2), 4000ms, 3.0};
  const auto waits = replay(w,
                            "R1 R1 R1 R1 R1 R1 R1 R1 U500 U4000 "  // #1, repay the last, become cold again
                            "R1 R1 R1 R1 R1 R1 R1 R1 U500 U2000 "  // #4, repay, idle only 2s: not cold
                            "R1 R1 R1 R1 R1 R1 R1 R1");            // #7
  const std::vector<std::int64_t> ms = {0, 1375, 1125, 875, 625, 500, 500, 500,  //
                                        0, 1375, 1125, 875, 625, 500, 500, 500,  //
                                        0, 500,  500,  500, 500, 500, 500, 500};
  ASSERT_EQ(waits.size(), ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) EXPECT_EQ(waits[i], ms[i] * 1'000'000) << "step " << i;
}

// Guava's testWarmUpWithColdFactor (5/s, 4s, cold factor 10); the exact microseconds come from running Guava 31.1's
// RateLimiter with a fake stopwatch: R0.00, R1.75, R1.26, R0.76, R0.30, R0.20...
TEST(Warmup, ReproducesGuavasSequenceWithColdFactor10) {
  warmup w{rate::per_second(5), 4000ms, 10.0};
  expect_near_guava(replay(w,
                           "R1 R1 R1 R1 R1 R1 R1 R1 U200 U4000 "
                           "R1 R1 R1 R1 R1 R1 R1 R1 U200 U1000 "
                           "R1 R1 R1 R1 R1 R1 R1 R1"),
                    {0, 1752500, 1257500, 762500, 300227, 200000, 200000, 200000,  //
                     0, 1752500, 1257500, 762500, 300227, 200000, 200000, 200000,  //
                     0, 200000,  200000,  200000, 200000, 200000, 200000, 200000});
}

// Weighted requests and partial idles, checked against Guava 31.1 run with the same scripts.
TEST(Warmup, ReproducesGuavaWithWeightsAndPartialIdles) {
  {
    warmup w{rate::per_second(10), 2000ms, 3.0};
    expect_near_guava(replay(w, "R3 R1 R5 U300 R2 R7 R1 U1000 R4 R1 R1"),
                      {0, 810000, 230000, 550000, 210000, 700000, 0, 400000, 100000});
  }
  {
    warmup w{rate::per_second(7), 3000ms, 2.5};
    expect_near_guava(replay(w, "R2 R3 R1 R10 R1 U700 R1 R1 U3000 R6 R1"),
                      {0, 678571, 883928, 258928, 1749999, 0, 142857, 0, 1821428});
  }
  {
    warmup w{rate::per_second(50), 1500ms, 4.0};
    expect_near_guava(
        replay(w, "R1 R2 U5 R1 R8 R1 U40 R3 R1 R1 U900 R20 R1 R1 R2 U2000 R1 R1 R1"),
        {0, 79000, 147000, 73000, 512000, 15000, 153000, 47000, 0, 1200000, 39000, 37000, 0, 79000, 77000});
  }
}

// Guava's tryAcquire(n, 0): admitted iff no debt is outstanding, whatever n; its own cost delays the next.
TEST(Warmup, TryAcquireIsAdmittedWhenNoDebtIsOutstanding) {
  warmup w{rate::per_second(2), 4s};
  EXPECT_TRUE(w.try_acquire_at(at(0ms)));
  EXPECT_FALSE(w.try_acquire_at(at(0ms)));
  EXPECT_FALSE(w.try_acquire_at(at(1000ms)));
  EXPECT_EQ(w.time_until_available_at(at(1000ms)), 375ms);
  EXPECT_TRUE(w.try_acquire_at(at(1375ms)));
  EXPECT_FALSE(w.try_acquire_at(at(1375ms), 3));
  EXPECT_TRUE(w.try_acquire_at(at(2500ms)));
  EXPECT_TRUE(w.try_acquire_at(at(4500ms)));
  EXPECT_FALSE(w.try_acquire_at(at(4500ms)));
  EXPECT_TRUE(w.try_acquire_at(at(4500ms), 0));  // n == 0 always
}

TEST(Warmup, GoesColdAgainAfterIdling) {
  warmup w{rate::per_second(2), 4s};
  std::int64_t t = 0;
  for (int i = 0; i < 20; ++i) t += wait_at(w, at(std::chrono::nanoseconds{t})).count();  // warm now
  const auto warm_at = at(std::chrono::nanoseconds{t});
  EXPECT_EQ(w.time_until_available_at(warm_at), 500ms);  // the last request's cost
  EXPECT_DOUBLE_EQ(w.stored_permits_at(warm_at + 500ms), 0.0);
  // Idle time refills one permit per cool-down interval (warmup / max_permits = 0.5s) up to max_permits.
  EXPECT_DOUBLE_EQ(w.stored_permits_at(warm_at + 500ms + 1s), 2.0);
  EXPECT_DOUBLE_EQ(w.stored_permits_at(warm_at + 500ms + 4s), 8.0);
  EXPECT_DOUBLE_EQ(w.stored_permits_at(warm_at + 500ms + 1h), 8.0);
  EXPECT_EQ(w.decide_at(warm_at, 0).reset_after, 4500ms);
  // Fully cold after warmup_period (+ the debt): the same slow start as a new limiter.
  const auto t2 = warm_at + 4500ms;
  EXPECT_EQ(wait_at(w, t2), 0ns);
  EXPECT_EQ(wait_at(w, t2), 1375ms);
  EXPECT_EQ(wait_at(w, t2), 1375ms + 1125ms);
}

TEST(Warmup, ZeroWarmupPeriodIsASmoothLimiter) {
  warmup w{rate::per_second(4), 0s};
  EXPECT_DOUBLE_EQ(w.max_permits(), 0.0);
  EXPECT_EQ(wait_at(w, at(0s)), 0ns);
  EXPECT_EQ(wait_at(w, at(0s)), 250ms);
  EXPECT_EQ(wait_at(w, at(0s), 2), 500ms);
  EXPECT_EQ(wait_at(w, at(0s)), 1000ms);
  EXPECT_EQ(wait_at(w, at(1h)), 0ns);  // idle banks nothing
  EXPECT_EQ(wait_at(w, at(1h)), 250ms);
}

TEST(Warmup, InfiniteRateAdmitsEverything) {
  warmup w{rate::inf(), 10s};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(w.try_acquire_at(at(0s), 1'000'000'000));
  EXPECT_EQ(wait_at(w, at(0s), 1'000'000), 0ns);
  EXPECT_EQ(w.time_until_available_at(at(0s)), 0ns);
  EXPECT_TRUE(w.acquire(5));
}

TEST(Warmup, OversizeRequestGoesIntoDebt) {
  warmup w{rate::per_second(10), 0s};
  EXPECT_TRUE(w.try_acquire_at(at(0s), 50));  // admitted: no debt outstanding
  EXPECT_EQ(w.time_until_available_at(at(0s), 1), 5s);
  const auto d = w.decide_at(at(1s), 1);
  EXPECT_FALSE(d.admitted);
  EXPECT_FALSE(d.exceeds_capacity());
  EXPECT_EQ(d.retry_after, 4s);
  EXPECT_TRUE(w.try_acquire_at(at(5s)));
  // Costs that would run past the representable range saturate instead of overflowing.
  EXPECT_EQ(wait_at(w, at(6s), std::numeric_limits<std::int64_t>::max()), 0ns);
  EXPECT_EQ(w.time_until_available_at(at(6s)).count(), std::numeric_limits<std::int64_t>::max() - 6'000'000'000);
}

TEST(Warmup, DecisionReportsLimitRemainingRetryAndReset) {
  warmup w{rate::per_second(2), 4s};
  auto d = w.decide_at(at(0s));
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.limit, 1);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 0ns);
  EXPECT_EQ(d.reset_after, 1375ms + 500ms);  // debt, then one permit to bank again (0.5s each)
  d = w.decide_at(at(1s));
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 375ms);
  EXPECT_EQ(d.remaining, 0);
  d = w.decide_at(at(2s), 0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 1);
}

TEST(Warmup, EarlierTimeNeverOverAdmits) {
  warmup w{rate::per_second(2), 4s};
  EXPECT_TRUE(w.try_acquire_at(at(100s)));
  EXPECT_FALSE(w.try_acquire_at(at(50s)));
  EXPECT_EQ(w.time_until_available_at(at(50s)), 50s + 1375ms);
  // A reservation back in time waits for the debt, and pays the same (cold) cost as at the later time.
  EXPECT_EQ(wait_at(w, at(50s)), 50s + 1375ms);
  EXPECT_EQ(w.time_until_available_at(at(100s)), 1375ms + 1125ms);
}

// A clock for putting another caller's commit between a caller's clock read and its decision: now() returns the time
// as it is when called, then runs `between` once (the other caller, and the time its commit takes). Single-threaded.
struct racing_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<racing_clock>;
  static constexpr bool is_steady = true;
  static inline duration now_d{0};
  static inline std::function<void()> between;
  static time_point now() {
    const time_point t{now_d};
    if (auto f = std::exchange(between, nullptr)) f();
    return t;
  }
};

// The benchmark's 2- and 8-thread try_acquire() refusals, replayed deterministically: the caller reads 10ms, another
// caller (which read the clock later) commits at 10ms + 1us, and by the time the caller decides it is 11ms, when its
// request fits (Guava, reading its clock under its lock, admits it). Comparing the stale 10ms reading with the other
// commit refused it. Each clock-reading form must read the clock again instead.
TEST(Warmup, ClockReadBeforeAnotherCallersCommitIsNotARefusal) {
  using racing = admit::basic_warmup<racing_clock>;
  const auto rt = [](std::chrono::nanoseconds d) { return racing::time_point{d}; };
  const auto race = [&](racing& w) {
    racing_clock::now_d = 10ms;
    racing_clock::between = [&w, rt] {
      ASSERT_TRUE(w.try_acquire_at(rt(10ms + 1us)));  // smooth 1/ms: next free at 11ms + 1us
      racing_clock::now_d = 12ms;
    };
  };
  {
    racing w{rate::per_second(1000), 0ms};
    race(w);
    EXPECT_TRUE(w.try_acquire());
    EXPECT_EQ(w.time_until_available_at(rt(12ms)), 1ms);  // charged as of 12ms
  }
  {
    racing w{rate::per_second(1000), 0ms};
    race(w);
    const admit::decision d = w.decide();
    EXPECT_TRUE(d.admitted);
    EXPECT_EQ(w.time_until_available_at(rt(12ms)), 1ms);
  }
  {
    racing w{rate::per_second(1000), 0ms};
    race(w);
    EXPECT_TRUE(w.try_acquire_until(rt(0ms)));  // a past deadline: admitted only if it fits at once — it does
    EXPECT_EQ(w.time_until_available_at(rt(12ms)), 1ms);
  }
  {
    racing w{rate::per_second(1000), 0ms};
    race(w);
    const auto r = w.reserve();
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.ready_at(), rt(12ms));  // no debt outstanding at 12ms, the clock's second reading
  }
  {
    racing w{rate::per_second(1000), 0ms};
    race(w);
    EXPECT_EQ(w.time_until_available(), 0ns);
  }
  // Had the clock not moved on, the request would not fit (one request per instant): refused, after one more read.
  {
    racing w{rate::per_second(1000), 0ms};
    racing_clock::now_d = 10ms;
    racing_clock::between = [&w, rt] { ASSERT_TRUE(w.try_acquire_at(rt(10ms))); };
    EXPECT_FALSE(w.try_acquire());
    EXPECT_EQ(w.time_until_available_at(rt(10ms)), 1ms);
  }
}

// Guava's testTimeToWarmUpIsHonouredEvenWithWeights: pushing the warm-up permits through, in any split, costs exactly
// the warmup period.
TEST(Warmup, TimeToWarmUpIsHonouredEvenWithWeights) {
  std::mt19937_64 rng(7);
  constexpr std::int64_t warmup_permits = 10;
  for (int trial = 0; trial < 20; ++trial) {
    for (const double cold_factor : {2.0, 3.0, 10.0}) {
      for (const double qps : {4.0, 2.0, 1.0, 0.5, 0.1}) {
        const auto warmup_ms = static_cast<std::int64_t>((1 + cold_factor) * warmup_permits / (2.0 * qps) * 1000.0);
        warmup w{rate::per_second(qps), std::chrono::milliseconds(warmup_ms), cold_factor};
        std::int64_t t = 0;
        std::int64_t permits = warmup_permits;
        while (permits > 0) {
          const std::int64_t n =
              std::max<std::int64_t>(1, static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(permits)));
          permits -= n;
          t += wait_at(w, at(std::chrono::nanoseconds{t}), n).count();
        }
        t += wait_at(w, at(std::chrono::nanoseconds{t}), 1).count();  // repay the pending debt
        EXPECT_NEAR(static_cast<double>(t), static_cast<double>(warmup_ms) * 1e6, 1e6)
            << "cold factor " << cold_factor << " qps " << qps;
      }
    }
  }
}

// Each admitted request costs at least n stable intervals, paid before the next: over any window, the permits of
// every admission but the last fit in the window at the stable rate.
TEST(Warmup, PropertyNeverFasterThanTheStableRate) {
  std::mt19937_64 rng(99);
  for (const double cold_factor : {1.5, 3.0, 8.0}) {
    warmup w{rate::per_second(1000), 200ms, cold_factor};  // stable 1ms
    struct admission {
      std::int64_t t;
      std::int64_t n;
    };
    std::vector<admission> admitted;
    std::int64_t now = 0;
    for (int i = 0; i < 30'000; ++i) {
      now += rng() % 100 < 90 ? static_cast<std::int64_t>(rng() % 400'000)
                              : static_cast<std::int64_t>(rng() % 300'000'000);
      const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 4);
      if (w.try_acquire_at(at(std::chrono::nanoseconds{now}), n)) admitted.push_back({now, n});
    }
    ASSERT_GT(admitted.size(), 1000U);
    for (std::size_t j = 1; j < admitted.size(); ++j) {
      std::int64_t permits = 0;
      for (std::size_t i = j; i-- > 0 && j - i <= 64;) {
        permits += admitted[i].n;
        ASSERT_LE(permits * 1'000'000, admitted[j].t - admitted[i].t) << "cold factor " << cold_factor;
      }
    }
  }
}

}  // namespace
