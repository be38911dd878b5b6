// Reconnection delays (admit/redis/client/detail/backoff.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <set>

#include "admit/redis/client/detail/backoff.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::detail::backoff;

TEST(RedisBackoff, DoublesUpToTheCap) {
  backoff b(10ms, 100ms);
  EXPECT_EQ(b.ceiling(), 10ms);
  // The largest random value gives the ceiling itself; the smallest gives half of it.
  EXPECT_EQ(b.next(~std::uint64_t{0} - (~std::uint64_t{0} % (5'000'001))), 5ms);
  EXPECT_EQ(b.ceiling(), 20ms);
  (void)b.next(0);
  EXPECT_EQ(b.ceiling(), 40ms);
  (void)b.next(0);
  EXPECT_EQ(b.ceiling(), 80ms);
  (void)b.next(0);
  EXPECT_EQ(b.ceiling(), 100ms);
  for (int i = 0; i < 100; ++i) (void)b.next(0);
  EXPECT_EQ(b.ceiling(), 100ms);  // no overflow after many failures
}

TEST(RedisBackoff, JitterStaysWithinHalfToFull) {
  backoff b(8ms, 1s);
  std::uint64_t state = 42;
  std::set<std::int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    b.reset();
    const auto d = b.next(admit::redis::detail::splitmix64(state));
    EXPECT_GE(d, 4ms);
    EXPECT_LE(d, 8ms);
    seen.insert(d.count());
  }
  EXPECT_GT(seen.size(), 900u);  // spread out, not in lockstep
}

TEST(RedisBackoff, ResetStartsOver) {
  backoff b(10ms, 1s);
  for (int i = 0; i < 5; ++i) (void)b.next(0);
  EXPECT_EQ(b.ceiling(), 320ms);
  b.reset();
  EXPECT_EQ(b.ceiling(), 10ms);
  EXPECT_EQ(b.next(0), 5ms);
}

}  // namespace
