// admit::redis::admission — a rate and a concurrency limit in one decision — when the network fails rather than a
// process, as the semaphore's network tests do: a proxy that delays every reply by 50 ms, black-holes the connection
// (forwards nothing, closes nothing), resets it in the middle of a reply, and heals. In each: waits end within 50 ms of
// their deadline (the median; each within a loaded machine's slack), the failure policy is what callers see, fencing
// tokens grow in grant order, Redis never counts more holders than max_in_flight nor spends tokens it does not have,
// and once the proxy heals the admission works again by itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <system_error>
#include <vector>

#include "admit/admission_options.hpp"
#include "admit/errc.hpp"
#include "admit/rate.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/client/connection.hpp"
#include "limiter_testing.hpp"
#include "proxied_redis.hpp"
#include "semaphore_network_testing.hpp"
#include "semaphore_testing.hpp"

namespace admission_network_test {

using namespace std::chrono_literals;
using admit::admission_options;
using admit::redis::admission;
using admit::redis::connection;
using admit::redis::failure_policy;
using admit::redis::lease;
using admit::redis::semaphore_options;
using admit::redis::semaphore_result;
using admit::redis::testing::eventually;
using steady = std::chrono::steady_clock;

using admit::redis::testing::through_proxy;
constexpr auto slack = admit::redis::testing::deadline_slack;

// A rate that never binds within a test (so that every refusal is the permits'), and `permits` in flight.
admission_options limits(std::int64_t permits, const char* rate = "1000/s") {
  return {.rate = admit::rate::parse(rate), .burst = 1000, .max_in_flight = permits};
}

// The admission's state in Redis, asked directly (not through the proxy): {holders, tokens}.
std::pair<std::int64_t, std::int64_t> in_redis(connection& direct, const std::string& name) {
  const auto snap = admit::redis::testing::snapshot_in_redis(direct, name);
  return {snap.holder_count, snap.tokens};
}

void expect_deadlines_kept(admission& a, int rounds) {
  admit::redis::testing::expect_deadlines_kept([&](steady::time_point d) { return a.try_acquire_until(d, 0); }, rounds);
}

TEST(RedisAdmissionNetwork, RepliesDelayedBy50msKeepDeadlinesOrderAndBothLimits) {
  admit::redis::testing::proxied_redis net;
  admission a(net.conn, "slow-admission", limits(2), through_proxy());
  auto first = a.try_acquire(0);
  ASSERT_TRUE(first) << first.error().message();
  net.proxy.delay_replies(50ms);
  auto second = a.try_acquire_for(5s, 0);
  ASSERT_TRUE(second) << second.error().message();
  EXPECT_GT(second->fencing_token(), first->fencing_token());
  expect_deadlines_kept(a, 5);  // no permit free: every wait times out
  EXPECT_TRUE(eventually([&] { return admit::redis::testing::waiter_count(a) == 0; }));
  EXPECT_EQ(in_redis(net.direct, "slow-admission").first, 2);
  auto next = std::async(std::launch::async, [&] { return a.try_acquire_for(10s, 0); });
  ASSERT_TRUE(eventually([&] { return admit::redis::testing::waiter_count(a) == 1; }));
  ASSERT_EQ(first->release().first, lease::release_status::released);
  auto third = next.get();
  ASSERT_TRUE(third) << third.error().message();
  EXPECT_GT(third->fencing_token(), second->fencing_token());
  EXPECT_EQ(in_redis(net.direct, "slow-admission").first, 2);
}

// The rate alone: a request its tokens cannot admit by its deadline fails at once (the script says so), also behind
// a slow link — not at its deadline plus the delay.
TEST(RedisAdmissionNetwork, BehindASlowLinkTheRateStillFailsADeadlineItCannotMeetAtOnce) {
  admit::redis::testing::proxied_redis net;
  admission a(net.conn, "slow-rate", {.rate = admit::rate::parse("1/min"), .burst = 1, .max_in_flight = 10},
              through_proxy());
  ASSERT_TRUE(a.try_acquire(0));  // the one token
  net.proxy.delay_replies(50ms);
  const auto t0 = steady::now();
  const semaphore_result r = a.try_acquire_for(2s, 0);  // the next token is a minute away
  EXPECT_EQ(r.error(), admit::errc::timeout) << r.error().message();
  EXPECT_LT(steady::now() - t0, 50ms + slack) << "it waited for its deadline instead of failing at once";
  EXPECT_EQ(in_redis(net.direct, "slow-rate").second, 0);
}

TEST(RedisAdmissionNetwork, ABlackHoleFailsClosedWithinTheDeadlinesOrOpenUpToTheCapAndHeals) {
  admit::redis::testing::proxied_redis net;
  admission a(net.conn, "black-admission", limits(1), through_proxy());
  semaphore_options open = through_proxy(failure_policy::fail_open);
  open.timeout = 200ms;
  open.local_cap = 1;
  admission b(net.conn, "black-admission", limits(1), open);
  auto held = a.try_acquire(0);
  ASSERT_TRUE(held) << held.error().message();
  net.proxy.black_hole(true);
  expect_deadlines_kept(a, 3);
  const auto t0 = steady::now();
  auto r = a.try_acquire(0);  // no deadline of its own: the call's
  EXPECT_EQ(r.error(), admit::errc::timeout) << r.error().message();
  EXPECT_LT(steady::now() - t0, through_proxy().timeout + slack);
  auto local = b.try_acquire_for(2s, 0);  // fail-open: a local lease, at once
  ASSERT_TRUE(local) << local.error().message();
  EXPECT_EQ(local->fencing_token(), 0);
  EXPECT_FALSE(b.try_acquire(0));  // the local cap is taken
  EXPECT_LE(in_redis(net.direct, "black-admission").first, 1);
  net.proxy.heal();
  ASSERT_TRUE(eventually([&] { return held->release().first == lease::release_status::released; }) ||
              in_redis(net.direct, "black-admission").first == 0);
  semaphore_result again{admit::errc::timeout};  // until a call succeeds
  ASSERT_TRUE(eventually([&] { return static_cast<bool>(again = a.try_acquire_for(500ms, 0)); }))
      << again.error().message();
  EXPECT_GT(again->fencing_token(), held->fencing_token());
  EXPECT_EQ(in_redis(net.direct, "black-admission").first, 1);
}

// A reset after half of a grant's reply: Redis admitted a request nobody was told of. The acquisition fails, and the
// permit it may have taken is given back at once (not held until lease_ttl).
TEST(RedisAdmissionNetwork, AResetInTheMiddleOfAReplyLosesNoPermit) {
  admit::redis::testing::proxied_redis net;
  semaphore_options o = through_proxy();
  o.lease_ttl = 60s;  // a permit left behind would stay taken for the whole test
  admission a(net.conn, "reset-admission", limits(1), o);
  auto first = a.try_acquire(0);
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_EQ(first->release().first, lease::release_status::released);
  net.proxy.reset_mid_reply();
  auto cut = a.try_acquire(0);
  EXPECT_EQ(net.proxy.resets_done(), 1U);
  ASSERT_FALSE(cut);
  EXPECT_TRUE(eventually([&] { return in_redis(net.direct, "reset-admission").first == 0; }))
      << "the permit granted in the cut reply stays taken";
  semaphore_result again{admit::errc::timeout};
  ASSERT_TRUE(eventually([&] { return static_cast<bool>(again = a.try_acquire(0)); })) << again.error().message();
  EXPECT_GT(again->fencing_token(), first->fencing_token());
}

// Three threads take turns on one permit (and a rate of 200/s) while the link goes slow, black, reset and back: every
// grant's token is larger than the one before, Redis never counts more than one holder nor a negative bucket, every
// wait ends within its deadline's slack, and the admission grants again at the end.
TEST(RedisAdmissionNetwork, UnderEveryFaultInTurnTokensStayOrderedAndLimitsHeld) {
  admit::redis::testing::proxied_redis net;
  semaphore_options o = through_proxy();
  o.timeout = 300ms;
  admission a(net.conn, "faults-admission", {.rate = admit::rate::parse("200/s"), .burst = 5, .max_in_flight = 1}, o);
  admit::redis::testing::fenced_resource resource;
  std::atomic<bool> stop{false};
  std::atomic<int> grants{0}, stale{0}, late{0};
  std::vector<std::future<void>> workers;
  for (int w = 0; w < 3; ++w) {
    workers.push_back(std::async(std::launch::async, [&] {
      while (!stop.load()) {
        const auto deadline = steady::now() + 200ms;
        auto l = a.try_acquire_until(deadline, 0);
        if (steady::now() - deadline > slack) late.fetch_add(1);
        if (!l) continue;
        grants.fetch_add(1);
        if (!resource.write(l->fencing_token())) stale.fetch_add(1);
        (void)l->release();
      }
    }));
  }
  std::int64_t most = 0, fewest_tokens = 0;
  const auto watch = [&](std::chrono::milliseconds d) {
    for (const auto end = steady::now() + d; steady::now() < end;) {
      const auto [holders, tokens] = in_redis(net.direct, "faults-admission");
      most = std::max(most, holders);
      fewest_tokens = std::min(fewest_tokens, tokens);
    }
  };
  net.cycle_faults(2, watch);
  stop.store(true);
  for (auto& f : workers) f.get();
  EXPECT_GT(grants.load(), 0);
  EXPECT_EQ(stale.load(), 0) << "a token smaller than one granted before it";
  EXPECT_EQ(late.load(), 0) << "waits that ended later than their deadline's slack";
  EXPECT_LE(most, 1);
  EXPECT_GE(fewest_tokens, 0) << "the bucket spent tokens it did not have";
  semaphore_result end{admit::errc::timeout};  // until a call succeeds
  ASSERT_TRUE(eventually([&] { return static_cast<bool>(end = a.try_acquire(0)); })) << end.error().message();
}

}  // namespace admission_network_test
