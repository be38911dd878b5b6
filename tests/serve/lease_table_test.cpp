// serve/engine/lease_table.hpp: the in-process concurrency rules' leases — library permits held by id until released
// or expired, each keeping its limiter alive until its permit is back, so that a rule removed by a reload cannot take
// the limiter from under a release (AddressSanitizer sees it if the order is wrong).
#include "serve/engine/lease_table.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>

namespace admit::serve {
namespace lease_table_test {

using limiter = admit::keyed_concurrency_limiter<>;

std::shared_ptr<limiter> make_limiter(std::int64_t limit) {
  return std::make_shared<limiter>(admit::keyed_concurrency_options{.limit = limit, .max_waiters = 0});
}

TEST(LeaseTable, ALeaseKeepsItsLimiterUntilItsPermitIsReleased) {
  lease_table t{{.ttl = std::chrono::seconds(10)}};
  auto l = make_limiter(1);
  auto p = l->try_acquire("k");
  ASSERT_TRUE(p);
  const auto id = t.hold(7, l, std::move(*p), 0);
  ASSERT_TRUE(id);
  EXPECT_EQ(id->size(), 32U);
  const std::weak_ptr<limiter> alive = l;
  EXPECT_EQ(l->in_flight("k"), 1);
  l.reset();  // the rule is gone (a reload): the lease still holds the limiter
  EXPECT_FALSE(alive.expired());
  EXPECT_TRUE(t.release(*id, 1));
  EXPECT_TRUE(alive.expired());  // the permit went back first, then the limiter
  EXPECT_FALSE(t.release(*id, 1));
}

TEST(LeaseTable, ExpiryAndDropOwnerReleaseThePermits) {
  lease_table t{{.ttl = std::chrono::seconds(10), .max_leases = 2}};
  auto l = make_limiter(3);
  const auto a = t.hold(1, l, *l->try_acquire("k"), 0);
  const auto b = t.hold(2, l, *l->try_acquire("k"), 5'000'000'000);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(t.hold(1, l, *l->try_acquire("k"), 0));  // full: that permit went back at once
  EXPECT_EQ(l->in_flight("k"), 2);
  t.expire(10'000'000'000 - 1);
  EXPECT_EQ(l->in_flight("k"), 2);
  t.expire(10'000'000'000);  // a's ttl has passed
  EXPECT_EQ(l->in_flight("k"), 1);
  EXPECT_FALSE(t.release(*a, 10'000'000'000));
  t.drop_owner(2);
  EXPECT_EQ(l->in_flight("k"), 0);
  EXPECT_EQ(t.size(), 0U);
  EXPECT_THROW(lease_table({.ttl = std::chrono::nanoseconds::zero()}), std::invalid_argument);
  EXPECT_THROW(lease_table({.max_leases = 0}), std::invalid_argument);
}

}  // namespace lease_table_test
}  // namespace admit::serve
