// The token leases alone (src/redis/limiter/lease_table.hpp), with explicit times: how many tokens a call takes, a
// surplus spent locally until it runs out or expires (a ttl too long for the clock: never), a full table that drops
// new surpluses (never admits more).
#include "lease_table.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>

namespace {

using namespace std::chrono_literals;
using admit::redis::detail::lease_table;
using tp = lease_table::clock::time_point;

constexpr tp lease_at(std::chrono::milliseconds ms) { return tp{ms}; }

TEST(RedisLeaseTable, ACallTakesTheLeaseButNeverFewerThanAskedNorMoreThanTheLimit) {
  const lease_table t(10, 25, 1s, 100);
  EXPECT_TRUE(t.enabled());
  EXPECT_EQ(t.take(1), 10);
  EXPECT_EQ(t.take(10), 10);
  EXPECT_EQ(t.take(12), 12);  // more than the lease: what was asked
  EXPECT_EQ(t.take(25), 25);
  EXPECT_EQ(t.take(0), 0);    // a query takes nothing
  EXPECT_EQ(t.take(26), 26);  // refused by the script anyway: asked as is
  const lease_table capped(10, 4, 1s, 100);
  EXPECT_EQ(capped.take(1), 4);  // the lease is at most what can be admitted at once
}

TEST(RedisLeaseTable, LeaseOfOneOrLessIsOff) {
  for (const std::int64_t lease : {0, 1}) {
    lease_table t(lease, 10, 1s, 100);
    EXPECT_FALSE(t.enabled());
    EXPECT_EQ(t.take(1), 1);
    t.add("k", 5, lease_at(0ms));
    EXPECT_EQ(t.try_spend("k", 1, lease_at(0ms)), std::nullopt);
  }
}

TEST(RedisLeaseTable, TheSurplusIsSpentUntilItRunsOut) {
  lease_table t(10, 100, 1s, 100);
  EXPECT_EQ(t.try_spend("k", 1, lease_at(0ms)), std::nullopt);  // nothing leased yet
  ASSERT_TRUE(t.add("k", 9, lease_at(0ms)));
  EXPECT_EQ(t.try_spend("k", 4, lease_at(1ms)), 5);
  EXPECT_EQ(t.try_spend("k", 6, lease_at(1ms)), std::nullopt);  // holds 5: nothing spent
  EXPECT_EQ(t.try_spend("k", 5, lease_at(2ms)), 0);
  EXPECT_EQ(t.size(), 0u);  // spent out: dropped
  EXPECT_EQ(t.try_spend("k", 1, lease_at(2ms)), std::nullopt);
  EXPECT_EQ(t.try_spend("other", 1, lease_at(2ms)), std::nullopt);  // keys are separate
}

TEST(RedisLeaseTable, ALeaseExpiresTtlAfterItsLastSurplus) {
  lease_table t(10, 100, 100ms, 100);
  ASSERT_TRUE(t.add("k", 3, lease_at(0ms)));
  ASSERT_TRUE(t.add("k", 4, lease_at(50ms)));  // 7 tokens, expiring at 150 ms
  EXPECT_EQ(t.try_spend("k", 1, lease_at(149ms)), 6);
  EXPECT_EQ(t.try_spend("k", 1, lease_at(150ms)), std::nullopt);  // expired at 150 ms: dropped unspent
  EXPECT_EQ(t.size(), 0u);
}

TEST(RedisLeaseTable, ATtlTooLongForTheClockNeverExpires) {
  lease_table t(10, 100, std::chrono::nanoseconds::max(), 100);  // now + ttl would overflow
  ASSERT_TRUE(t.add("k", 9, lease_at(1000ms)));
  EXPECT_EQ(t.try_spend("k", 1, lease_at(1000ms)), 8);
  EXPECT_EQ(t.try_spend("k", 1, tp::max() - 1ns), 7);
}

TEST(RedisLeaseTable, QueriesAndOversizeRequestsNeverSpend) {
  lease_table t(10, 5, 1s, 100);
  ASSERT_TRUE(t.add("k", 9, lease_at(0ms)));  // two surpluses can hold more than max_n
  EXPECT_EQ(t.try_spend("k", 0, lease_at(0ms)), std::nullopt);
  EXPECT_EQ(t.try_spend("k", 6, lease_at(0ms)), std::nullopt);  // above max_n: refused whatever is held
  EXPECT_EQ(t.try_spend("k", 5, lease_at(0ms)), 4);
}

TEST(RedisLeaseTable, AFullTableDropsExpiredLeasesThenNewSurpluses) {
  lease_table t(10, 100, 100ms, 2);
  ASSERT_TRUE(t.add("a", 1, lease_at(0ms)));
  ASSERT_TRUE(t.add("b", 1, lease_at(50ms)));
  EXPECT_FALSE(t.add("c", 1, lease_at(99ms)));  // full, nothing expired: dropped
  EXPECT_TRUE(t.add("b", 1, lease_at(99ms)));   // a key already held still grows
  EXPECT_EQ(t.try_spend("c", 1, lease_at(99ms)), std::nullopt);
  EXPECT_TRUE(t.add("c", 1, lease_at(100ms)));  // "a" expired at 100 ms: room made
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.try_spend("b", 2, lease_at(100ms)), 0);
}

}  // namespace

namespace {

// A remembered refusal refuses requests as large or larger until its end, then is forgotten; smaller ones, and
// anything without leasing, are asked.
TEST(RedisLeaseTable, ARefusalIsRememberedForRequestsAsLargeUntilItEnds) {
  lease_table t(10, 25, 1s, 100);
  t.refused("k", 3, lease_at(50ms), lease_at(0ms));
  EXPECT_EQ(t.refuses("k", 3, lease_at(10ms)), lease_at(50ms));
  EXPECT_EQ(t.refuses("k", 7, lease_at(49ms)), lease_at(50ms));
  EXPECT_EQ(t.refuses("k", 2, lease_at(10ms)), std::nullopt) << "a smaller request may fit";
  EXPECT_EQ(t.refuses("k", 0, lease_at(10ms)), std::nullopt) << "a query is asked";
  EXPECT_EQ(t.refuses("other", 3, lease_at(10ms)), std::nullopt);
  EXPECT_EQ(t.refuses("k", 26, lease_at(10ms)), std::nullopt) << "above the limit: Redis answers never, not later";
  EXPECT_EQ(t.refuses("k", 3, lease_at(50ms)), std::nullopt) << "ended";
  EXPECT_EQ(t.refuses("k", 3, lease_at(10ms)), std::nullopt) << "and forgotten";
  lease_table off(1, 25, 1s, 100);
  off.refused("k", 1, lease_at(50ms), lease_at(0ms));
  EXPECT_EQ(off.refuses("k", 1, lease_at(10ms)), std::nullopt);
}

TEST(RedisLeaseTable, AFullTableOfRefusalsDropsEndedOnesThenForgetsNewOnes) {
  lease_table t(10, 25, 1s, 2);
  t.refused("a", 1, lease_at(10ms), lease_at(0ms));
  t.refused("b", 1, lease_at(100ms), lease_at(0ms));
  t.refused("c", 1, lease_at(100ms), lease_at(5ms));  // full, none ended: forgotten
  EXPECT_EQ(t.refuses("c", 1, lease_at(6ms)), std::nullopt);
  t.refused("c", 1, lease_at(100ms), lease_at(20ms));  // "a" ended: dropped, "c" kept
  EXPECT_EQ(t.refuses("c", 1, lease_at(21ms)), lease_at(100ms));
}

}  // namespace
