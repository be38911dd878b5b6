// tests/redis/support/semaphore_network_testing.hpp — what the semaphore's and the admission's network-fault tests
// share: the bounds a wait must keep past its deadline, the options of an object behind the proxy, the check of those
// bounds over waits that cannot be granted, and Redis's own view of the state (asked around the proxy).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"

namespace admit::redis::testing {

inline constexpr std::chrono::milliseconds deadline_bound{50};   // how far past its deadline a wait may end
inline constexpr std::chrono::milliseconds deadline_slack{150};  // what a loaded 2-core machine (or a sanitizer)
                                                                 // may add to any single one

// Every call's Redis deadline is 1 s: a wait that waited for a silent Redis to confirm its leave would overrun by
// that much, far beyond deadline_slack. No breaker: every call tries Redis.
inline semaphore_options through_proxy(failure_policy p = failure_policy::fail_closed) {
  semaphore_options o;
  o.timeout = std::chrono::seconds(1);
  o.poll_interval = std::chrono::milliseconds(100);
  o.on_failure = p;
  o.breaker.failure_threshold = 0;
  return o;
}

// How far past its deadline each of `rounds` timed waits that cannot be granted returned — try_until(deadline) makes
// one: each fails (a timeout, or in a black hole the failure policy's error), the median within deadline_bound and
// each within deadline_slack.
template <class TryUntil>
void expect_deadlines_kept(TryUntil try_until, int rounds) {
  using steady = std::chrono::steady_clock;
  std::vector<steady::duration> late;
  for (int i = 0; i < rounds; ++i) {
    const auto deadline = steady::now() + std::chrono::milliseconds(150);
    const semaphore_result r = try_until(deadline);
    late.push_back(steady::now() - deadline);
    ASSERT_FALSE(r);
    EXPECT_LT(late.back(), deadline_slack) << "round " << i << ": " << r.error().message();
  }
  std::sort(late.begin(), late.end());
  EXPECT_LT(late[late.size() / 2], deadline_bound) << "median past the deadline";
}

// Semaphore (or admission) `name` as Redis has it, asked on `direct` (not through the proxy); an empty snapshot
// before anything was acquired.
inline semaphore_snapshot snapshot_in_redis(connection& direct, const std::string& name) {
  auto [snap, ec] = inspect_semaphore(direct, name);
  if (ec == admit::errc::not_found) return {};
  EXPECT_FALSE(ec) << ec.message();
  return snap;
}

}  // namespace admit::redis::testing
