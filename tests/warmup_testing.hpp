// tests/warmup_testing.hpp — what the warm-up limiter's tests share: the limiter on the manual clock, times as
// offsets from its epoch, and Guava's reserve(n) answer.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "admit/testing/manual_clock.hpp"
#include "admit/warmup.hpp"

namespace admit::testing::warmup_tests {

using clock_type = admit::testing::manual_clock;
using warmup = admit::basic_warmup<clock_type>;
using time_point = warmup::time_point;

inline time_point at(std::chrono::nanoseconds d) { return time_point{d}; }

// Guava's reserve(n) answer: how long a caller at `now` waits (delay_from(now) of the reservation). Also checks the
// reservation's shape: always ok(), holding n tokens, ready at now + the wait.
template <class Clock>
std::chrono::nanoseconds wait_at(admit::basic_warmup<Clock>& w, typename Clock::time_point now, std::int64_t n = 1) {
  const admit::basic_reservation<Clock> r = w.reserve_at(now, n);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.tokens(), n);
  EXPECT_EQ(r.ready_at(), now + r.delay_from(now));
  return r.delay_from(now);
}

}  // namespace admit::testing::warmup_tests
