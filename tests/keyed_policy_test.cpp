// admit::keyed_policy: the concept a user's own algorithm satisfies to be keyed, and keyed over such a policy.
#include "admit/keyed_policy.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "admit/keyed.hpp"
#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace keyed_policy_test {

namespace {

using namespace std::chrono_literals;
using clock_type = admit::testing::manual_clock;
using time_point = clock_type::time_point;

time_point at(std::chrono::nanoseconds d) { return time_point{d}; }

// A user's policy: at most one request per key every `gap` (the example of docs/keyed.md).
struct min_gap_policy {
  using clock_type = admit::testing::manual_clock;
  using config_type = std::chrono::nanoseconds;
  using state_type = std::int64_t;
  static constexpr std::int64_t none = std::numeric_limits<std::int64_t>::min();

  static admit::decision decide(const config_type& gap, state_type& last, std::int64_t now, std::int64_t n) noexcept {
    admit::decision d;
    d.limit = 1;
    const std::int64_t ready = last == none ? none : last + gap.count();
    if (n > 1) {
      d.retry_after = std::chrono::nanoseconds::max();
    } else if (now < ready) {
      d.retry_after = d.reset_after = std::chrono::nanoseconds(ready - now);
    } else {
      d.admitted = true;
      if (n == 1) {
        last = now;
        d.reset_after = gap;
      } else {
        d.remaining = 1;
      }
    }
    return d;
  }
  static std::int64_t full_at(const config_type& gap, const state_type& last) noexcept {
    return last == none ? none : last + gap.count();
  }
  static state_type full_since(const config_type& gap, std::int64_t at) noexcept {
    return at == none ? none : at - gap.count();
  }
};

struct no_full_at {
  using clock_type = admit::testing::manual_clock;
  using config_type = int;
  using state_type = int;
  static admit::decision decide(const config_type&, state_type&, std::int64_t, std::int64_t) noexcept { return {}; }
  static state_type full_since(const config_type&, std::int64_t) noexcept { return 0; }
};

struct state_not_comparable {
  struct state {
    int x;
  };
  using clock_type = admit::testing::manual_clock;
  using config_type = int;
  using state_type = state;
  static admit::decision decide(const config_type&, state_type&, std::int64_t, std::int64_t) noexcept { return {}; }
  static std::int64_t full_at(const config_type&, const state_type&) noexcept { return 0; }
  static state_type full_since(const config_type&, std::int64_t) noexcept { return {}; }
};

static_assert(admit::keyed_policy<min_gap_policy>);
static_assert(admit::keyed_policy<admit::keyed_gcra_policy<>>);
static_assert(admit::keyed_policy<admit::keyed_token_bucket_policy<clock_type>>);
static_assert(!admit::keyed_policy<no_full_at>);
static_assert(!admit::keyed_policy<state_not_comparable>);
static_assert(!admit::keyed_policy<admit::gcra>);  // a limiter is keyed through keyed_policy_for, not a policy itself
static_assert(std::is_same_v<admit::keyed_policy_for<admit::gcra>::type, admit::keyed_gcra_policy<>>);
static_assert(std::is_same_v<admit::keyed_policy_for<min_gap_policy>::type, min_gap_policy>);

TEST(KeyedPolicy, AUserPolicyIsKeyedPerKey) {
  admit::keyed<min_gap_policy> debounce{1s};
  EXPECT_TRUE(debounce.try_acquire_at("alice", at(0s)));
  EXPECT_FALSE(debounce.try_acquire_at("alice", at(300ms)));
  EXPECT_TRUE(debounce.try_acquire_at("bob", at(300ms)));  // keys are independent
  const admit::decision d = debounce.decide_at("alice", at(400ms));
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.limit, 1);
  EXPECT_EQ(d.retry_after, 600ms);
  EXPECT_TRUE(debounce.try_acquire_at("alice", at(1s)));
  EXPECT_EQ(debounce.decide_at("carol", at(1s), 2).retry_after, std::chrono::nanoseconds::max());
  EXPECT_EQ(debounce.size(), 2U);  // carol's refusal stored nothing
}

TEST(KeyedPolicy, AUserPolicysKeysAreEvictedFromFullAtAndStartOverFromTheFloor) {
  admit::keyed<min_gap_policy> debounce{1s};
  ASSERT_TRUE(debounce.try_acquire_at("alice", at(10s)));
  EXPECT_EQ(debounce.evict_idle_at(at(11s) - 1ns), 0U);  // not idle before full_at
  EXPECT_EQ(debounce.evict_idle_at(at(11s)), 1U);
  EXPECT_FALSE(debounce.contains("alice"));
  // An earlier `now` after the eviction is answered no more generously than before it: full_since(11s) refuses.
  EXPECT_FALSE(debounce.try_acquire_at("alice", at(10s) + 500ms));
  EXPECT_TRUE(debounce.try_acquire_at("alice", at(11s)));
}

}  // namespace

}  // namespace keyed_policy_test
