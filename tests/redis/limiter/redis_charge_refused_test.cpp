// limiter_options::charge_refused against a real redis-server, for gcra and token_bucket (the two that offer it): a
// refused request is charged all the same, a request above the burst too; the key goes into debt, during which
// n == 0 is refused; every answer agrees with the debt computed from the server's own times; the debt is repaid at
// the rate and capped; lost-state detection sees the writes of charged refusals; and the other limiters refuse the
// option by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/fixed_window.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/sliding_window.hpp"
#include "admit/redis/token_bucket.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace redis_charge_refused_test {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::limiter_options;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;

limiter_options charging() {
  limiter_options o = patient();
  o.charge_refused = true;
  return o;
}

std::int64_t us(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }

enum class kind { gcra, token_bucket };

std::unique_ptr<admit::redis::limiter> make(kind k, connection& conn, const std::string& name, admit::rate r,
                                            std::int64_t burst, limiter_options o) {
  if (k == kind::gcra) return std::make_unique<admit::redis::gcra>(conn, name, r, burst, std::move(o));
  return std::make_unique<admit::redis::token_bucket>(conn, name, r, burst, std::move(o));
}

class ChargeRefused : public ::testing::TestWithParam<kind> {};

// 10 tokens a second (100,000 µs each), a burst of 10. Every expectation is computed from the server times the
// answers carry: `owed_until` is the server time (µs) from which the key is out of debt.
TEST_P(ChargeRefused, ARefusalIsChargedAndTheDebtRefusesEvenAQuery) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const std::int64_t t = 100'000;
  auto l = make(GetParam(), conn, "budget", admit::rate::per_second(10), 10, charging());

  // 15 tokens at once: above the burst, refused, and charged: 5 tokens of debt.
  const admit::redis::limiter_result big = l->decide("user", 15);
  ASSERT_TRUE(big.consulted) << big.error.message();
  EXPECT_FALSE(big.decision.admitted);
  EXPECT_FALSE(big.decision.exceeds_capacity()) << "a charged refusal is repaid in time, not never";
  EXPECT_EQ(big.decision.remaining, 0);
  EXPECT_EQ(big.granted, 0);
  const std::int64_t owed_until = us(big.server_time) + 5 * t;
  EXPECT_EQ(us(big.decision.retry_after), 5 * t);

  // A query (n == 0) while in debt: refused, until the debt is repaid, and it charges nothing.
  const admit::redis::limiter_result query = l->decide("user", 0);
  ASSERT_TRUE(query.consulted);
  const std::int64_t q_at = us(query.server_time);
  ASSERT_LT(q_at, owed_until) << "the machine took 0.5 s between two calls";
  EXPECT_FALSE(query.decision.admitted);
  EXPECT_EQ(us(query.decision.retry_after), owed_until - q_at);

  // One more token: refused and charged, the debt grows by one token.
  const admit::redis::limiter_result one = l->decide("user", 1);
  ASSERT_TRUE(one.consulted);
  ASSERT_LT(us(one.server_time), owed_until);
  EXPECT_FALSE(one.decision.admitted);
  EXPECT_EQ(us(one.decision.retry_after), owed_until + t - us(one.server_time));

  // Another key is untouched.
  EXPECT_TRUE(l->decide("other", 10).decision.admitted);
}

// Queries until one is admitted: each answer agrees with its server time (refused exactly while in debt), and the
// first admitted comes once the debt is repaid — at the rate, not before.
TEST_P(ChargeRefused, TheDebtIsRepaidAtTheRate) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const std::int64_t t = 1'000;  // 1,000/s: a debt of 30 tokens is 30 ms
  auto l = make(GetParam(), conn, "repay", admit::rate::per_second(1000), 20, charging());
  const admit::redis::limiter_result big = l->decide("k", 50);
  ASSERT_TRUE(big.consulted);
  ASSERT_FALSE(big.decision.admitted);
  const std::int64_t owed_until = us(big.server_time) + 30 * t;
  int refused = 0;
  for (;;) {
    const admit::redis::limiter_result q = l->decide("k", 0);
    ASSERT_TRUE(q.consulted);
    const std::int64_t now = us(q.server_time);
    if (q.decision.admitted) {
      EXPECT_GE(now, owed_until);
      break;
    }
    ++refused;
    EXPECT_LT(now, owed_until);
    EXPECT_EQ(us(q.decision.retry_after), owed_until - now);
    std::this_thread::sleep_for(1ms);  // not to pass the limiter's time: the server's clock decides each answer
  }
  // Out of debt but empty: the next token comes one interval after the debt ended.
  const admit::redis::limiter_result next = l->decide("k", 1);
  ASSERT_TRUE(next.consulted);
  EXPECT_EQ(next.decision.admitted, us(next.server_time) >= owed_until + t);
}

// Without the option a refusal charges nothing: the same sequence leaves the key as it was.
TEST_P(ChargeRefused, OffByDefault) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  auto l = make(GetParam(), conn, "plain", admit::rate::per_second(10), 10, patient());
  const admit::decision big = l->decide("user", 15).decision;
  EXPECT_TRUE(big.exceeds_capacity());
  EXPECT_TRUE(l->decide("user", 0).decision.admitted);
  EXPECT_TRUE(l->decide("user", 10).decision.admitted);
}

// A cost far beyond the burst: the debt is capped (2^51 µs), and the key keeps answering — a debt beyond the range of
// the scripts' exact integers once made every later reply on the key unreadable.
TEST_P(ChargeRefused, AHugeCostIsChargedUpToTheCapAndTheKeyStillAnswers) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  auto l = make(GetParam(), conn, "huge", admit::rate::per(1, std::chrono::hours(24)), 1, charging());
  const std::int64_t cap_us = std::int64_t{1} << 51;
  for (const std::int64_t n : {std::int64_t{200'000}, std::int64_t{200'000'000}, std::int64_t{1} << 62}) {
    const admit::redis::limiter_result r = l->decide("k", n);
    ASSERT_TRUE(r.consulted) << n << ": " << r.error.message();
    EXPECT_FALSE(r.decision.admitted);
    EXPECT_EQ(us(r.decision.retry_after), cap_us) << n;
  }
  const admit::redis::limiter_result q = l->decide("k", 0);
  ASSERT_TRUE(q.consulted) << q.error.message();
  EXPECT_FALSE(q.decision.admitted);
  EXPECT_LE(us(q.decision.retry_after), cap_us);
}

// A charged refusal writes state, so lost-state detection counts on it: a flush after it is reported.
TEST_P(ChargeRefused, AFlushAfterAChargedRefusalIsLostState) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = charging();
  o.detect_lost_state = true;
  auto l = make(GetParam(), conn, "lost", admit::rate::per_second(10), 10, o);
  ASSERT_FALSE(l->decide("u", 15).decision.admitted);  // charged: in debt for half a second
  server.admin({"FLUSHALL"});
  // Redis now admits (it forgot the debt) under a new epoch, while this process knows the debt should still be there.
  EXPECT_TRUE(l->decide("u", 1).decision.admitted);
  EXPECT_EQ(l->statistics().lost_state, 1U);
}

INSTANTIATE_TEST_SUITE_P(RateLimiters, ChargeRefused, ::testing::Values(kind::gcra, kind::token_bucket),
                         [](const ::testing::TestParamInfo<kind>& p) {
                           return p.param == kind::gcra ? "gcra" : "token_bucket";
                         });

TEST(ChargeRefusedOption, OtherLimitersRefuseItByName) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  try {
    admit::redis::fixed_window w(conn, "w", 10, 1s, charging());
    FAIL() << "fixed_window accepted charge_refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("charge_refused is offered by gcra and token_bucket only"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(admit::redis::sliding_window(conn, "s", 10, 1s, charging()), std::invalid_argument);
}

}  // namespace redis_charge_refused_test
