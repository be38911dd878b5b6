// admit::admission's metrics: one outcome counted per decision, the gauges with metrics off and on, the event hook
// before on_admitted, and each class's own counters and gauges — deterministic (manual clock, observers of the
// queue; nothing sleeps to make time pass).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "admission_testing.hpp"
#include "admit/admission.hpp"

// In the helpers' namespace (admission_testing.hpp), so that their names are found before any other file's when a
// unity build compiles several test files as one.
namespace admit::testing::admission_tests {

using namespace std::chrono_literals;

TEST_F(Admission, MetricsCountOneOutcomePerDecisionAndReportTheGauges) {
  std::vector<std::string> calls;  // the event hook and on_admitted, in the order they ran
  std::mutex calls_mutex;
  auto note = [&](std::string what) {
    std::lock_guard lock(calls_mutex);
    calls.push_back(std::move(what));
  };
  manual_admission adm{{.rate = admit::rate::every(10ms),
                        .burst = 2,
                        .max_in_flight = 2,
                        .max_waiters = 1,
                        .on_admitted = [&](const admit::admission_event&) { note("on_admitted"); }}};
  EXPECT_EQ(adm.metrics().admitted, 0u);  // not enabled: counters stay 0, the gauges are there
  EXPECT_EQ(adm.metrics().limit, 2);
  EXPECT_EQ(&adm.wait_times(), &adm.wait_times());
  EXPECT_EQ(adm.wait_times().summarize().count, 0u);
  adm.enable_metrics(
      [&](const admit::limiter_event& e) { note(std::string("event ") + std::to_string(e.wait.count())); });
  auto a = adm.try_acquire(0);  // admitted at once
  ASSERT_TRUE(a);
  EXPECT_EQ(adm.try_acquire(0, 3).error(), errc::exceeds_capacity);
  auto b = adm.try_acquire(0);  // the second token
  ASSERT_TRUE(b);
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);  // unavailable
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] { return adm.acquire(stop.get_token(), 0); });
  wait_for_waiters(adm, 1);
  EXPECT_EQ(adm.try_acquire_for(5ms, 0).error(), errc::queue_full);
  EXPECT_EQ(adm.metrics().waiting, 1u);
  stop.request_stop();
  EXPECT_EQ(waiter.get().error(), errc::cancelled);
  auto timed = std::async(std::launch::async, [&] { return adm.try_acquire_for(30ms, 0); });
  wait_for_waiters(adm, 1);
  clock_type::advance(10ms);  // a token is back, but no permit
  clock_type::wait_for_sleepers(1);
  a->release();  // admitted after 10 ms
  auto got = timed.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(adm.try_acquire_until(clock_type::now(), 0).error(), errc::timeout);  // a deadline already passed
  const admit::limiter_snapshot s = adm.metrics();
  EXPECT_EQ(s.admitted, 3u);
  EXPECT_EQ(s.waited, 1u);
  EXPECT_EQ(s.wait.max, 10ms);
  EXPECT_EQ(s.unavailable, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.timed_out, 1u);
  EXPECT_EQ(s.exceeds_capacity, 1u);
  EXPECT_EQ(s.limit, 2);
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(adm.wait_times().summarize().count, 3u);
  const std::vector<std::string> admitted_at_once{"event 0", "on_admitted"};
  EXPECT_EQ(std::vector<std::string>(calls.begin(), calls.begin() + 2), admitted_at_once);  // the event hook first
}

TEST_F(Admission, EachClassHasItsOwnCountersAndGauges) {
  int events = 0;
  manual_admission adm{{.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.25}}}};
  EXPECT_EQ(adm.metrics(1).admitted, 0u);  // not enabled
  EXPECT_EQ(adm.metrics(1).limit, 1);      // its guaranteed permits
  adm.enable_metrics([&](const admit::limiter_event&) { ++events; }, /*per_class=*/true);
  auto a = adm.try_acquire(0, 3);  // class a borrows one beyond its 2
  ASSERT_TRUE(a);
  auto b = adm.try_acquire(1);
  ASSERT_TRUE(b);
  EXPECT_EQ(adm.try_acquire(1).error(), errc::would_block);
  EXPECT_EQ(adm.try_acquire(0, 5).error(), errc::exceeds_capacity);
  const admit::limiter_snapshot sa = adm.metrics(0);
  const admit::limiter_snapshot sb = adm.metrics(1);
  EXPECT_EQ(sa.admitted, 1u);
  EXPECT_EQ(sa.exceeds_capacity, 1u);
  EXPECT_EQ(sa.unavailable, 0u);
  EXPECT_EQ(sa.limit, 2);
  EXPECT_EQ(sa.in_flight, 3);
  EXPECT_EQ(sb.admitted, 1u);
  EXPECT_EQ(sb.unavailable, 1u);
  EXPECT_EQ(sb.in_flight, 1);
  EXPECT_THROW((void)adm.metrics(2), std::invalid_argument);  // the unreserved share is not a class
  EXPECT_EQ(adm.metrics().admitted, 2u);
  EXPECT_EQ(events, 4);  // once per decision, not once per counter set
}

TEST_F(Admission, WithoutPerClassCountersAClassReportsOnlyItsGauges) {
  manual_admission adm{{.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.25}}}};
  adm.enable_metrics();
  auto a = adm.try_acquire(0);
  ASSERT_TRUE(a);
  EXPECT_EQ(adm.metrics().admitted, 1u);
  EXPECT_EQ(adm.metrics(0).admitted, 0u);
  EXPECT_EQ(adm.metrics(0).in_flight, 1);
}

}  // namespace admit::testing::admission_tests
