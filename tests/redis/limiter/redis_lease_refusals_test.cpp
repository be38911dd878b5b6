// Leasing remembers refusals (limiter_options::lease), against a real redis-server: after a refusal, requests as large
// on the key are refused without a call until a whole lease has refilled (gcra, token_bucket) or the retry_after has
// passed (the windows); then Redis is asked again and a lease taken. Charged refusals are never remembered.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/fixed_window.hpp"
#include "admit/redis/gcra.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace redis_lease_refusals_test {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::limiter_options;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;

limiter_options leasing(std::int64_t lease) {
  limiter_options o = patient();
  o.lease = lease;
  o.lease_ttl = 10s;
  return o;
}

TEST(RedisLeaseRefusals, ARefusalIsRememberedUntilAWholeLeaseHasRefilled) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // 1 token a second, a burst of 5, leases of 5: the first request takes all 5.
  admit::redis::gcra l(conn, "g", admit::rate::per_second(1), 5, leasing(5));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(l.decide("k").decision.admitted) << i;
  const auto asked = l.statistics().redis;
  const auto refused = l.decide("k");  // asks Redis: refused, a second to the next token
  ASSERT_FALSE(refused.decision.admitted);
  EXPECT_EQ(l.statistics().redis, asked + 1);
  // Remembered until 5 tokens have refilled (about 5 s): these are refused here.
  for (int i = 0; i < 20; ++i) {
    const auto r = l.decide("k");
    ASSERT_FALSE(r.decision.admitted);
    EXPECT_EQ(r.source, admit::redis::decided_by::lease);
    EXPECT_GT(r.decision.retry_after, 0ns);
    EXPECT_EQ(r.decision.reset_after, r.decision.retry_after) << "a client is not told to come back at once";
  }
  EXPECT_EQ(l.statistics().redis, asked + 1) << "no call while the refusal is remembered";
  EXPECT_TRUE(l.decide("other").decision.admitted) << "other keys are asked";
  EXPECT_TRUE(l.decide("k", 6).decision.exceeds_capacity()) << "above the burst: never, as Redis says";
  // The memory ends: the retry_after (a second) and at most a second more; then Redis is asked and admits.
  EXPECT_TRUE(admit::redis::testing::eventually([&] { return l.decide("k").decision.admitted; }));
}

TEST(RedisLeaseRefusals, ChargedRefusalsAreNeverRemembered) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = leasing(5);
  o.charge_refused = true;
  admit::redis::gcra l(conn, "c", admit::rate::per_second(1), 5, o);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(l.decide("k").decision.admitted);
  const auto asked = l.statistics().redis;
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(l.decide("k").decision.admitted);
  EXPECT_EQ(l.statistics().redis, asked + 3) << "each refusal is charged in Redis";
}

TEST(RedisLeaseRefusals, AWindowRefusalIsRememberedUntilItsRetryAfter) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::fixed_window l(conn, "w", 3, 1h, leasing(3));
  ASSERT_TRUE(l.decide("k").decision.admitted);  // takes all 3
  ASSERT_TRUE(l.decide("k").decision.admitted);
  ASSERT_TRUE(l.decide("k").decision.admitted);
  const auto asked = l.statistics().redis;
  ASSERT_FALSE(l.decide("k").decision.admitted);
  for (int i = 0; i < 10; ++i) ASSERT_FALSE(l.decide("k").decision.admitted);
  EXPECT_EQ(l.statistics().redis, asked + 1);
}

}  // namespace redis_lease_refusals_test
