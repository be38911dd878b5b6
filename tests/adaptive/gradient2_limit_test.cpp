// Tests of <admit/adaptive/gradient2_limit.hpp>: admit::gradient2_limit's arithmetic on explicit samples, and its
// validation.
#include "admit/adaptive/gradient2_limit.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

#include "admit/adaptive/limit_algorithm.hpp"
#include "admit/testing/invalid_argument_message.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace gradient2_limit_test {

namespace {

using namespace std::chrono_literals;
using admit::limit_sample;
using admit::testing::invalid_argument_message;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ns = std::chrono::nanoseconds;

static_assert(admit::limit_algorithm<admit::gradient2_limit>);

limit_sample ok(ns rtt, std::int64_t in_flight, ns start = 0ns) { return {start, rtt, in_flight, false}; }
limit_sample drop(ns rtt, std::int64_t in_flight, ns start = 0ns) { return {start, rtt, in_flight, true}; }

TEST(Gradient2Limit, FollowsTheGradientFormulaSampleBySample) {
  admit::gradient2_limit g{{.initial_limit = 20, .long_window = 3, .warmup_samples = 1}};  // long weight 2/4
  // Latency steady: gradient 1, grow by queue_size smoothed: 20 * 0.8 + 24 * 0.2.
  EXPECT_EQ(g.update(ok(10ms, 20)), 20);
  EXPECT_DOUBLE_EQ(g.estimate(), 20.8);
  EXPECT_DOUBLE_EQ(g.long_rtt(), 10e6);
  // Latency x4: long = 10 + (40 - 10) / 2 = 25 ms; gradient = 1.5 * 25 / 40 = 0.9375; no queue added.
  EXPECT_EQ(g.update(ok(40ms, 20)), 20);
  EXPECT_DOUBLE_EQ(g.long_rtt(), 25e6);
  EXPECT_DOUBLE_EQ(g.short_rtt(), 40e6);
  EXPECT_DOUBLE_EQ(g.estimate(), 20.8 * 0.8 + 20.8 * 0.9375 * 0.2);
  // Latency back down: long = 25 + (5 - 25) / 2 = 15 > 2 * 5, so long *= 0.95.
  const double before = g.estimate();
  g.update(ok(5ms, 20));
  EXPECT_DOUBLE_EQ(g.long_rtt(), 15e6 * 0.95);
  EXPECT_DOUBLE_EQ(g.estimate(), before * 0.8 + (before + 4) * 0.2);  // 1.5 * 14.25 / 5 >= 1: gradient 1
}

TEST(Gradient2Limit, GradientIsFloredAtOneHalf) {
  admit::gradient2_limit g{{.initial_limit = 100, .long_window = 1000, .warmup_samples = 1}};
  g.update(ok(1ms, 100));
  const double before = g.estimate();
  g.update(ok(1000ms, 100));  // 1.5 * ~1 / 1000 -> clamped to 0.5
  EXPECT_DOUBLE_EQ(g.estimate(), before * 0.8 + before * 0.5 * 0.2);
}

TEST(Gradient2Limit, LearnsNothingWhileTheLimitIsNotUsed) {
  admit::gradient2_limit g{{.initial_limit = 20, .warmup_samples = 1}};
  g.update(ok(10ms, 9));  // 9 < 20 / 2
  EXPECT_DOUBLE_EQ(g.estimate(), 20.0);
  EXPECT_DOUBLE_EQ(g.long_rtt(), 10e6);  // the averages still learn
}

TEST(Gradient2Limit, EachDropHalvesTheTargetWithoutTouchingTheAverages) {
  admit::gradient2_limit g{{.initial_limit = 50, .warmup_samples = 1}};
  g.update(ok(10ms, 50));
  const double before = g.estimate();
  g.update(drop(1ms, 1));  // in_flight does not matter for a drop
  EXPECT_DOUBLE_EQ(g.estimate(), before * 0.9);
  EXPECT_DOUBLE_EQ(g.long_rtt(), 10e6);
  EXPECT_DOUBLE_EQ(g.short_rtt(), 10e6);
  g.update(drop(1ms, 50));
  EXPECT_DOUBLE_EQ(g.estimate(), before * 0.9 * 0.9);
}

TEST(Gradient2Limit, StaysWithinMinAndMax) {
  admit::gradient2_limit g{{.initial_limit = 5, .min_limit = 5, .max_limit = 6}};
  for (int i = 0; i < 100; ++i) g.update(ok(10ms, 6));
  EXPECT_EQ(g.limit(), 6);
  for (int i = 0; i < 100; ++i) g.update(drop(1ms, 6, std::chrono::seconds(i)));
  EXPECT_EQ(g.limit(), 5);
}

TEST(Gradient2Limit, BadLimitsAreNamedWithTheirValue) {
  EXPECT_THAT(invalid_argument_message([] { admit::gradient2_limit({.initial_limit = 0}); }),
              AllOf(HasSubstr("gradient2_limit"), HasSubstr("initial_limit"), HasSubstr("got 0")));
}

TEST(Gradient2Limit, BadFactorsAndNaNAreNamedWithTheirValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(invalid_argument_message([=] { admit::gradient2_limit({.smoothing = nan}); }),
              AllOf(HasSubstr("smoothing"), HasSubstr("nan")));
  EXPECT_THAT(invalid_argument_message([] { admit::gradient2_limit({.smoothing = 0}); }),
              AllOf(HasSubstr("smoothing"), HasSubstr("got 0")));
  EXPECT_THAT(invalid_argument_message([] { admit::gradient2_limit({.rtt_tolerance = 0.9}); }),
              AllOf(HasSubstr("rtt_tolerance"), HasSubstr("got 0.9")));
  EXPECT_THAT(invalid_argument_message([] { admit::gradient2_limit({.long_window = 0}); }),
              AllOf(HasSubstr("long_window"), HasSubstr("got 0")));
  EXPECT_THAT(invalid_argument_message([] { admit::gradient2_limit({.short_window = -1}); }),
              AllOf(HasSubstr("short_window"), HasSubstr("got -1")));
  EXPECT_THAT(invalid_argument_message([] { admit::gradient2_limit({.warmup_samples = 0}); }),
              AllOf(HasSubstr("warmup_samples"), HasSubstr("got 0")));
  EXPECT_THAT(invalid_argument_message([] { admit::gradient2_limit({.queue_size = -4}); }),
              AllOf(HasSubstr("queue_size"), HasSubstr("got -4")));
}

}  // namespace

}  // namespace gradient2_limit_test
