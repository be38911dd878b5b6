// Tests of admit/token_bucket.hpp's decisions at explicit times. The first part ports the scenarios of
// golang.org/x/time/rate's rate_test.go (Debian's golang-golang-x-time-dev 0.3.0); deliberate deviations are marked
// "admit:" with the reason. Then admit's own: rounding, the edges of the state's range. Waiting is in
// token_bucket_wait_test.cpp, threads in token_bucket_concurrency_test.cpp.
#include "admit/token_bucket.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace token_bucket_test {

namespace {

using namespace std::chrono_literals;
using admit::rate;
using admit::token_bucket;
using admit::testing::invalid_argument_message;
using tp = std::chrono::steady_clock::time_point;

constexpr auto d = 100ms;
const tp t0 = tp{} + 1000h;  // far from the epoch, like time.Now() in the Go tests
const tp t1 = t0 + 1 * d;
const tp t2 = t0 + 2 * d;
const tp t3 = t0 + 3 * d;
const tp t4 = t0 + 4 * d;
const tp t5 = t0 + 5 * d;
const tp t9 = t0 + 9 * d;

struct allow_step {
  tp t;
  double toks;
  std::int64_t n;
  bool ok;
};

void run(token_bucket& lim, const std::vector<allow_step>& steps) {
  int i = 0;
  for (const auto& s : steps) {
    EXPECT_EQ(lim.tokens_at(s.t), s.toks) << "step " << i;
    EXPECT_EQ(lim.try_acquire_at(s.t, s.n), s.ok) << "step " << i;
    ++i;
  }
}

// Multiples of d since t0, rounded to nearest (as the Go test's dSince).
long d_since(tp t) { return static_cast<long>(std::chrono::round<std::chrono::milliseconds>(t - t0) / d); }

token_bucket::reservation reserve(token_bucket& lim, tp t, std::int64_t n, tp act, bool ok) {
  auto r = lim.reserve_at(t, n);
  EXPECT_EQ(r.ok(), ok) << "reserve(t" << d_since(t) << ", " << n << ")";
  if (r.ok() && ok) {
    EXPECT_EQ(d_since(r.ready_at()), d_since(act)) << "reserve(t" << d_since(t) << ", " << n << ")";
  }
  return r;
}

TEST(TokenBucket, EveryConvertsIntervalsToRates) {
  EXPECT_TRUE(rate::every(0ns).is_inf());
  EXPECT_DOUBLE_EQ(rate::every(1ns).per_second(), 1e9);
  EXPECT_DOUBLE_EQ(rate::every(10ms).per_second(), 100);
  EXPECT_DOUBLE_EQ(rate::every(2500ms).per_second(), 0.4);
  EXPECT_THROW(rate::every(-1ns), std::invalid_argument);
}

TEST(TokenBucket, Burst1) {
  token_bucket lim{rate::per_second(10), 1};
  run(lim, {{t0, 1, 1, true},
            {t0, 0, 1, false},
            {t0, 0, 1, false},
            {t1, 1, 1, true},
            {t1, 0, 1, false},
            {t1, 0, 1, false},
            {t2, 1, 2, false},  // burst size is 1, so n=2 always fails
            {t2, 1, 1, true},
            {t2, 0, 1, false}});
}

TEST(TokenBucket, Burst3) {
  token_bucket lim{rate::per_second(10), 3};
  run(lim, {{t0, 3, 2, true},
            {t0, 1, 2, false},
            {t0, 1, 1, true},
            {t0, 0, 1, false},
            {t1, 1, 4, false},
            {t2, 2, 1, true},
            {t3, 2, 1, true},
            {t4, 2, 1, true},
            {t4, 1, 1, true},
            {t4, 0, 1, false},
            {t4, 0, 1, false},
            {t9, 3, 3, true},
            {t9, 0, 0, true}});
}

TEST(TokenBucket, JumpBackwardsAddsNoTokens) {
  token_bucket lim{rate::per_second(10), 3};
  run(lim, {{t1, 3, 1, true},  // start at t1
            {t0, 2, 1, true},  // jump back to t0, two tokens remain
            {t0, 1, 1, true},
            {t0, 0, 1, false},
            {t0, 0, 1, false},
            // admit: t1 was already seen, so (t0, t1] is not refilled a second time (x/time/rate grants a token here).
            {t1, 0, 1, false},
            {t2, 1, 1, true},  // got a token
            {t2, 0, 1, false},
            {t2, 0, 1, false}});
}

TEST(TokenBucket, NoTruncationErrors) {
  token_bucket lim{rate::per_second(0.7692307692307693), 1};
  EXPECT_TRUE(lim.try_acquire());
}

// A bug once: the burst was rounded up as a whole but each token on its own, so 3 tokens at 3/s did not fit.
TEST(TokenBucket, FullBurstFitsAtOnceWithAFractionalInterval) {
  for (const double per_second : {3.0, 7.0, 0.7692307692307693, 1e9 / 3}) {
    token_bucket lim{rate::per_second(per_second), 3};
    EXPECT_TRUE(lim.try_acquire_at(t0));
    EXPECT_TRUE(lim.try_acquire_at(t0));
    EXPECT_TRUE(lim.try_acquire_at(t0)) << per_second;
    EXPECT_FALSE(lim.try_acquire_at(t0));
    token_bucket whole{rate::per_second(per_second), 3};
    EXPECT_TRUE(whole.try_acquire_at(t0, 3)) << per_second;
  }
}

TEST(TokenBucket, SimultaneousRequestsAdmitExactlyTheBurst) {
  token_bucket lim{rate::per_second(1), 5};
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 15; ++i) {
    threads.emplace_back([&] {
      if (lim.try_acquire_at(t0)) ok.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 5);
}

TEST(TokenBucket, LongRunningQps) {
  token_bucket lim{rate::per_second(100), 100};
  int ok = 0;
  tp now = t0;
  const tp end = t0 + 5s;
  for (; now < end; now += 2ms) ok += lim.try_acquire_at(now) ? 1 : 0;
  const double ideal = 100 + 100 * std::chrono::duration<double>(now - t0).count();
  EXPECT_LE(ok, static_cast<int>(ideal + 1));
  EXPECT_GE(ok, static_cast<int>(0.999 * ideal));
}

TEST(TokenBucket, SimpleReserve) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  reserve(lim, t0, 2, t2, true);
  reserve(lim, t3, 2, t4, true);
}

TEST(TokenBucket, Mix) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 3, t1, false);  // n > burst
  reserve(lim, t0, 2, t0, true);
  run(lim, {{t1, 1, 2, false}});  // not enough tokens
  reserve(lim, t1, 2, t2, true);
  run(lim, {{t1, -1, 1, false}});  // negative tokens
  run(lim, {{t3, 1, 1, true}});
}

TEST(TokenBucket, CancelInvalid) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  auto r = reserve(lim, t0, 3, t3, false);
  r.cancel_at(t0);                // no effect
  reserve(lim, t0, 2, t2, true);  // did not get extra tokens
}

TEST(TokenBucket, CancelLast) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  auto r = reserve(lim, t0, 2, t2, true);
  r.cancel_at(t1);  // 2 tokens back
  reserve(lim, t1, 2, t2, true);
}

TEST(TokenBucket, CancelTooLate) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  auto r = reserve(lim, t0, 2, t2, true);
  r.cancel_at(t3);  // too late: no effect
  reserve(lim, t3, 2, t4, true);
}

TEST(TokenBucket, Cancel0Tokens) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  auto r = reserve(lim, t0, 1, t1, true);
  reserve(lim, t0, 1, t2, true);
  r.cancel_at(t0);  // 0 tokens back: the later reservation depends on them
  reserve(lim, t0, 1, t3, true);
}

TEST(TokenBucket, Cancel1Token) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  auto r = reserve(lim, t0, 2, t2, true);
  reserve(lim, t0, 1, t3, true);
  r.cancel_at(t2);  // 1 token back
  reserve(lim, t2, 2, t4, true);
}

TEST(TokenBucket, CancelMulti) {
  token_bucket lim{rate::per_second(10), 4};
  reserve(lim, t0, 4, t0, true);
  auto ra = reserve(lim, t0, 3, t3, true);
  reserve(lim, t0, 1, t4, true);
  auto rc = reserve(lim, t0, 1, t5, true);
  rc.cancel_at(t1);  // 1 token back
  ra.cancel_at(t1);  // 2 tokens back, as if C was never reserved
  reserve(lim, t1, 3, t5, true);
}

TEST(TokenBucket, CancelTwiceRestoresOnce) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  auto r = reserve(lim, t0, 2, t2, true);
  r.cancel_at(t0);
  r.cancel_at(t0);
  EXPECT_EQ(lim.tokens_at(t0), 0);
}

TEST(TokenBucket, ReserveJumpBackNeverViolatesLimitOrBurst) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t1, 2, t1, true);  // start at t1
  // admit: t0 < t1 is seen as t1, so this waits for a fresh token (x/time/rate answers t1, violating Limit,Burst).
  reserve(lim, t0, 1, t2, true);
  reserve(lim, t2, 2, t4, true);                // x/time/rate: t3
  reserve(lim, t0, 3, tp{}, false);             // n > burst: state unchanged
  reserve(lim, t2, 1, t5, true);                // x/time/rate: t4
  EXPECT_FALSE(lim.reserve_at(t0, 2, d).ok());  // the wait bound is not enough: state unchanged
  reserve(lim, t2, 1, t0 + 6 * d, true);        // x/time/rate: t5
}

TEST(TokenBucket, ReserveJumpBackCancel) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t1, 2, t1, true);  // start at t1
  auto r = reserve(lim, t1, 2, t3, true);
  reserve(lim, t1, 1, t4, true);
  r.cancel_at(t0);  // 1 token back
  // admit: t5 (x/time/rate: t4, which its test marks "should violate Limit,Burst").
  reserve(lim, t1, 2, t5, true);
}

TEST(TokenBucket, ReserveSetLimit) {
  token_bucket lim{rate::per_second(5), 2};
  reserve(lim, t0, 2, t0, true);
  reserve(lim, t0, 2, t4, true);
  lim.set_rate_at(t2, rate::per_second(10));
  reserve(lim, t2, 1, t4, true);
}

TEST(TokenBucket, ReserveSetBurst) {
  token_bucket lim{rate::per_second(5), 2};
  reserve(lim, t0, 2, t0, true);
  reserve(lim, t0, 2, t4, true);
  lim.set_burst_at(t3, 4);
  // admit: t0 is seen as t3 (tokens -0.5); 4.5 tokens at 5/s take 0.9 s → t12 (x/time/rate: t9, from t0).
  reserve(lim, t0, 4, t0 + 12 * d, true);
}

TEST(TokenBucket, ReserveSetLimitCancel) {
  token_bucket lim{rate::per_second(5), 2};
  reserve(lim, t0, 2, t0, true);
  auto r = reserve(lim, t0, 2, t4, true);
  lim.set_rate_at(t2, rate::per_second(10));
  r.cancel_at(t2);  // 2 tokens back
  reserve(lim, t2, 2, t3, true);
}

TEST(TokenBucket, ReserveMax) {
  token_bucket lim{rate::per_second(10), 2};
  EXPECT_TRUE(lim.reserve_at(t0, 2, d).ok());
  auto r = lim.reserve_at(t0, 1, d);  // reserve for the close future
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(d_since(r.ready_at()), 1);
  EXPECT_FALSE(lim.reserve_at(t0, 1, d).ok());  // time to act too far in the future
}

TEST(TokenBucket, TimeUntilAvailableReportsTheWaitOrNever) {
  token_bucket lim{rate::per_second(10), 2};
  reserve(lim, t0, 2, t0, true);
  EXPECT_EQ(lim.time_until_available_at(t0, 1), d);
  EXPECT_EQ(lim.time_until_available_at(t0, 2), 2 * d);
  EXPECT_EQ(lim.time_until_available_at(t0, 3), std::chrono::nanoseconds::max());
}

TEST(TokenBucket, ZeroLimitSpendsTheBurstAndNeverRefills) {
  token_bucket lim{rate{}, 1};
  EXPECT_TRUE(lim.try_acquire_at(t0));
  EXPECT_FALSE(lim.try_acquire_at(t0));
  EXPECT_FALSE(lim.try_acquire_at(t9 + 1000h));
  EXPECT_FALSE(lim.reserve_at(t9, 1).ok());
  EXPECT_EQ(lim.time_until_available_at(t9, 1), std::chrono::nanoseconds::max());
}

TEST(TokenBucket, ZeroRateKeepsTokensPresentAtTheChange) {
  token_bucket lim{rate::per_second(10), 5};
  EXPECT_TRUE(lim.try_acquire_at(t0, 5));
  lim.set_rate_at(t2, rate{});  // 2 tokens accrued by t2
  EXPECT_EQ(lim.tokens_at(t9), 2);
  EXPECT_TRUE(lim.try_acquire_at(t9, 2));
  EXPECT_FALSE(lim.try_acquire_at(t9 + 1h));
  lim.set_rate_at(t9 + 1h, rate::per_second(10));  // refills again from here
  EXPECT_TRUE(lim.try_acquire_at(t9 + 1h + d));
}

TEST(TokenBucket, InfiniteRateAdmitsEverything) {
  token_bucket lim{rate::inf(), 0};
  EXPECT_TRUE(lim.try_acquire_at(t0, 1000));
  EXPECT_TRUE(lim.reserve_at(t0, 3).ok());
  EXPECT_EQ(lim.reserve_at(t0, 3).delay_from(t0), std::chrono::nanoseconds{0});
  lim.set_rate_at(t1, rate::per_second(10));
  EXPECT_EQ(lim.tokens_at(t1), 0);  // burst 0
  lim.set_burst_at(t1, 2);
  EXPECT_TRUE(lim.try_acquire_at(t3, 2));
}

TEST(TokenBucket, SetRateKeepsAccruedTokens) {
  token_bucket lim{rate::per_second(10), 10};
  EXPECT_TRUE(lim.try_acquire_at(t0, 10));
  lim.set_rate_at(t5, rate::per_second(1));  // 5 tokens accrued
  EXPECT_EQ(lim.tokens_at(t5), 5);
  EXPECT_EQ(lim.tokens_at(t5 + 1s), 6);
  EXPECT_EQ(lim.get_rate(), rate::per_second(1));
  lim.set_burst_at(t5 + 1s, 3);
  EXPECT_EQ(lim.tokens_at(t5 + 1s), 3);
  EXPECT_EQ(lim.burst(), 3);
}

TEST(TokenBucket, NegativeBurstThrowsNamingTheValue) {
  const std::string message = invalid_argument_message([] { token_bucket lim{rate::per_second(1), -3}; });
  EXPECT_NE(message.find("-3"), std::string::npos) << message;
}

TEST(TokenBucket, DecisionReportsRemainingRetryAndReset) {
  token_bucket lim{rate::per_second(10), 5};
  auto d1 = lim.decide_at(t0, 2);
  EXPECT_TRUE(d1);
  EXPECT_EQ(d1.limit, 5);
  EXPECT_EQ(d1.remaining, 3);
  EXPECT_EQ(d1.retry_after, 0ns);
  EXPECT_EQ(d1.reset_after, 200ms);
  auto d2 = lim.decide_at(t0, 4);
  EXPECT_FALSE(d2);
  EXPECT_EQ(d2.remaining, 3);
  EXPECT_EQ(d2.retry_after, 100ms);
  EXPECT_FALSE(d2.exceeds_capacity());
  auto d3 = lim.decide_at(t0, 6);
  EXPECT_TRUE(d3.exceeds_capacity());
}

TEST(TokenBucket, DebtPolicyAdmitsOversizeWhenFullAndMakesOthersWait) {
  token_bucket lim{rate::per_second(10), 2, admit::oversize_policy::debt};
  EXPECT_TRUE(lim.try_acquire_at(t0, 5));  // full: admitted, 3 tokens of debt
  EXPECT_EQ(lim.tokens_at(t0), -3);
  EXPECT_FALSE(lim.try_acquire_at(t3, 1));  // debt paid at t3, a token at t4
  EXPECT_TRUE(lim.try_acquire_at(t4, 1));
  EXPECT_FALSE(lim.try_acquire_at(t5, 5));  // not full
  auto r = lim.reserve_at(t5, 5);           // served once full (t5 + 1 token more = t6)
  EXPECT_EQ(d_since(r.ready_at()), 6);
}

TEST(TokenBucket, SettleRefundsOrChargesTheDifference) {
  token_bucket lim{rate::per_second(10), 10};
  auto r = lim.reserve_at(t0, 8);
  ASSERT_TRUE(r.ok());
  r.settle_at(t0, 3);  // used only 3
  EXPECT_EQ(lim.tokens_at(t0), 7);
  auto r2 = lim.reserve_at(t0, 2);
  r2.settle_at(t0, 12);  // cost 12 in the end: 10 more, into debt
  EXPECT_EQ(lim.tokens_at(t0), -5);
  r2.settle_at(t0, 0);  // settled once only
  EXPECT_EQ(lim.tokens_at(t0), -5);
}

TEST(TokenBucket, TimeUntilAvailableConsumesNothing) {
  token_bucket lim{rate::per_second(10), 3};
  EXPECT_TRUE(lim.try_acquire_at(t0, 3));
  EXPECT_EQ(lim.time_until_available_at(t0, 2), 200ms);
  EXPECT_EQ(lim.time_until_available_at(t0, 2), 200ms);
  EXPECT_EQ(lim.tokens_at(t0), 0);
  EXPECT_EQ(lim.time_until_available_at(t2, 2), 0ns);
}

// Rounding: with 3 tokens/s the interval is 333,333,333.3 ns. Durations are rounded up, so no window ever admits
// more than rate·w + burst.
TEST(TokenBucket, PropertyAdmittedNeverExceedsRateTimesWindowPlusBurst) {
  std::mt19937_64 rng(42);
  for (const double per_second : {3.0, 7.0, 10.0, 1000.0, 0.7692307692307693}) {
    const std::int64_t burst = 4;
    token_bucket lim{rate::per_second(per_second), burst};
    std::vector<std::pair<tp, std::int64_t>> admitted;
    tp now = t0;
    std::exponential_distribution<double> gap(per_second * 3);
    std::uniform_int_distribution<std::int64_t> size(1, 3);
    for (int i = 0; i < 5000; ++i) {
      now += std::chrono::nanoseconds(static_cast<std::int64_t>(gap(rng) * 1e9));
      const auto n = size(rng);
      if (lim.try_acquire_at(now, n)) admitted.emplace_back(now, n);
    }
    // Every window [a, b] starting at an admission.
    for (std::size_t i = 0; i < admitted.size(); ++i) {
      std::int64_t sum = 0;
      for (std::size_t j = i; j < admitted.size(); ++j) {
        sum += admitted[j].second;
        const double w = std::chrono::duration<double>(admitted[j].first - admitted[i].first).count();
        ASSERT_LE(static_cast<double>(sum), per_second * w + static_cast<double>(burst) + 1e-9)
            << "rate " << per_second << " window from admission " << i << " to " << j;
      }
    }
  }
}

// last_event was raised only by reservations that waited, so cancelling an immediate one computed INT64_MIN - t
// (undefined) and restored nothing; x/time/rate restores all of it.
TEST(TokenBucket, CancellingAnImmediateReservationRestoresItsTokens) {
  token_bucket lim{rate::per_second(1), 5};
  auto r = lim.reserve_at(t0, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.delay_from(t0), std::chrono::nanoseconds{0});
  r.cancel_at(t0);
  EXPECT_EQ(lim.tokens_at(t0), 5);
}

// The initial state was "long ago" at ns_min / 4, so a bucket whose burst takes longer than that to refill did not
// start full: a zero-rate quota of 1e10 started with 2.3e9.
TEST(TokenBucket, LargeBurstsStartFull) {
  token_bucket quota{rate{}, 10'000'000'000};
  EXPECT_EQ(quota.tokens_at(t0), 1e10);
  EXPECT_TRUE(quota.try_acquire_at(t0, 5'000'000'000));
  EXPECT_TRUE(quota.try_acquire_at(t0 + 1000h, 5'000'000'000));
  EXPECT_FALSE(quota.try_acquire_at(t0 + 2000h, 1));
  token_bucket big{rate::per_second(1000), 4'000'000'000'000};  // 4e18 ns of refill: within the range
  EXPECT_EQ(big.tokens_at(t0), 4e12);
  EXPECT_TRUE(big.try_acquire_at(t0, 4'000'000'000'000));
}

TEST(TokenBucket, BurstBeyondTheStatesRangeThrowsNamingIt) {
  const std::string message = invalid_argument_message([] {
    token_bucket lim{rate::per_second(1000), 5'000'000'000'000};
  });
  EXPECT_NE(message.find("5000000000000"), std::string::npos) << message;
  EXPECT_NE(message.find("1000/s"), std::string::npos) << message;
}

// Converting a full bucket from an infinite rate cast burst · interval to int64 without a range check (undefined;
// on x86 the bucket became empty for 292 years).
TEST(TokenBucket, LeavingAnInfiniteRateKeepsALargeBucketFull) {
  token_bucket lim{rate::inf(), 1'000'000'000};
  lim.set_rate_at(t0, rate::per_second(1));
  EXPECT_EQ(lim.tokens_at(t0), 1e9);
  EXPECT_TRUE(lim.try_acquire_at(t0, 1'000'000'000));
  token_bucket huge{rate::inf(), 20'000'000'000};
  EXPECT_THROW(huge.set_rate_at(t0, rate::per_second(1)), std::invalid_argument);  // 634 years of refill
  EXPECT_TRUE(huge.get_rate().is_inf());                                           // unchanged
  EXPECT_TRUE(huge.try_acquire_at(t0, 20'000'000'000));
}

TEST(TokenBucket, SettlingAtAnEnormousCostSaturates) {
  token_bucket lim{rate::per_second(10), 5};
  auto r = lim.reserve_at(t0, 1);
  r.settle_at(t0, std::numeric_limits<std::int64_t>::max());
  EXPECT_LT(lim.tokens_at(t0), -1e9);
  EXPECT_FALSE(lim.try_acquire_at(t0 + 1000h));
}

// A steady clock of whole microseconds: coarser than the bucket's nanoseconds (a clock.hpp clock may be).
struct microsecond_clock {
  using rep = std::int64_t;
  using period = std::micro;
  using duration = std::chrono::microseconds;
  using time_point = std::chrono::time_point<microsecond_clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return time_point{}; }
};

// On a clock coarser than nanoseconds, a reservation's ready_at() is the first tick at which its tokens are there:
// rounded up, never down (it was truncated: at 3/s, 333,333 µs after the drain, a third of a microsecond early, the
// bucket still in debt there).
TEST(TokenBucket, OnACoarseClockAReservationIsReadyNoEarlierThanItsTokens) {
  admit::basic_token_bucket<microsecond_clock> b(rate::per_second(3), 1);
  const microsecond_clock::time_point start{10s};
  ASSERT_TRUE(b.try_acquire_at(start));
  const auto r = b.reserve_at(start);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.ready_at(), start + 333334us);
  EXPECT_FALSE(b.in_debt_at(r.ready_at()));
  EXPECT_TRUE(b.in_debt_at(r.ready_at() - 1us));
}

}  // namespace

}  // namespace token_bucket_test
