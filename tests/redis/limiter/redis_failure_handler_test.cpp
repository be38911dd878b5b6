// The failure handler alone (src/redis/limiter/failure_handler.hpp), with explicit times: which errors feed the
// circuit breaker, how it opens and closes through the handler, and the decision of each failure policy — fail_closed
// with its retry_after, fail_open, the local fallback with its share of the rate and burst per key (and rate inf's,
// which admits everything).
#include "failure_handler.hpp"

#include <gtest/gtest.h>

#include <boost/asio/error.hpp>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/asio/error_code.hpp"
#include "admit/errc.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::breaker_change;
using admit::redis::breaker_pass;
using admit::redis::breaker_state;
using admit::redis::decided_by;
using admit::redis::failure_policy;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::detail::failure_handler;
using admit::redis::detail::limiter_algorithm;
using tp = failure_handler::clock::time_point;

constexpr tp at(std::chrono::milliseconds ms) { return tp{ms}; }
const std::error_code timeout = admit::make_error_code(errc::timeout);

// A limiter of burst 10 at 10/s (a window algorithm's fallback is a GCRA of the same shape).
limiter_algorithm ten_per_second() {
  limiter_algorithm a;
  a.limit = 10;
  a.max_n = 10;
  a.fallback_rate = admit::rate::per_second(10);
  a.fallback_burst = 10;
  return a;
}

limiter_options with(failure_policy p) {
  limiter_options o;
  o.on_failure = p;
  return o;
}

TEST(RedisFailureHandler, ConsecutiveOutagesOpenTheBreakerAndAnAnswerClosesIt) {
  limiter_options o;
  o.breaker = {.failure_threshold = 2, .open_for = 100ms};
  failure_handler h(o, ten_per_second());
  EXPECT_EQ(h.report(timeout, breaker_pass::call, at(0ms)), breaker_change::none);
  EXPECT_EQ(h.report(make_error_code(errc::error_reply), breaker_pass::call, at(0ms)),
            breaker_change::none);  // an answer: the count starts again
  EXPECT_EQ(h.report(timeout, breaker_pass::call, at(0ms)), breaker_change::none);
  EXPECT_EQ(h.report(timeout, breaker_pass::call, at(1ms)), breaker_change::opened);
  EXPECT_EQ(h.state(at(2ms)), breaker_state::open);
  EXPECT_EQ(h.allow(at(100ms)), breaker_pass::refused);
  EXPECT_EQ(h.allow(at(101ms)), breaker_pass::probe);
  EXPECT_EQ(h.report({}, breaker_pass::probe, at(101ms)), breaker_change::closed);
  EXPECT_EQ(h.allow(at(101ms)), breaker_pass::call);
  EXPECT_EQ(h.report({}, breaker_pass::call, at(101ms)), breaker_change::none);
}

TEST(RedisFailureHandler, ACancelledProbeLetsTheNextCallerProbe) {
  limiter_options o;
  o.breaker = {.failure_threshold = 1, .open_for = 100ms};
  failure_handler h(o, ten_per_second());
  ASSERT_EQ(h.report(timeout, breaker_pass::call, at(0ms)), breaker_change::opened);
  ASSERT_EQ(h.allow(at(100ms)), breaker_pass::probe);
  EXPECT_EQ(h.allow(at(100ms)), breaker_pass::refused);
  EXPECT_EQ(h.report(admit::errc::cancelled, breaker_pass::probe, at(101ms)), breaker_change::none);
  EXPECT_EQ(h.allow(at(101ms)), breaker_pass::probe);
  EXPECT_EQ(h.report(timeout, breaker_pass::probe, at(102ms)), breaker_change::none);  // reopened, not "opened"
  EXPECT_EQ(h.allow(at(201ms)), breaker_pass::refused);
  EXPECT_EQ(h.allow(at(202ms)), breaker_pass::probe);
}

TEST(RedisFailureHandler, FailClosedRefusesWithItsRetryAfter) {
  limiter_options o = with(failure_policy::fail_closed);
  o.failure_retry_after = 3s;
  failure_handler h(o, ten_per_second());
  const limiter_result r = h.decide("k", 1, timeout, {}, at(0ms));
  EXPECT_EQ(r.source, decided_by::failure_policy);
  EXPECT_EQ(r.error, timeout);
  EXPECT_FALSE(r.consulted);
  EXPECT_EQ(r.decision, (admit::decision{false, 10, 0, 3s, 0ns}));
  const limiter_result e = h.decide("k", 1, make_error_code(errc::error_reply), "WRONGTYPE", at(0ms));
  EXPECT_EQ(e.message, "WRONGTYPE");
}

TEST(RedisFailureHandler, FailOpenAdmitsEverything) {
  failure_handler h(with(failure_policy::fail_open), ten_per_second());
  for (int i = 0; i < 100; ++i) {
    const limiter_result r = h.decide("k", 10, timeout, {}, at(0ms));
    ASSERT_EQ(r.source, decided_by::failure_policy);
    ASSERT_EQ(r.decision, (admit::decision{true, 10, 0, 0ns, 0ns}));
  }
}

TEST(RedisFailureHandler, LocalFallbackDecidesWithItsShareOfRateAndBurstPerKey) {
  limiter_options o = with(failure_policy::local_fallback);
  o.fallback_share = 0.5;  // 5/s, bursts of 5, per key
  failure_handler h(o, ten_per_second());
  int admitted = 0;
  for (int i = 0; i < 8; ++i) admitted += h.decide("k", 1, timeout, {}, at(1000ms)).decision.admitted ? 1 : 0;
  EXPECT_EQ(admitted, 5);
  const limiter_result refused = h.decide("k", 1, timeout, {}, at(1000ms));
  EXPECT_EQ(refused.source, decided_by::local_fallback);
  EXPECT_EQ(refused.error, timeout);
  EXPECT_FALSE(refused.decision.admitted);
  EXPECT_EQ(refused.decision.retry_after, 200ms);  // one token at 5/s
  EXPECT_TRUE(h.decide("k", 1, timeout, {}, at(1200ms)).decision.admitted);
  EXPECT_TRUE(h.decide("other", 5, timeout, {}, at(1200ms)).decision.admitted);  // keys are separate
  EXPECT_TRUE(h.decide("k", 11, timeout, {}, at(5000ms)).decision.exceeds_capacity());
  EXPECT_TRUE(h.decide("k", 6, timeout, {}, at(5000ms)).decision.exceeds_capacity());  // above the local burst
}

TEST(RedisFailureHandler, LocalFallbackOfAnInfiniteRateAdmitsEverything) {
  limiter_algorithm unlimited = ten_per_second();
  unlimited.inf = true;
  unlimited.fallback_rate = admit::rate::inf();
  failure_handler h(with(failure_policy::local_fallback), unlimited);
  for (int i = 0; i < 100; ++i) {
    const limiter_result r = h.decide("k", 1000, timeout, {}, at(0ms));  // above the burst too, as the limiter
    ASSERT_EQ(r.source, decided_by::local_fallback);
    ASSERT_EQ(r.decision, (admit::decision{true, 10, 10, 0ns, 0ns}));
  }
}

TEST(RedisFailureHandler, InvalidBreakerOptionsThrow) {
  limiter_options o;
  o.breaker.open_for = 0ns;
  EXPECT_THROW(failure_handler(o, ten_per_second()), std::invalid_argument);
}

}  // namespace
