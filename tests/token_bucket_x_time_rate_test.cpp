// Tests of admit/token_bucket.hpp against golang.org/x/time/rate (0.3.0) where the two used to differ: n == 0 while the
// bucket is in debt, and cancelling a reservation made after a reconfiguration or after another cancellation. The
// expected values are x/time/rate's own, printed by scripts/x_time_rate/main.go (scenarios A, B1..B4); where admit
// deliberately answers otherwise the line says "x/time/rate:" with its value and why.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "admit/keyed.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace token_bucket_x_time_rate_test {

namespace {

using namespace std::chrono_literals;
using admit::rate;
using admit::token_bucket;
using tp = std::chrono::steady_clock::time_point;
using std::chrono::nanoseconds;

const tp t0 = tp{} + 1000h;

// --- A: n == 0 while reservations have put the bucket in debt --------------------------------------------------------

TEST(TokenBucketXTimeRate, ZeroTokensAreRefusedWhileInDebtAndAdmittedOnceItIsPaid) {
  token_bucket lim{rate::per_second(10), 5};
  ASSERT_EQ(lim.reserve_at(t0, 5).delay_from(t0), 0ms);
  ASSERT_EQ(lim.reserve_at(t0, 3).delay_from(t0), 300ms);  // x/time/rate: r2 delay 300 ms
  EXPECT_EQ(lim.tokens_at(t0), -3);
  EXPECT_FALSE(lim.try_acquire_at(t0, 0));  // AllowN(t0, 0) == false
  EXPECT_FALSE(lim.try_acquire_at(t0 + 299ms, 0));
  EXPECT_TRUE(lim.in_debt_at(t0 + 299ms));
  EXPECT_EQ(lim.time_until_available_at(t0, 0), 300ms);
  const admit::decision d = lim.decide_at(t0 + 100ms, 0);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 200ms);
  EXPECT_EQ(d.remaining, 0);

  auto r0 = lim.reserve_at(t0 + 100ms, 0);  // ReserveN(t0+100ms, 0): ok, delay 200 ms
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(r0.delay_from(t0 + 100ms), 200ms);
  r0.cancel_at(t0 + 100ms);  // takes nothing, gives nothing back
  EXPECT_EQ(lim.tokens_at(t0 + 100ms), -2);

  EXPECT_FALSE(lim.in_debt_at(t0 + 300ms));
  EXPECT_TRUE(lim.try_acquire_at(t0 + 300ms, 0));  // AllowN(t0+300ms, 0) == true
  EXPECT_EQ(lim.tokens_at(t0 + 300ms), 0);         // and it took nothing
  EXPECT_EQ(lim.time_until_available_at(t0 + 300ms, 0), 0ns);
}

TEST(TokenBucketXTimeRate, ZeroTokensPassAtOnceWithoutDebtAndUnderTheInfiniteOrZeroRate) {
  token_bucket empty{rate::per_second(10), 1};
  ASSERT_TRUE(empty.try_acquire_at(t0, 1));
  EXPECT_TRUE(empty.try_acquire_at(t0, 0));  // no tokens, but no debt either
  EXPECT_FALSE(empty.in_debt_at(t0));

  token_bucket inf{rate::inf(), 0};
  EXPECT_TRUE(inf.try_acquire_at(t0, 0));

  token_bucket zero{rate::per_second(10), 2};
  ASSERT_TRUE(zero.reserve_at(t0, 2).ok());
  ASSERT_TRUE(zero.reserve_at(t0, 1).ok());  // one token of debt
  zero.set_rate_at(t0, rate{});
  EXPECT_TRUE(zero.try_acquire_at(t0, 0));  // x/time/rate's zero limit admits n == 0 whatever the tokens
  EXPECT_FALSE(zero.in_debt_at(t0 + 1h));
}

TEST(TokenBucketXTimeRate, AcquireOfZeroWaitsForTheDebt) {  // x/time/rate WaitN(ctx, 0)
  using manual = admit::testing::manual_clock;
  manual::reset();
  admit::basic_token_bucket<manual> lim{rate::per_second(10), 2};
  ASSERT_TRUE(lim.reserve(2).ok());
  ASSERT_TRUE(lim.reserve(1).ok());  // one token of debt: 100 ms
  const auto start = manual::now();
  EXPECT_FALSE(lim.try_acquire_until(start + 99ms, 0));  // cannot be met: fails at once
  EXPECT_EQ(manual::now(), start);
  std::thread waiter([&] { EXPECT_TRUE(lim.acquire(0)); });
  manual::wait_for_sleepers(1);
  EXPECT_EQ(manual::advance(99ms), 0U);
  EXPECT_EQ(manual::advance(1ms), 1U);
  waiter.join();
  EXPECT_EQ(lim.tokens_at(manual::now()), 0);  // it took nothing
}

TEST(TokenBucketXTimeRate, KeyedBucketsAnswerZeroAsAStandaloneOne) {
  // Only the debt oversize policy puts a bucket used through decide_at alone in debt.
  admit::keyed<token_bucket> k{rate::per_second(10), 2, admit::oversize_policy::debt};
  token_bucket b{rate::per_second(10), 2, admit::oversize_policy::debt};
  ASSERT_TRUE(k.try_acquire_at("a", t0, 5));
  ASSERT_TRUE(b.try_acquire_at(t0, 5));
  for (const auto at : {t0, t0 + 299ms, t0 + 300ms}) {
    const admit::decision dk = k.decide_at("a", at, 0);
    const admit::decision db = b.decide_at(at, 0);
    EXPECT_EQ(dk.admitted, db.admitted);
    EXPECT_EQ(dk.retry_after, db.retry_after);
  }
  EXPECT_FALSE(b.try_acquire_at(t0 + 299ms, 0));
  EXPECT_TRUE(b.try_acquire_at(t0 + 300ms, 0));
}

// --- B: cancellation, with the last event set by each reservation ----------------------------------------------------

// B1: a reservation made after a rate increase acts earlier than the one before it; cancelling it gives its tokens
// back (the last event is its own time to act).
TEST(TokenBucketXTimeRate, CancellingAReservationMadeAfterARateIncreaseRestoresIt) {
  token_bucket lim{rate::per_second(10), 5};
  ASSERT_TRUE(lim.reserve_at(t0, 5).ok());
  auto r2 = lim.reserve_at(t0, 5);
  lim.set_rate_at(t0, rate::per_second(20));
  auto r3 = lim.reserve_at(t0, 2);
  EXPECT_EQ(r2.delay_from(t0), 500ms);  // x/time/rate: r2 delay 500, r3 delay 350, tokens -7
  EXPECT_EQ(r3.delay_from(t0), 350ms);
  EXPECT_EQ(lim.tokens_at(t0), -7);
  r3.cancel_at(t0);
  EXPECT_EQ(lim.tokens_at(t0), -5);  // x/time/rate: -5 (admit restored nothing here before: -7)
  auto r4 = lim.reserve_at(t0, 1);
  EXPECT_EQ(r4.delay_from(t0), 300ms);  // x/time/rate: 300
  r4.cancel_at(t0);
  EXPECT_EQ(lim.tokens_at(t0), -5);  // x/time/rate: -5
  r2.cancel_at(t0);
  // x/time/rate: 2.5. The last event (250 ms) is before r2's time (500 ms), so it gives back 5 + 2.5 tokens at r2's
  // rate: more than r2 took, and more than the bucket may hold (only r1's 5 tokens were used: 0 is right). A
  // cancellation here gives back at most what the reservation took.
  EXPECT_EQ(lim.tokens_at(t0), 0);
}

// B2: after a burst change.
TEST(TokenBucketXTimeRate, CancellingAReservationMadeAfterABurstChangeRestoresIt) {
  token_bucket lim{rate::per_second(10), 5};
  ASSERT_TRUE(lim.reserve_at(t0, 5).ok());
  ASSERT_TRUE(lim.reserve_at(t0, 3).ok());
  const tp t = t0 + 100ms;
  lim.set_burst_at(t, 2);
  auto r3 = lim.reserve_at(t, 2);
  EXPECT_EQ(r3.delay_from(t), 400ms);  // x/time/rate: r3 delay 400, tokens -4
  EXPECT_EQ(lim.tokens_at(t), -4);
  r3.cancel_at(t);
  EXPECT_EQ(lim.tokens_at(t), -2);  // x/time/rate: -2
}

// B3: a cancellation that was not the last reservation gives tokens back; the next reservation then acts before the
// last event, and becomes the last event itself.
TEST(TokenBucketXTimeRate, AReservationAfterAPartialCancellationIsTheLastEvent) {
  token_bucket lim{rate::per_second(10), 5};
  ASSERT_TRUE(lim.reserve_at(t0, 5).ok());
  auto r2 = lim.reserve_at(t0, 4);
  auto r3 = lim.reserve_at(t0, 2);
  r2.cancel_at(t0);                  // r3 depends on 2 of its 4 tokens
  EXPECT_EQ(lim.tokens_at(t0), -4);  // x/time/rate: -4
  auto r4 = lim.reserve_at(t0, 1);
  EXPECT_EQ(r4.delay_from(t0), 500ms);  // x/time/rate: 500 (before r3's 600)
  r4.cancel_at(t0);
  EXPECT_EQ(lim.tokens_at(t0), -4);  // x/time/rate: -4 (admit restored nothing here before: -5)
  r3.cancel_at(t0);
  // x/time/rate: 0, giving back 4 for r3's 2 (the last event, 400 ms, is before r3's 600 ms); it happens to
  // compensate the 2 tokens r2's cancellation kept for r3. A cancellation here gives back at most what it took.
  EXPECT_EQ(lim.tokens_at(t0), -2);
}

// B4: a rate decrease; the reservation made before it is still the last event and gives all back.
TEST(TokenBucketXTimeRate, CancellingTheLastReservationAfterARateDecreaseRestoresIt) {
  token_bucket lim{rate::per_second(10), 5};
  ASSERT_TRUE(lim.reserve_at(t0, 5).ok());
  auto r2 = lim.reserve_at(t0, 2);
  lim.set_rate_at(t0, rate::per_second(5));
  EXPECT_EQ(lim.tokens_at(t0), -2);  // x/time/rate: -2
  r2.cancel_at(t0);
  EXPECT_EQ(lim.tokens_at(t0), 0);                         // x/time/rate: 0
  EXPECT_EQ(lim.reserve_at(t0, 1).delay_from(t0), 200ms);  // x/time/rate: 200
}

}  // namespace

}  // namespace token_bucket_x_time_rate_test
