// Tests of the count rule of the whole API (admit/detail/check_n.hpp): a negative count throws std::invalid_argument
// naming the value, in release builds as in debug ones, and changes nothing — an emptied limiter stays empty (a
// negative n used to give tokens back when asserts were off). Semaphores, concurrency limiters and permits refuse n < 1
// (n < 0 for split) the same way. Nothing here depends on NDEBUG: every expectation holds in both builds.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/concurrency_limiter.hpp"
#include "admit/fixed_window.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/pacer.hpp"
#include "admit/semaphore.hpp"
#include "admit/sliding_log.hpp"
#include "admit/sliding_window.hpp"
#include "admit/testing/invalid_argument_message.hpp"
#include "admit/token_bucket.hpp"
#include "admit/warmup.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace count_check_test {

namespace {

using namespace std::chrono_literals;
using admit::rate;
using admit::testing::invalid_argument_message;
using tp = std::chrono::steady_clock::time_point;

const tp t0 = tp{} + 1000h;

// Empties `lim` at t, then calls every member taking a count with negative counts: each throws, and the limiter is
// as empty as before (a refill would admit the last request).
template <class Limiter>
void expect_negative_counts_refused(Limiter& lim, const std::string& who) {
  int taken = 0;
  while (lim.try_acquire_at(t0, 1) && taken < 1000) ++taken;
  ASSERT_LT(taken, 1000) << who << " never ran out";
  for (const std::int64_t n : {std::int64_t{-1}, std::int64_t{-5}, INT64_MIN}) {
    EXPECT_THROW((void)lim.try_acquire_at(t0, n), std::invalid_argument) << who << " n=" << n;
    EXPECT_THROW((void)lim.try_acquire(n), std::invalid_argument) << who << " n=" << n;
    EXPECT_THROW((void)lim.decide_at(t0, n), std::invalid_argument) << who << " n=" << n;
    EXPECT_THROW((void)lim.decide(n), std::invalid_argument) << who << " n=" << n;
    EXPECT_THROW((void)lim.time_until_available_at(t0, n), std::invalid_argument) << who << " n=" << n;
    EXPECT_THROW((void)lim.time_until_available(n), std::invalid_argument) << who << " n=" << n;
    if constexpr (requires { lim.reserve_at(t0, n); }) {
      EXPECT_THROW((void)lim.reserve_at(t0, n), std::invalid_argument) << who << " n=" << n;
      EXPECT_THROW((void)lim.reserve(n), std::invalid_argument) << who << " n=" << n;
    }
    if constexpr (requires { lim.acquire(n); }) {
      EXPECT_THROW((void)lim.acquire(n), std::invalid_argument) << who << " n=" << n;
      EXPECT_THROW((void)lim.try_acquire_for(1s, n), std::invalid_argument) << who << " n=" << n;
      EXPECT_THROW((void)lim.try_acquire_until(t0 + 1s, n), std::invalid_argument) << who << " n=" << n;
    }
  }
  EXPECT_FALSE(lim.try_acquire_at(t0, 1)) << who << ": a negative count gave capacity back";
  EXPECT_EQ(invalid_argument_message([&] { (void)lim.try_acquire_at(t0, -1); }), who + ": n must be >= 0, got -1");
}

TEST(CountCheck, TokenBucketRefusesNegativeCounts) {
  admit::token_bucket lim{rate::per_second(10), 3};
  expect_negative_counts_refused(lim, "admit::token_bucket");
  EXPECT_EQ(lim.tokens_at(t0), 0);
}

TEST(CountCheck, TokenBucketSettleRefusesANegativeCost) {
  admit::token_bucket lim{rate::per_second(10), 3};
  auto r = lim.reserve_at(t0, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(invalid_argument_message([&] { r.settle_at(t0, -2); }),
            "admit::token_bucket::reservation::settle: actual must be >= 0, got -2");
  EXPECT_EQ(lim.tokens_at(t0), 0);
  r.settle_at(t0, 1);  // the reservation is still unsettled
  EXPECT_EQ(lim.tokens_at(t0), 2);
}

TEST(CountCheck, GcraRefusesNegativeCounts) {
  admit::gcra lim{rate::per_second(10), 3};
  expect_negative_counts_refused(lim, "admit::gcra");
}

TEST(CountCheck, PacerRefusesNegativeCounts) {
  admit::pacer lim{rate::per_second(10), admit::pacer_options{.slack = 2}};
  expect_negative_counts_refused(lim, "admit::pacer");
}

TEST(CountCheck, WarmupRefusesNegativeCounts) {
  admit::warmup lim{rate::per_second(10), 10s};
  expect_negative_counts_refused(lim, "admit::warmup");
}

TEST(CountCheck, FixedWindowRefusesNegativeCounts) {
  admit::fixed_window lim{3, 1s};
  expect_negative_counts_refused(lim, "admit::fixed_window");
}

TEST(CountCheck, SlidingWindowRefusesNegativeCounts) {
  admit::sliding_window lim{3, 1s};
  expect_negative_counts_refused(lim, "admit::sliding_window");
}

TEST(CountCheck, SlidingLogRefusesNegativeCounts) {
  admit::sliding_log lim{3, 1s};
  expect_negative_counts_refused(lim, "admit::sliding_log");
}

TEST(CountCheck, KeyedRefusesNegativeCountsAndStoresNothing) {
  admit::keyed<admit::gcra> k{rate::per_second(10), 2};
  ASSERT_TRUE(k.try_acquire_at("a", t0, 2));
  EXPECT_FALSE(k.try_acquire_at("a", t0, 1));
  EXPECT_EQ(invalid_argument_message([&] { (void)k.decide_at("a", t0, -1); }), "admit::keyed: n must be >= 0, got -1");
  EXPECT_THROW((void)k.try_acquire_at("a", t0, -2), std::invalid_argument);
  EXPECT_THROW((void)k.try_acquire("b", -2), std::invalid_argument);
  EXPECT_THROW((void)k.decide("b", INT64_MIN), std::invalid_argument);
  EXPECT_FALSE(k.try_acquire_at("a", t0, 1));
  EXPECT_FALSE(k.contains("b"));
  EXPECT_EQ(k.size(), 1U);
}

TEST(CountCheck, SemaphoreRefusesCountsBelowOne) {
  admit::semaphore sem{2};
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{-1}, INT64_MIN}) {
    EXPECT_THROW((void)sem.try_acquire(n), std::invalid_argument) << n;
    EXPECT_THROW((void)sem.acquire(n), std::invalid_argument) << n;
    EXPECT_THROW((void)sem.try_acquire_for(1s, n), std::invalid_argument) << n;
  }
  EXPECT_THROW(sem.add_permits(-1), std::invalid_argument);
  EXPECT_THROW((void)sem.forget_permits(-1), std::invalid_argument);
  EXPECT_EQ(sem.available(), 2);
  EXPECT_EQ(sem.capacity(), 2);
  EXPECT_EQ(invalid_argument_message([&] { (void)sem.try_acquire(-1); }),
            "admit::semaphore: n must be in [1, 576460752303423488], got -1");
}

TEST(CountCheck, PermitSplitRefusesANegativeCount) {
  admit::semaphore sem{3};
  auto p = sem.try_acquire(3);
  ASSERT_TRUE(p);
  EXPECT_THROW((void)p->split(-1), std::invalid_argument);
  EXPECT_THROW((void)p->split(4), std::invalid_argument);
  EXPECT_EQ(p->count(), 3);
  EXPECT_EQ(sem.available(), 0);
}

TEST(CountCheck, ConcurrencyLimiterRefusesCountsBelowOne) {
  admit::concurrency_limiter lim{admit::concurrency_limiter_options{.limit = 2}};
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{-1}}) {
    EXPECT_THROW((void)lim.try_acquire(n), std::invalid_argument) << n;
    EXPECT_THROW((void)lim.acquire(n), std::invalid_argument) << n;
    EXPECT_THROW((void)lim.try_acquire_for(1s, n), std::invalid_argument) << n;
  }
  const admit::limiter_snapshot s = lim.metrics();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.limit, 2);
  EXPECT_TRUE(lim.try_acquire(2));
}

}  // namespace

}  // namespace count_check_test
