// Tests of serve/engine/window_policies.hpp: both policies satisfy admit::keyed_policy; the fixed window, kept in
// admit::keyed with evictions (a small key cap, every insertion sweeping), decides exactly as a model of
// envoyproxy/ratelimit's INCRBY counters that never forgets a key, on random traces whose times do not go back; a key
// dropped and met again at an older time is answered conservatively; the keyed sliding window decides exactly as one
// admit::sliding_window per key (admitted, remaining, reset) on random traces, stale times included.
#include "serve/engine/window_policies.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "admit/keyed.hpp"
#include "admit/sliding_window.hpp"

namespace admit::serve {
namespace {

static_assert(keyed_policy<upstream_fixed_window>);
static_assert(keyed_policy<keyed_sliding_window>);

using tp = unix_clock::time_point;
constexpr std::int64_t second = 1'000'000'000;
constexpr std::int64_t base = 1'699'920'000 * second;

TEST(UpstreamFixedWindow, EvictionNeverChangesACountWhenTimesDoNotGoBack) {
  std::mt19937_64 rng(7);
  keyed<upstream_fixed_window> store{upstream_fixed_window::config_type{3 * second},
                                     keyed_options{.max_keys = 16, .shards = 1, .sweep = 8}};
  struct counter {
    std::int64_t start = 0;
    std::uint64_t count = 0;
  };
  std::map<std::string, counter> model;
  std::int64_t now = base;
  for (int i = 0; i < 20'000; ++i) {
    now += static_cast<std::int64_t>(rng() % (second / 2));
    const std::string key = std::string("k").append(std::to_string(rng() % 16));
    const std::int64_t n = static_cast<std::int64_t>(rng() % 4);
    const decision d = store.decide_at(key, tp{std::chrono::nanoseconds{now}}, n);
    counter& c = model[key];
    const std::int64_t start = now - now % (3 * second);
    if (start > c.start) c = {start, 0};
    c.count += static_cast<std::uint64_t>(n);
    ASSERT_TRUE(d.admitted) << i;
    ASSERT_EQ(static_cast<std::uint64_t>(d.remaining), c.count) << i;
    ASSERT_EQ(d.reset_after.count(), start + 3 * second - now) << i;
  }
  EXPECT_GT(store.stats().evicted_idle, 0u);  // the trace did exercise eviction
}

TEST(UpstreamFixedWindow, AKeyDroppedAndMetAgainAtAnOlderTimeIsAtItsMaximum) {
  keyed<upstream_fixed_window> store{upstream_fixed_window::config_type{second},
                                     keyed_options{.max_keys = 16, .shards = 1, .sweep = 64}};
  ASSERT_TRUE(store.decide_at("old", tp{std::chrono::nanoseconds{base}}, 1).admitted);
  // a new key two windows later sweeps the idle one away and raises the floor
  ASSERT_TRUE(store.decide_at("new", tp{std::chrono::nanoseconds{base + 2 * second}}, 1).admitted);
  ASSERT_FALSE(store.contains("old"));
  // "old" again, at a time in its old window: the count it had is unknown, so it is taken as saturated
  const decision stale = store.decide_at("old", tp{std::chrono::nanoseconds{base + second / 2}}, 1);
  EXPECT_GE(static_cast<std::uint64_t>(stale.remaining), upstream_fixed_window::saturated);
  // and at the present it starts a fresh window
  const decision fresh = store.decide_at("again", tp{std::chrono::nanoseconds{base + 2 * second}}, 1);
  EXPECT_EQ(fresh.remaining, 1);
}

TEST(KeyedSlidingWindow, DecidesAsOneSlidingWindowPerKey) {
  for (const std::int64_t limit : {1, 7, 100}) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(limit));
    const std::int64_t window = 10 * second;
    keyed<keyed_sliding_window> store{keyed_sliding_window::config_type{limit, window},
                                      keyed_options{.max_keys = 16, .shards = 1, .sweep = 8}};
    std::map<std::string, std::unique_ptr<basic_sliding_window<unix_clock>>> alone;
    std::int64_t newest = base;
    for (int i = 0; i < 20'000; ++i) {
      newest += static_cast<std::int64_t>(rng() % (window / 8));
      // mostly the newest time, sometimes a stale one (a thread late by up to a window)
      const std::int64_t now = rng() % 8 == 0 ? newest - static_cast<std::int64_t>(rng() % window) : newest;
      const std::string key = std::string("k").append(std::to_string(rng() % 6));
      const std::int64_t n = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(limit + 2));
      auto& ref = alone[key];
      if (!ref) ref = std::make_unique<basic_sliding_window<unix_clock>>(limit, std::chrono::nanoseconds{window});
      const tp t{std::chrono::nanoseconds{now}};
      const decision expected = ref->decide_at(t, n);
      const decision d = store.decide_at(key, t, n);
      ASSERT_EQ(d.admitted, expected.admitted) << "limit " << limit << " step " << i;
      ASSERT_EQ(d.remaining, expected.remaining) << "limit " << limit << " step " << i;
      if (now == newest) {
        ASSERT_EQ(d.reset_after, expected.reset_after) << "limit " << limit << " step " << i;
      }
    }
  }
}

}  // namespace
}  // namespace admit::serve
