// admit::basic_semaphore's opt-in metrics: off by default (counters 0, gauges live), every outcome of try_acquire and
// the blocking waits counted exactly once with its wait (on the manual clock), the event hook, and a hook that throws.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

#include "admit/semaphore.hpp"
#include "admit/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using admit::acquire_outcome;
using admit::errc;
using clock_type = admit::testing::manual_clock;
using manual_semaphore = admit::basic_semaphore<clock_type>;

template <class Semaphore>
void wait_for_waiters(const Semaphore& sem, std::size_t n) {
  while (sem.waiting() < n) std::this_thread::yield();
}

TEST(SemaphoreMetrics, AreOffByDefaultButTheGaugesAreLive) {
  manual_semaphore sem{3};
  EXPECT_FALSE(sem.metrics_enabled());
  auto p = *sem.try_acquire(2);
  EXPECT_FALSE(sem.try_acquire(2));
  const auto s = sem.metrics();
  EXPECT_EQ(s.limit, 3);
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.admitted, 0u);
  EXPECT_EQ(s.unavailable, 0u);
  EXPECT_EQ(sem.wait_times().count(), 0u);
}

TEST(SemaphoreMetrics, CountEveryOutcomeOnceWithItsWait) {
  clock_type::reset();
  manual_semaphore sem{2, {.max_waiters = 1}};
  std::vector<admit::limiter_event> events;
  sem.enable_metrics([&](const admit::limiter_event& e) { events.push_back(e); });
  ASSERT_TRUE(sem.metrics_enabled());

  auto held = *sem.try_acquire(2);   // admitted, waited 0
  EXPECT_FALSE(sem.try_acquire());   // unavailable
  EXPECT_FALSE(sem.try_acquire(3));  // exceeds_capacity
  EXPECT_EQ(sem.acquire(3).error(), errc::exceeds_capacity);
  auto granted = std::async(std::launch::async, [&] { return sem.try_acquire_for(100ms); });
  clock_type::wait_for_sleepers(1);
  EXPECT_EQ(sem.acquire().error(), errc::queue_full);  // one already waits
  clock_type::advance(30ms);
  held.split(1).release();
  auto got = granted.get();  // admitted after 30 ms
  ASSERT_TRUE(got);
  auto timed = std::async(std::launch::async, [&] { return sem.try_acquire_for(10ms); });
  clock_type::wait_for_sleepers(1);
  clock_type::advance(10ms);
  EXPECT_EQ(timed.get().error(), errc::timeout);
  std::stop_source stop;
  auto cancelled = std::async(std::launch::async, [&] { return sem.acquire(1, stop.get_token()); });
  wait_for_waiters(sem, 1);
  stop.request_stop();
  EXPECT_EQ(cancelled.get().error(), errc::cancelled);
  sem.close();
  EXPECT_EQ(sem.acquire().error(), errc::closed);
  EXPECT_FALSE(sem.try_acquire());  // closed too

  const auto s = sem.metrics();
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.waited, 1u);
  EXPECT_EQ(s.unavailable, 1u);
  EXPECT_EQ(s.exceeds_capacity, 2u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.timed_out, 1u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.closed, 2u);
  EXPECT_EQ(s.wait.max, 30ms);
  EXPECT_EQ(s.limit, 2);
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.waiting, 0u);
  const std::vector<acquire_outcome> want = {acquire_outcome::admitted,         acquire_outcome::unavailable,
                                             acquire_outcome::exceeds_capacity, acquire_outcome::exceeds_capacity,
                                             acquire_outcome::queue_full,       acquire_outcome::admitted,
                                             acquire_outcome::timeout,          acquire_outcome::cancelled,
                                             acquire_outcome::closed,           acquire_outcome::closed};
  ASSERT_EQ(events.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(events[i].outcome, want[i]) << "event " << i;
  EXPECT_EQ(events[0].n, 2);
  EXPECT_EQ(events[0].wait, 0ns);
  EXPECT_EQ(events[5].wait, 30ms);
  EXPECT_EQ(events[6].wait, 10ms);
}

TEST(SemaphoreMetrics, AnImmediateGrantOfABlockingCallWaitedZero) {
  clock_type::reset();
  manual_semaphore sem{1};
  sem.enable_metrics();
  auto p = sem.try_acquire_until(clock_type::now() + 1s);
  ASSERT_TRUE(p);
  const auto s = sem.metrics();
  EXPECT_EQ(s.admitted, 1u);
  EXPECT_EQ(s.waited, 0u);
  EXPECT_EQ(s.wait.max, 0ns);
}

TEST(SemaphoreMetrics, AHookThatThrowsReachesTheCallerAndThePermitIsReleased) {
  manual_semaphore sem{1};
  sem.enable_metrics([](const admit::limiter_event&) { throw std::runtime_error("metrics down"); });
  EXPECT_THROW((void)sem.try_acquire(), std::runtime_error);
  EXPECT_EQ(sem.available(), 1);
  EXPECT_THROW((void)sem.acquire(), std::runtime_error);
  EXPECT_EQ(sem.available(), 1);
  EXPECT_EQ(sem.metrics().admitted, 2u);  // counted before the hook ran
}

TEST(SemaphoreMetrics, EnablingAgainStartsFromZero) {
  manual_semaphore sem{1};
  sem.enable_metrics();
  (void)sem.try_acquire();
  EXPECT_EQ(sem.metrics().admitted, 1u);
  sem.enable_metrics();
  EXPECT_EQ(sem.metrics().admitted, 0u);
}

}  // namespace
