// The opt-in metrics of every local rate limiter (detail/rate_limiter_base.hpp): off by default (all counters zero),
// and once enabled every decision counts exactly one outcome — try_acquire / decide refusals as unavailable, waits by
// how they ended, with the wait of an admission — and the event hook sees each decision once. On the manual clock, with
// explicit times.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/errc.hpp"
#include "admit/fixed_window.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/pacer.hpp"
#include "admit/rate.hpp"
#include "admit/sliding_log.hpp"
#include "admit/sliding_window.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"
#include "admit/wait_result.hpp"
#include "admit/warmup.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace rate_limiter_metrics_test {

namespace {

using namespace std::chrono_literals;
using admit::acquire_outcome;
using admit::errc;
using admit::limiter_event;
using admit::rate;
using clock_type = admit::testing::manual_clock;
using time_point = clock_type::time_point;

// About 10 per second, 2 at once (the warm-up limiter: one request at a time).
template <template <class> class L>
struct rate_family {
  using limiter = L<clock_type>;
  static std::unique_ptr<limiter> make() { return std::make_unique<limiter>(rate::per_second(10), 2); }
};
template <template <class> class L>
struct window_family {
  using limiter = L<clock_type>;
  static std::unique_ptr<limiter> make() { return std::make_unique<limiter>(2, 200ms); }
};
struct token_bucket_family : rate_family<admit::basic_token_bucket> {
  static constexpr const char* name = "TokenBucket";
};
struct gcra_family : rate_family<admit::basic_gcra> {
  static constexpr const char* name = "Gcra";
};
struct fixed_window_family : window_family<admit::basic_fixed_window> {
  static constexpr const char* name = "FixedWindow";
};
struct sliding_window_family : window_family<admit::basic_sliding_window> {
  static constexpr const char* name = "SlidingWindow";
};
struct sliding_log_family : window_family<admit::basic_sliding_log> {
  static constexpr const char* name = "SlidingLog";
};
struct pacer_family {
  static constexpr const char* name = "Pacer";
  using limiter = admit::basic_pacer<clock_type>;
  static std::unique_ptr<limiter> make() {
    return std::make_unique<limiter>(rate::per_second(10), admit::pacer_options{.slack = 1});
  }
};
struct warmup_family {
  static constexpr const char* name = "Warmup";
  using limiter = admit::basic_warmup<clock_type>;
  static std::unique_ptr<limiter> make() { return std::make_unique<limiter>(rate::per_second(10), 1s); }
};

struct family_name {
  template <class Family>
  static std::string GetName(int) {
    return Family::name;
  }
};

// The events a limiter's hook saw.
struct event_log {
  std::vector<limiter_event> events;
  auto handler() {
    return [this](const limiter_event& e) { events.push_back(e); };
  }
};

template <class Family>
class RateLimiterMetrics : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
};

using families = ::testing::Types<token_bucket_family, gcra_family, pacer_family, fixed_window_family,
                                  sliding_window_family, sliding_log_family, warmup_family>;
TYPED_TEST_SUITE(RateLimiterMetrics, families, family_name);

TYPED_TEST(RateLimiterMetrics, DisabledCountsNothing) {
  auto l = TypeParam::make();
  for (int i = 0; i < 5; ++i) {
    (void)l->try_acquire_at(time_point{});
    (void)l->decide_at(time_point{});
  }
  const admit::limiter_snapshot s = l->metrics();
  EXPECT_EQ(s.admitted + s.unavailable + s.rejected + s.timed_out + s.cancelled + s.exceeds_capacity + s.failed, 0U);
  EXPECT_EQ(s.waiting, 0U);
  EXPECT_EQ(l->native_metrics(), nullptr);
}

// try_acquire and decide, with and without an explicit time, each count one outcome: the counters equal the calls'
// own answers, and the hook sees each decision once, in order.
TYPED_TEST(RateLimiterMetrics, CountersEqualTheDecisionsMadeAndTheHookSeesEachOnce) {
  auto l = TypeParam::make();
  event_log log;
  l->enable_metrics(log.handler());
  std::vector<acquire_outcome> expected;
  std::uint64_t admitted = 0;
  std::uint64_t refused = 0;
  auto note = [&](bool ok) {
    ++(ok ? admitted : refused);
    expected.push_back(ok ? acquire_outcome::admitted : acquire_outcome::unavailable);
  };
  for (const auto t : {0ms, 0ms, 0ms, 50ms, 150ms, 150ms, 400ms, 400ms}) {
    note(l->try_acquire_at(time_point{t}));
    note(l->decide_at(time_point{t}).admitted);
  }
  clock_type::set(time_point{2s});
  note(l->try_acquire());
  note(l->decide().admitted);
  note(l->decide(2).admitted);
  ASSERT_GT(admitted, 0U);
  ASSERT_GT(refused, 0U);  // both outcomes exercised

  const admit::limiter_snapshot s = l->metrics();
  EXPECT_EQ(s.admitted, admitted);
  EXPECT_EQ(s.unavailable, refused);
  EXPECT_EQ(s.waited, 0U);  // nothing waited
  EXPECT_EQ(s.rejected + s.timed_out + s.cancelled + s.exceeds_capacity + s.failed, 0U);
  ASSERT_EQ(log.events.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(log.events[i].outcome, expected[i]) << "decision " << i;
    EXPECT_EQ(log.events[i].wait, 0ns);
  }
  EXPECT_EQ(log.events.back().n, 2);
}

// The queries are not decisions: they count nothing.
TYPED_TEST(RateLimiterMetrics, QueriesCountNothing) {
  auto l = TypeParam::make();
  event_log log;
  l->enable_metrics(log.handler());
  (void)l->time_until_available_at(time_point{});
  (void)l->time_until_available();
  EXPECT_TRUE(log.events.empty());
  EXPECT_EQ(l->metrics().admitted + l->metrics().unavailable, 0U);
}

// --- the waits (token bucket, pacer, warm-up) ---

template <class Family>
class BlockingWaitMetrics : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
};
using blocking_families = ::testing::Types<token_bucket_family, pacer_family, warmup_family>;
TYPED_TEST_SUITE(BlockingWaitMetrics, blocking_families, family_name);

// Each wait counts one outcome: admitted at once (wait 0), admitted after a wait (the time it slept on the clock),
// queue_full, timeout and cancelled.
TYPED_TEST(BlockingWaitMetrics, EachWaitCountsHowItEnded) {
  auto l = TypeParam::make();
  event_log log;
  l->enable_metrics(log.handler());
  while (l->try_acquire()) {
  }
  const std::size_t spent = log.events.size();  // the admissions and the refusal that spent it
  const auto due = l->time_until_available();
  ASSERT_GT(due, 0ns);

  admit::wait_result waited;
  std::jthread t([&] { waited = l->acquire(); });
  clock_type::wait_for_sleepers(1);
  l->set_max_waiters(1);
  EXPECT_EQ(l->acquire().error(), errc::queue_full);
  EXPECT_EQ(l->try_acquire_for(due / 2).error(), errc::timeout);
  std::stop_source stop;
  stop.request_stop();
  EXPECT_EQ(l->acquire(1, stop.get_token()).error(), errc::cancelled);
  clock_type::advance(1h);
  t.join();
  ASSERT_TRUE(waited.has_value());
  clock_type::advance(1h);
  l->set_max_waiters(0);
  EXPECT_TRUE(l->acquire());  // at once

  const admit::limiter_snapshot s = l->metrics();
  EXPECT_EQ(s.rejected, 1U);
  EXPECT_EQ(s.timed_out, 1U);
  EXPECT_EQ(s.cancelled, 1U);
  EXPECT_EQ(s.waited, 1U);
  EXPECT_EQ(s.wait.count, s.admitted);
  ASSERT_EQ(log.events.size(), spent + 5);
  // The events of the waits, in the order they ended: the waiter ended after the three refusals.
  const std::vector<acquire_outcome> waits = {acquire_outcome::queue_full, acquire_outcome::timeout,
                                              acquire_outcome::cancelled, acquire_outcome::admitted,
                                              acquire_outcome::admitted};
  for (std::size_t i = 0; i < waits.size(); ++i) EXPECT_EQ(log.events[spent + i].outcome, waits[i]) << "wait " << i;
  EXPECT_EQ(log.events[spent + 3].wait, 1h);  // slept from 0 until the clock moved by an hour
  EXPECT_EQ(log.events[spent + 4].wait, 0ns);
}

TEST(TokenBucketMetrics, RequestAboveTheBurstIsExceedsCapacity) {
  clock_type::reset();
  admit::basic_token_bucket<clock_type> bucket{rate::per_second(10), 2};
  bucket.enable_metrics();
  EXPECT_EQ(bucket.acquire(3).error(), errc::exceeds_capacity);
  EXPECT_FALSE(bucket.try_acquire(3));  // a try_* refusal is unavailable, whatever the reason
  EXPECT_EQ(bucket.metrics().exceeds_capacity, 1U);
  EXPECT_EQ(bucket.metrics().unavailable, 1U);
}

// --- keyed: one set of counters for the whole keyed limiter ---

TEST(KeyedMetrics, OneCounterForAllKeys) {
  admit::keyed<admit::basic_gcra<clock_type>> per_key{rate::per_second(10), 2};
  EXPECT_EQ(per_key.metrics().admitted, 0U);
  event_log log;
  per_key.enable_metrics(log.handler());
  std::uint64_t admitted = 0;
  std::uint64_t refused = 0;
  for (const char* key : {"a", "b", "a", "a", "b", "c", "a"}) {
    const bool ok = per_key.try_acquire_at(std::string(key), time_point{});
    ++(ok ? admitted : refused);
    const bool ok2 = per_key.decide_at(std::string_view(key), time_point{}).admitted;
    ++(ok2 ? admitted : refused);
  }
  ASSERT_GT(refused, 0U);
  const admit::limiter_snapshot s = per_key.metrics();
  EXPECT_EQ(s.admitted, admitted);
  EXPECT_EQ(s.unavailable, refused);
  EXPECT_EQ(log.events.size(), admitted + refused);
}

TEST(KeyedMetrics, KeyCapRefusalIsUnavailable) {
  admit::keyed<admit::basic_gcra<clock_type>> per_key{rate::per_second(1), 1,
                                                      admit::keyed_options{.max_keys = 1, .shards = 1}};
  per_key.enable_metrics();
  EXPECT_TRUE(per_key.try_acquire_at(std::string("a"), time_point{}));
  EXPECT_TRUE(admit::is_key_limit_refusal(per_key.decide_at(std::string("b"), time_point{})));
  EXPECT_EQ(per_key.metrics().admitted, 1U);
  EXPECT_EQ(per_key.metrics().unavailable, 1U);
}

}  // namespace

}  // namespace rate_limiter_metrics_test
