// admit::basic_reservation: the one shape reserve() returns, for the token bucket, the pacer and the warm-up limiter.
#include "admit/reservation.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <type_traits>
#include <utility>

#include "admit/pacer.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"
#include "admit/warmup.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace reservation_test {

namespace {

using namespace std::chrono_literals;
using clock_type = admit::testing::manual_clock;
using reservation = admit::basic_reservation<clock_type>;
using bucket_type = admit::basic_token_bucket<clock_type>;
using time_point = clock_type::time_point;
using admit::rate;

time_point at(std::chrono::nanoseconds d) { return time_point{d}; }

static_assert(std::is_same_v<decltype(std::declval<admit::basic_pacer<clock_type>&>().reserve()), reservation>);
static_assert(std::is_same_v<decltype(std::declval<admit::basic_warmup<clock_type>&>().reserve()), reservation>);
static_assert(std::is_base_of_v<reservation, bucket_type::reservation>);
static_assert(std::is_convertible_v<const bucket_type::reservation&, const reservation&>);
static_assert(std::is_nothrow_copy_constructible_v<reservation>);
static_assert(!std::is_copy_constructible_v<bucket_type::reservation>);  // the right to cancel is not copied
static_assert(!std::is_convertible_v<reservation, bool>);                // operator bool is explicit

TEST(Reservation, DefaultIsNotOkAndNeverReady) {
  constexpr reservation r;
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.tokens(), 0);
  EXPECT_EQ(r.ready_at(), time_point::max());
  EXPECT_EQ(r.delay_from(at(0s)), clock_type::duration::max());
}

TEST(Reservation, DelayFromCountsDownToZeroAndStaysThere) {
  constexpr reservation r{3, time_point{5s}};
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.tokens(), 3);
  EXPECT_EQ(r.ready_at(), at(5s));
  EXPECT_EQ(r.delay_from(at(2s)), 3s);
  EXPECT_EQ(r.delay_from(at(5s) - 1ns), 1ns);
  EXPECT_EQ(r.delay_from(at(5s)), 0ns);
  EXPECT_EQ(r.delay_from(at(9s)), 0ns);  // already due
}

TEST(Reservation, DelayReadsTheClock) {
  clock_type::set(at(1s));
  const reservation r{1, at(4s)};
  EXPECT_EQ(r.delay(), 3s);
  clock_type::set(at(10s));
  EXPECT_EQ(r.delay(), 0ns);
}

TEST(Reservation, TokenBucketReservationIsOneAndGivesItsTokensBackOnce) {
  bucket_type bucket{rate::per_second(10), 4};
  ASSERT_TRUE(bucket.try_acquire_at(at(0s), 2));
  bucket_type::reservation r = bucket.reserve_at(at(0s), 4);  // the 2 left, 2 more by 200ms
  ASSERT_TRUE(r.ok());
  const reservation& common = r;
  EXPECT_EQ(common.tokens(), 4);
  EXPECT_EQ(common.ready_at(), at(200ms));
  EXPECT_EQ(common.delay_from(at(50ms)), 150ms);
  const reservation copy = r;  // a value: reports, but cannot cancel
  r.cancel_at(at(50ms));
  EXPECT_EQ(r.tokens(), 0);  // given back
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.ready_at(), at(200ms));
  EXPECT_EQ(copy.tokens(), 4);
  EXPECT_EQ(bucket.tokens_at(at(50ms)), 2.5);  // -1.5 at 50ms, plus the 4 given back
  r.cancel_at(at(50ms));                       // once only
  EXPECT_EQ(bucket.tokens_at(at(50ms)), 2.5);

  bucket_type::reservation moved = bucket.reserve_at(at(50ms), 1);
  bucket_type::reservation to = std::move(moved);
  EXPECT_FALSE(moved.ok());  // NOLINT(bugprone-use-after-move): a moved-from reservation is not ok
  EXPECT_EQ(moved.tokens(), 0);
  EXPECT_EQ(moved.ready_at(), time_point::max());
  EXPECT_TRUE(to.ok());
  EXPECT_EQ(to.tokens(), 1);
}

TEST(Reservation, TokenBucketRefusalIsNotOk) {
  bucket_type bucket{rate::per_second(10), 2};
  const bucket_type::reservation r = bucket.reserve_at(at(0s), 3);  // above the burst: never
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.tokens(), 0);
  EXPECT_EQ(r.delay_from(at(0s)), clock_type::duration::max());
}

}  // namespace

}  // namespace reservation_test
