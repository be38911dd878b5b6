// admit::redis::semaphore when the network fails rather than a process: a proxy between the client and redis-server
// that delays every reply by 50 ms, black-holes the connection (forwards nothing, sends neither FIN nor RST), resets
// it in the middle of a reply, and heals. In each: no wait ends more than 50 ms past its deadline (the median; every
// one within a loaded machine's scheduling slack), the failure policy is what callers see, fencing tokens grow in
// grant order, Redis never counts more holders than the capacity, and once the proxy heals the client works again by
// itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <system_error>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/limiter_result.hpp"
#include "admit/redis/semaphore.hpp"
#include "limiter_testing.hpp"
#include "proxied_redis.hpp"
#include "semaphore_network_testing.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::failure_policy;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::semaphore_result;
using admit::redis::testing::eventually;
using steady = std::chrono::steady_clock;

using admit::redis::testing::through_proxy;
constexpr auto slack = admit::redis::testing::deadline_slack;

void expect_deadlines_kept(semaphore& s, int rounds) {
  admit::redis::testing::expect_deadlines_kept([&](steady::time_point d) { return s.try_acquire_until(d); }, rounds);
}

// How many holders Redis counts for `name`, asked directly (not through the proxy).
std::int64_t holders_in_redis(connection& direct, const std::string& name) {
  return admit::redis::testing::snapshot_in_redis(direct, name).holder_count;
}

TEST(RedisSemaphoreNetwork, RepliesDelayedBy50msKeepDeadlinesOrderAndCapacity) {
  admit::redis::testing::proxied_redis net;
  semaphore s(net.conn, "slow-link", 2, through_proxy());
  auto a = s.try_acquire();
  ASSERT_TRUE(a) << a.error().message();
  net.proxy.delay_replies(50ms);
  auto b = s.try_acquire_for(5s);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_GT(b->fencing_token(), a->fencing_token());
  expect_deadlines_kept(s, 5);  // full: every wait times out
  // Each timed-out waiter left the queue (its leave was sent before the wait returned; it lands 50 ms later).
  EXPECT_TRUE(
      eventually([&] { return admit::redis::inspect_semaphore(net.direct, "slow-link").first.waiter_count == 0; }));
  EXPECT_EQ(holders_in_redis(net.direct, "slow-link"), 2);
  // A waiter still gets the permit a release frees, with the next token.
  auto next = std::async(std::launch::async, [&] { return s.try_acquire_for(10s); });
  admit::redis::testing::wait_for_waiters(s, 1);
  ASSERT_EQ(a->release().first, lease::release_status::released);
  auto c = next.get();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_GT(c->fencing_token(), b->fencing_token());
  EXPECT_EQ(holders_in_redis(net.direct, "slow-link"), 2);
}

TEST(RedisSemaphoreNetwork, ABlackHoleFailsClosedWithinTheDeadlinesAndHealsByItself) {
  admit::redis::testing::proxied_redis net;
  semaphore s(net.conn, "black-hole", 1, through_proxy());
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  net.proxy.black_hole(true);
  expect_deadlines_kept(s, 5);
  // A call with no deadline of its own ends at the call's: the error, not a hang.
  const auto t0 = steady::now();
  auto r = s.try_acquire();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), admit::errc::timeout) << r.error().message();
  EXPECT_LT(steady::now() - t0, s.options().timeout + slack);
  EXPECT_LE(holders_in_redis(net.direct, "black-hole"), 1);
  net.proxy.heal();
  // The connection comes back by itself: the lease held through the outage is given back, and the permit goes on.
  ASSERT_TRUE(eventually([&] { return held->release().first == lease::release_status::released; }) ||
              holders_in_redis(net.direct, "black-hole") == 0);
  semaphore_result again{admit::errc::timeout};  // until a call succeeds
  ASSERT_TRUE(eventually([&] { return static_cast<bool>(again = s.try_acquire_for(500ms)); }))
      << again.error().message();
  EXPECT_GT(again->fencing_token(), held->fencing_token());
  EXPECT_EQ(holders_in_redis(net.direct, "black-hole"), 1);
}

TEST(RedisSemaphoreNetwork, ABlackHoleFailsOpenWithLocalLeasesUpToTheCap) {
  admit::redis::testing::proxied_redis net;
  semaphore_options o = through_proxy(failure_policy::fail_open);
  o.timeout = 200ms;
  o.local_cap = 1;
  semaphore s(net.conn, "black-hole-open", 1, o);
  ASSERT_TRUE(s.try_acquire());  // the semaphore exists; that lease is given back at once
  net.proxy.black_hole(true);
  const auto t0 = steady::now();
  auto local = s.try_acquire_for(2s);
  ASSERT_TRUE(local) << local.error().message();
  EXPECT_EQ(local->fencing_token(), 0);  // never in Redis
  EXPECT_LT(steady::now() - t0, o.timeout + slack);
  auto beyond = s.try_acquire();
  EXPECT_FALSE(beyond);  // the local cap of 1 is taken
  net.proxy.heal();
  ASSERT_TRUE(local->release().first == lease::release_status::released);
  semaphore_result back{admit::errc::timeout};  // until a call succeeds
  ASSERT_TRUE(eventually([&] { return (back = s.try_acquire()) && back->fencing_token() != 0; }))
      << (back ? "a local lease" : back.error().message())
      << "; in Redis: " << admit::redis::inspect_semaphore(net.direct, "black-hole-open").first.holder_count
      << " holder(s)";
}

// The connection is reset after half of a grant's reply: the script ran, so Redis holds a lease nobody was told
// of. The acquisition fails with the connection's error, the lease it may have taken is given back (not held until
// lease_ttl), and the client reconnects by itself.
TEST(RedisSemaphoreNetwork, AResetInTheMiddleOfAReplyLosesNoPermit) {
  admit::redis::testing::proxied_redis net;
  semaphore_options o = through_proxy();
  o.lease_ttl = 60s;  // a permit left behind would stay taken for the whole test
  semaphore s(net.conn, "reset", 1, o);
  auto first = s.try_acquire();
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_EQ(first->release().first, lease::release_status::released);
  net.proxy.reset_mid_reply();
  auto cut = s.try_acquire();
  EXPECT_EQ(net.proxy.resets_done(), 1U);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error(), std::error_code());
  EXPECT_TRUE(eventually([&] { return holders_in_redis(net.direct, "reset") == 0; }))
      << "the permit granted in the cut reply stays taken";
  semaphore_result again{admit::errc::timeout};  // until a call succeeds
  ASSERT_TRUE(eventually([&] { return static_cast<bool>(again = s.try_acquire()); })) << again.error().message();
  EXPECT_GT(again->fencing_token(), first->fencing_token());
}

// Three threads take turns on one permit while the link goes slow, black, reset and back, over and over: every
// grant's token is larger than the one before it (a fenced resource accepts each write), Redis never counts more than
// one holder, every wait ends within its deadline's slack, and the semaphore grants again at the end.
TEST(RedisSemaphoreNetwork, UnderEveryFaultInTurnTokensStayOrderedAndCapacityHeld) {
  admit::redis::testing::proxied_redis net;
  semaphore_options o = through_proxy();
  o.timeout = 300ms;
  semaphore s(net.conn, "faults", 1, o);
  admit::redis::testing::fenced_resource resource;
  std::atomic<bool> stop{false};
  std::atomic<int> grants{0}, stale{0}, late{0};
  std::vector<std::future<void>> workers;
  for (int w = 0; w < 3; ++w) {
    workers.push_back(std::async(std::launch::async, [&] {
      while (!stop.load()) {
        const auto deadline = steady::now() + 200ms;
        auto l = s.try_acquire_until(deadline);
        if (steady::now() - deadline > slack) late.fetch_add(1);
        if (!l) continue;
        grants.fetch_add(1);
        if (!resource.write(l->fencing_token())) stale.fetch_add(1);
        (void)l->release();
      }
    }));
  }
  std::int64_t most = 0;
  const auto watch = [&](std::chrono::milliseconds d) {
    for (const auto end = steady::now() + d; steady::now() < end;)
      most = std::max(most, holders_in_redis(net.direct, "faults"));
  };
  net.cycle_faults(3, watch);
  stop.store(true);
  for (auto& f : workers) f.get();
  EXPECT_GT(grants.load(), 0);
  EXPECT_EQ(stale.load(), 0) << "a token smaller than one granted before it";
  EXPECT_EQ(late.load(), 0) << "waits that ended later than their deadline's slack";
  EXPECT_LE(most, 1);
  semaphore_result end{admit::errc::timeout};  // until a call succeeds
  ASSERT_TRUE(eventually([&] { return static_cast<bool>(end = s.try_acquire()); })) << end.error().message();
}

}  // namespace
