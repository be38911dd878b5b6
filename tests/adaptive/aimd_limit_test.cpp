// Tests of <admit/adaptive/aimd_limit.hpp>: admit::aimd_limit (additive increase, multiplicative decrease)'s arithmetic
// on explicit samples, and its validation.
#include "admit/adaptive/aimd_limit.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

#include "admit/adaptive/limit_algorithm.hpp"
#include "admit/testing/invalid_argument_message.hpp"

namespace {

using namespace std::chrono_literals;
using admit::limit_sample;
using admit::testing::invalid_argument_message;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ns = std::chrono::nanoseconds;

static_assert(admit::limit_algorithm<admit::aimd_limit>);

limit_sample ok(ns rtt, std::int64_t in_flight, ns start = 0ns) { return {start, rtt, in_flight, false}; }
limit_sample drop(ns rtt, std::int64_t in_flight, ns start = 0ns) { return {start, rtt, in_flight, true}; }

TEST(AimdLimit, GrowsByIncreasePerLimitsWorthOfUsedSamples) {
  admit::aimd_limit a{{.initial_limit = 8, .min_limit = 1, .max_limit = 100}};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(a.update(ok(10ms, 4)), 8);  // 4 * 2 >= 8: used; +1/8 each
  EXPECT_DOUBLE_EQ(a.estimate(), 8.875);
  EXPECT_EQ(a.update(ok(10ms, 8)), 9);
  EXPECT_DOUBLE_EQ(a.estimate(), 9.0);
}

// Exactly L used samples grow a limit L by one, whatever L: the steps of 1/L add up to the whole despite rounding (from
// 10, ten steps of 0.1 made 10.999..., and the limit became 11 only at the eleventh).
TEST(AimdLimit, ALimitsWorthOfSamplesGrowsItByExactlyIncrease) {
  for (std::int64_t start : {3, 5, 7, 10, 11, 13, 20, 49, 50, 99, 100, 997}) {
    admit::aimd_limit a{{.initial_limit = start, .min_limit = 1, .max_limit = 100'000}};
    for (std::int64_t limit = start; limit < start + 5; ++limit) {
      for (std::int64_t i = 1; i < limit; ++i) ASSERT_EQ(a.update(ok(10ms, limit)), limit) << start << " " << i;
      ASSERT_EQ(a.update(ok(10ms, limit)), limit + 1) << "from " << start << ", at " << limit;
      EXPECT_NEAR(a.estimate(), static_cast<double>(limit + 1), 1e-9);
    }
  }
  admit::aimd_limit half{{.initial_limit = 10, .min_limit = 1, .max_limit = 100, .increase = 0.5}};
  for (int i = 0; i < 20; ++i) half.update(ok(10ms, 10));
  EXPECT_EQ(half.limit(), 11);
  EXPECT_NEAR(half.estimate(), 11.0, 1e-9);
  // A large limit keeps its slow growth: 1000 per 1.5e9 samples, not a whole permit per sample.
  admit::aimd_limit large{
      {.initial_limit = 1'500'000'000, .min_limit = 1, .max_limit = 2'000'000'000, .increase = 1000}};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(large.update(ok(10ms, 1'500'000'000)), 1'500'000'000) << i;
}

TEST(AimdLimit, DoesNotGrowWhileTheLimitIsNotUsed) {
  admit::aimd_limit a{{.initial_limit = 8}};
  for (int i = 0; i < 100; ++i) a.update(ok(10ms, 3));  // 3 * 2 < 8
  EXPECT_EQ(a.limit(), 8);
  EXPECT_DOUBLE_EQ(a.estimate(), 8.0);
}

TEST(AimdLimit, BacksOffOnDropAndOnLatencyAboveTimeoutOncePerRoundTrip) {
  admit::aimd_limit a{{.initial_limit = 20, .backoff_ratio = 0.9, .timeout = 100ms}};
  EXPECT_EQ(a.update(drop(5ms, 20, 1000ms)), 18);  // floor(20 * 0.9); the cut is decided at 1005 ms
  // Acquired before the cut was decided: already acted on.
  EXPECT_EQ(a.update(drop(5ms, 20, 1004ms)), 18);
  EXPECT_EQ(a.update(ok(200ms, 20, 900ms)), 18);  // slower than the timeout, but also from before the cut
  // Acquired after: a new round trip, a new cut.
  EXPECT_EQ(a.update(ok(101ms, 18, 1005ms)), 16);  // floor(18 * 0.9) = 16, decided at 1106 ms
  EXPECT_EQ(a.update(ok(100ms, 16, 1006ms)), 16);  // exactly the timeout is not overload; 16 * 2 >= 16 grows
  EXPECT_DOUBLE_EQ(a.estimate(), 16.0625);
  EXPECT_EQ(a.update(drop(1ms, 1, 1106ms)), 14);  // floor(16.0625 -> 16 * 0.9) = 14
}

TEST(AimdLimit, CutsByAtLeastOneAndStaysWithinMinAndMax) {
  admit::aimd_limit a{{.initial_limit = 10, .min_limit = 9, .max_limit = 10, .backoff_ratio = 0.99}};
  EXPECT_EQ(a.update(drop(1ms, 10, 0ms)), 9);   // floor(9.9) = 9 = 10 - 1
  EXPECT_EQ(a.update(drop(1ms, 10, 10ms)), 9);  // min_limit
  for (int i = 0; i < 100; ++i) a.update(ok(1ms, 10, 20ms));
  EXPECT_EQ(a.limit(), 10);  // max_limit
  EXPECT_DOUBLE_EQ(a.estimate(), 10.0);
}

TEST(AimdLimit, BadLimitsAreNamedWithTheirValue) {
  EXPECT_THAT(invalid_argument_message([] { admit::aimd_limit({.initial_limit = 5, .min_limit = 0}); }),
              AllOf(HasSubstr("aimd_limit"), HasSubstr("min_limit"), HasSubstr("got 0")));
  EXPECT_THAT(invalid_argument_message([] { admit::aimd_limit({.initial_limit = 2000}); }),
              AllOf(HasSubstr("initial_limit"), HasSubstr("got 2000"), HasSubstr("max_limit 1000")));
  EXPECT_THAT(invalid_argument_message([] { admit::aimd_limit({.max_limit = std::int64_t{1} << 40}); }),
              AllOf(HasSubstr("max_limit"), HasSubstr("got 1099511627776")));
}

TEST(AimdLimit, BadFactorsAndNaNAreNamedWithTheirValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(invalid_argument_message([] { admit::aimd_limit({.backoff_ratio = 1.0}); }),
              AllOf(HasSubstr("backoff_ratio"), HasSubstr("got 1"), HasSubstr("[0.5, 1)")));
  EXPECT_THAT(invalid_argument_message([=] { admit::aimd_limit({.backoff_ratio = nan}); }),
              AllOf(HasSubstr("backoff_ratio"), HasSubstr("nan")));
  EXPECT_THAT(invalid_argument_message([] { admit::aimd_limit({.increase = 0}); }),
              AllOf(HasSubstr("increase"), HasSubstr("got 0")));
  EXPECT_THAT(invalid_argument_message([] { admit::aimd_limit({.timeout = 0ns}); }),
              AllOf(HasSubstr("timeout"), HasSubstr("got 0ns")));
  EXPECT_THAT(invalid_argument_message([] { admit::aimd_limit({.timeout = -5ms}); }),
              AllOf(HasSubstr("timeout"), HasSubstr("got -5000000ns")));
}

}  // namespace
