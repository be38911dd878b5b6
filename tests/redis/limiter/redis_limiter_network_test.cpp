// The distributed limiters when the network fails rather than a process, for each of the five algorithms: a proxy
// between the client and redis-server delays every reply by 50 ms, black-holes the connection (forwards nothing,
// sends neither FIN nor RST), resets it in the middle of a reply, and heals. Slow replies are still Redis's decisions;
// in a black hole every decision is the failure policy's, at its deadline (the median within 50 ms of it, each within a
// loaded machine's slack); a cut reply is an unknown outcome, charged once; once healed, Redis decides again by itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/client/connection.hpp"
#include "limiter_kinds.hpp"
#include "limiter_testing.hpp"
#include "proxied_redis.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::connection;
using admit::redis::decided_by;
using admit::redis::failure_policy;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::testing::eventually;
using steady = std::chrono::steady_clock;

constexpr auto bound = 50ms;   // how far past its deadline a decision may come
constexpr auto slack = 150ms;  // what a loaded 2-core machine (or a sanitizer) may add to any single one

limiter_options through_proxy(failure_policy p) {
  limiter_options o;
  o.timeout = 300ms;
  o.on_failure = p;
  o.breaker.failure_threshold = 0;  // every decision asks Redis
  return o;
}

template <class Kind>
class RedisLimiterNetwork : public ::testing::Test {};
TYPED_TEST_SUITE(RedisLimiterNetwork, admit::redis::testing::limiter_kinds, admit::redis::testing::kind_names);

TYPED_TEST(RedisLimiterNetwork, RepliesDelayedBy50msAreStillRedissDecisions) {
  admit::redis::testing::proxied_redis net;
  const auto limiter = TypeParam::make(net.conn, "slow", 5, through_proxy(failure_policy::fail_closed));
  ASSERT_TRUE(limiter.decide("k").consulted);
  net.proxy.delay_replies(50ms);
  for (int i = 0; i < 4; ++i) {
    const auto t0 = steady::now();
    const limiter_result r = limiter.decide("k");
    ASSERT_TRUE(r.consulted) << r.error.message();
    EXPECT_TRUE(r.decision.admitted);
    EXPECT_EQ(r.decision.remaining, 3 - i);
    EXPECT_GE(steady::now() - t0, 50ms);  // the proxy's delay: the reply did come through it
  }
  EXPECT_FALSE(limiter.decide("k").decision.admitted);  // 5 spent
}

TYPED_TEST(RedisLimiterNetwork, ABlackHoleIsThePolicysAtTheDeadlineAndHealsByItself) {
  for (const failure_policy policy : {failure_policy::fail_closed, failure_policy::fail_open}) {
    SCOPED_TRACE(policy == failure_policy::fail_open ? "fail_open" : "fail_closed");
    admit::redis::testing::proxied_redis net;
    const limiter_options o = through_proxy(policy);
    const auto limiter = TypeParam::make(net.conn, "hole", 100, o);
    ASSERT_TRUE(limiter.decide("k").consulted);
    net.proxy.black_hole(true);
    std::vector<steady::duration> late;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = steady::now();
      const limiter_result r = limiter.decide("k");
      late.push_back(steady::now() - t0 - o.timeout);
      EXPECT_FALSE(r.consulted);
      EXPECT_EQ(r.source, decided_by::failure_policy);
      EXPECT_TRUE(r.error == errc::timeout || r.error == errc::outcome_unknown) << r.error.message();
      EXPECT_EQ(r.decision.admitted, policy == failure_policy::fail_open);
      EXPECT_LT(late.back(), slack) << "decision " << i;
    }
    std::sort(late.begin(), late.end());
    EXPECT_LT(late[late.size() / 2], bound) << "median past the deadline";
    net.proxy.heal();
    limiter_result back;
    ASSERT_TRUE(eventually([&] { return (back = limiter.decide("k")).consulted; })) << back.error.message();
    EXPECT_TRUE(back.decision.admitted);
  }
}

// The connection is reset after half of a reply: the script ran, so the hit was charged, and the caller cannot know
// it. The decision is the failure policy's with outcome_unknown (never retried: it would charge twice); the client
// reconnects by itself and the next decision counts the cut one once.
TYPED_TEST(RedisLimiterNetwork, AResetInTheMiddleOfAReplyIsChargedOnceAndHealsByItself) {
  admit::redis::testing::proxied_redis net;
  const auto limiter = TypeParam::make(net.conn, "reset", 5, through_proxy(failure_policy::fail_closed));
  ASSERT_EQ(limiter.decide("k").decision.remaining, 4);
  net.proxy.reset_mid_reply();
  const limiter_result cut = limiter.decide("k");
  EXPECT_EQ(net.proxy.resets_done(), 1U);
  EXPECT_FALSE(cut.consulted);
  EXPECT_EQ(cut.error, errc::outcome_unknown) << cut.error.message();
  EXPECT_FALSE(cut.decision.admitted);
  limiter_result next;
  ASSERT_TRUE(eventually([&] { return (next = limiter.decide("k")).consulted; })) << next.error.message();
  EXPECT_EQ(next.decision.remaining, 2);  // 5 - 1 - 1 (the cut one, charged once) - 1
}

}  // namespace
