// Tests of <admit/adaptive/vegas_limit.hpp>: admit::vegas_limit's arithmetic on explicit samples, and its validation.
#include "admit/adaptive/vegas_limit.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

#include "admit/adaptive/limit_algorithm.hpp"
#include "admit/testing/invalid_argument_message.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace vegas_limit_test {

namespace {

using namespace std::chrono_literals;
using admit::limit_sample;
using admit::testing::invalid_argument_message;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ns = std::chrono::nanoseconds;

static_assert(admit::limit_algorithm<admit::vegas_limit>);

limit_sample ok(ns rtt, std::int64_t in_flight, ns start = 0ns) { return {start, rtt, in_flight, false}; }
limit_sample drop(ns rtt, std::int64_t in_flight, ns start = 0ns) { return {start, rtt, in_flight, true}; }

TEST(VegasLimit, Log10RootIsAtLeastOne) {
  EXPECT_EQ(admit::detail::log10_root(1), 1);
  EXPECT_EQ(admit::detail::log10_root(99.9), 1);
  EXPECT_EQ(admit::detail::log10_root(100), 2);
  EXPECT_EQ(admit::detail::log10_root(999), 2);
  EXPECT_EQ(admit::detail::log10_root(1000), 3);
}

TEST(VegasLimit, MovesTheLimitByTheEstimatedQueue) {
  admit::vegas_limit v{{.initial_limit = 10, .probe_multiplier = 1'000'000}};  // no probe in this test
  // Each sample is acquired 1 s after the previous one, after any change it caused.
  EXPECT_EQ(v.update(ok(10ms, 10, 0s)), 10);  // the first sample only sets rtt_noload
  EXPECT_EQ(v.rtt_noload(), 10ms);
  EXPECT_EQ(v.update(ok(10ms, 10, 1s)), 16);  // queue ceil(10 * 0) = 0 <= l = 1: + beta * l
  EXPECT_EQ(v.update(ok(11ms, 16, 2s)), 17);  // queue ceil(16 * 1/11) = 2 < alpha: + l
  EXPECT_EQ(v.update(ok(13ms, 17, 3s)), 17);  // queue ceil(17 * 3/13) = 4 in [alpha, beta]: hold
  EXPECT_EQ(v.update(ok(20ms, 17, 4s)), 16);  // queue ceil(17 * 1/2) = 9 > beta: - l
  EXPECT_EQ(v.update(ok(10ms, 7, 5s)), 16);   // 7 * 2 < 16: not used, no change
  EXPECT_EQ(v.update(drop(1ms, 1, 6s)), 15);  // a drop: - l, whatever the in-flight
  EXPECT_EQ(v.rtt_noload(), 10ms);            // the drop's 1 ms did not become the no-load latency
  EXPECT_EQ(v.update(ok(5ms, 15, 7s)), 15);   // lower latency: new rtt_noload, no change
  EXPECT_EQ(v.rtt_noload(), 5ms);
}

TEST(VegasLimit, ActsOncePerRoundTrip) {
  admit::vegas_limit v{{.initial_limit = 10, .probe_multiplier = 1'000'000}};
  v.update(ok(10ms, 10, 0s));
  EXPECT_EQ(v.update(ok(10ms, 10, 1000ms)), 16);  // moved at 1010 ms
  EXPECT_EQ(v.update(ok(10ms, 10, 1009ms)), 16);  // acquired before that: stale
  EXPECT_EQ(v.update(drop(1ms, 10, 1009ms)), 16);
  EXPECT_EQ(v.update(drop(1ms, 10, 1010ms)), 15);  // moved at 1011 ms
  EXPECT_EQ(v.update(ok(10ms, 15, 1011ms)), 21);
}

TEST(VegasLimit, SmoothingBlendsTheTarget) {
  admit::vegas_limit v{{.initial_limit = 10, .smoothing = 0.5, .probe_multiplier = 1'000'000}};
  v.update(ok(10ms, 10));
  v.update(ok(10ms, 10));  // target 16
  EXPECT_DOUBLE_EQ(v.estimate(), 13.0);
  v.update(ok(10ms, 13, 1s));  // target 19
  EXPECT_DOUBLE_EQ(v.estimate(), 16.0);
}

TEST(VegasLimit, ProbesForANewNoLoadLatencyEveryFewLimitsOfSamples) {
  admit::vegas_limit v{{.initial_limit = 10, .probe_multiplier = 1, .seed = 42}};
  v.update(ok(10ms, 1));
  int samples = 0;
  while (v.rtt_noload() == 10ms && samples < 100) {
    v.update(ok(50ms, 1));  // in_flight 1: the limit stays 10
    ++samples;
  }
  EXPECT_EQ(v.rtt_noload(), 50ms);
  // The probe comes after jitter * probe_multiplier * limit samples, jitter in [0.5, 1): 5 to 10 (counting the first).
  EXPECT_GE(samples + 1, 5);
  EXPECT_LE(samples + 1, 10);
  EXPECT_EQ(v.limit(), 10);
}

TEST(VegasLimit, SameSeedSameProbes) {
  auto run = [](std::uint64_t seed) {
    admit::vegas_limit v{{.initial_limit = 50, .probe_multiplier = 1, .seed = seed}};
    std::vector<std::int64_t> limits;
    for (int i = 0; i < 500; ++i) limits.push_back(v.update(ok(ns(10'000'000 + (i % 7) * 1'000'000), 50)));
    return limits;
  };
  EXPECT_EQ(run(7), run(7));
}

TEST(VegasLimit, BadLimitsAreNamedWithTheirValue) {
  EXPECT_THAT(
      invalid_argument_message([] { admit::vegas_limit({.initial_limit = 5, .min_limit = 10, .max_limit = 5}); }),
      AllOf(HasSubstr("vegas_limit"), HasSubstr("max_limit"), HasSubstr("got 5")));
}

TEST(VegasLimit, BadFactorsAndNaNAreNamedWithTheirValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(invalid_argument_message([] { admit::vegas_limit({.alpha = 0}); }),
              AllOf(HasSubstr("alpha"), HasSubstr("got 0")));
  EXPECT_THAT(invalid_argument_message([] { admit::vegas_limit({.alpha = 5, .beta = 4}); }),
              AllOf(HasSubstr("beta must be at least alpha (5;"), HasSubstr("got 4")));
  // An alpha above the default beta names alpha as the reason (it said "beta must be in [7, ...], got 6").
  EXPECT_THAT(invalid_argument_message([] { admit::vegas_limit({.alpha = 7}); }),
              AllOf(HasSubstr("beta must be at least alpha (7; beta is 6 unless given)"), HasSubstr("got 6")));
  EXPECT_THAT(invalid_argument_message([=] { admit::vegas_limit({.beta = nan}); }),
              AllOf(HasSubstr("beta"), HasSubstr("nan")));
  EXPECT_THAT(invalid_argument_message([] { admit::vegas_limit({.smoothing = 1.5}); }),
              AllOf(HasSubstr("smoothing"), HasSubstr("got 1.5")));
  EXPECT_THAT(invalid_argument_message([] { admit::vegas_limit({.probe_multiplier = 0}); }),
              AllOf(HasSubstr("probe_multiplier"), HasSubstr("got 0")));
}

}  // namespace

}  // namespace vegas_limit_test
