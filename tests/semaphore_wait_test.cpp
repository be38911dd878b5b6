// admit::semaphore's deadlines and cancellation, deterministic on the manual clock: timed waits that time out or are
// granted first, permits assigned to a waiter that timed out going to the next, past deadlines, huge timeouts,
// stop tokens (also already requested, and on a timed wait), the steady clock's timed wait, and the races between a
// grant and a cancel. The rest of the semaphore: semaphore_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <stop_token>

#include "admit/semaphore.hpp"
#include "admit/testing/manual_clock.hpp"
#include "semaphore_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace semaphore_wait_test {

namespace {

using namespace std::chrono_literals;
using admit::errc;
using clock_type = admit::testing::manual_clock;
using manual_semaphore = admit::basic_semaphore<clock_type>;
using admit::testing::semaphore_tests::recorded_waiter;
using admit::testing::semaphore_tests::wait_for_waiters;

TEST(Semaphore, TimedWaitTimesOutWhenTheManualClockPassesTheDeadline) {
  clock_type::reset();
  manual_semaphore sem{1};
  auto held = *sem.try_acquire();
  auto result = std::async(std::launch::async, [&] { return sem.try_acquire_for(100ms); });
  clock_type::wait_for_sleepers(1);
  EXPECT_EQ(clock_type::advance(99ms), 0u);
  EXPECT_EQ(sem.waiting(), 1u);
  EXPECT_EQ(clock_type::advance(1ms), 1u);
  EXPECT_EQ(result.get().error(), errc::timeout);
  EXPECT_EQ(sem.waiting(), 0u);
  EXPECT_EQ(sem.available(), 0);
  held.release();
  EXPECT_EQ(sem.available(), 1);
}

TEST(Semaphore, TimedWaitIsGrantedBeforeItsDeadline) {
  clock_type::reset();
  manual_semaphore sem{1};
  auto held = *sem.try_acquire();
  auto result = std::async(std::launch::async, [&] { return sem.try_acquire_until(clock_type::time_point{1s}); });
  clock_type::wait_for_sleepers(1);
  held.release();
  auto r = result.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->count(), 1);
  EXPECT_EQ(clock_type::sleepers(), 0u);
}

TEST(Semaphore, PermitsAssignedToAWaiterThatTimesOutGoToTheNext) {
  clock_type::reset();
  manual_semaphore sem{3};
  auto held = *sem.try_acquire(3);
  auto big = std::async(std::launch::async, [&] { return sem.try_acquire_for(10ms, 3); });
  clock_type::wait_for_sleepers(1);
  auto small = std::async(std::launch::async, [&] { return sem.acquire(2); });
  wait_for_waiters(sem, 2);
  held.split(2).release();  // the head (3) holds 2 of them; the small request (2) behind it waits
  EXPECT_EQ(sem.waiting(), 2u);
  clock_type::advance(10ms);
  EXPECT_EQ(big.get().error(), errc::timeout);
  auto r = small.get();  // the head's 2 went to it
  ASSERT_TRUE(r);
  EXPECT_EQ(r->count(), 2);
  EXPECT_EQ(sem.in_use(), 3);
}

TEST(Semaphore, PastDeadlineTakesFreePermitsOrTimesOutAtOnce) {
  clock_type::reset();
  clock_type::advance(1s);
  manual_semaphore sem{1};
  auto r = sem.try_acquire_until(clock_type::time_point{});
  ASSERT_TRUE(r);
  EXPECT_EQ(sem.try_acquire_until(clock_type::time_point{}).error(), errc::timeout);
  EXPECT_EQ(sem.try_acquire_for(-5s).error(), errc::timeout);
  EXPECT_EQ(sem.try_acquire_for(0s).error(), errc::timeout);
  EXPECT_EQ(sem.waiting(), 0u);
}

TEST(Semaphore, HugeTimeoutsSaturateInsteadOfOverflowing) {
  manual_semaphore sem{1};
  auto held = *sem.try_acquire();
  std::stop_source stop;
  auto result = std::async(std::launch::async,
                           [&] { return sem.try_acquire_for(std::chrono::hours::max(), 1, stop.get_token()); });
  clock_type::wait_for_sleepers(1);
  clock_type::advance(std::chrono::hours(24 * 365));
  EXPECT_EQ(sem.waiting(), 1u);  // still waiting: the deadline is "never", not a wrapped-around past
  stop.request_stop();
  EXPECT_EQ(result.get().error(), errc::cancelled);
}

TEST(Semaphore, StopTokenCancelsAWait) {
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  std::stop_source stop;
  auto result = std::async(std::launch::async, [&] { return sem.acquire(1, stop.get_token()); });
  wait_for_waiters(sem, 1);
  stop.request_stop();
  EXPECT_EQ(result.get().error(), errc::cancelled);
  EXPECT_EQ(sem.waiting(), 0u);
  held.release();
  EXPECT_EQ(sem.available(), 1);
}

TEST(Semaphore, StopAlreadyRequestedStillTakesFreePermitsButNeverWaits) {
  admit::semaphore sem{1};
  std::stop_source stop;
  stop.request_stop();
  auto r = sem.acquire(1, stop.get_token());
  ASSERT_TRUE(r);
  EXPECT_EQ(sem.acquire(1, stop.get_token()).error(), errc::cancelled);
  EXPECT_EQ(sem.waiting(), 0u);
}

TEST(Semaphore, StopTokenCancelsATimedWaitOnTheManualClock) {
  clock_type::reset();
  manual_semaphore sem{1};
  auto held = *sem.try_acquire();
  std::stop_source stop;
  auto result = std::async(std::launch::async, [&] { return sem.try_acquire_for(1h, 1, stop.get_token()); });
  clock_type::wait_for_sleepers(1);
  stop.request_stop();
  EXPECT_EQ(result.get().error(), errc::cancelled);
}

TEST(Semaphore, TimedWaitOnTheSteadyClockTimesOut) {
  // The futex path of real clocks: a short real deadline, the outcome (not the duration) asserted.
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(sem.try_acquire_for(2ms).error(), errc::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2ms);
  EXPECT_EQ(sem.waiting(), 0u);
}

TEST(Semaphore, GrantThatWinsTheRaceWithACancelStands) {
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  recorded_waiter w{1};
  ASSERT_TRUE(sem.native_state().begin_wait(w).queued);
  held.release();                                   // granted first...
  EXPECT_FALSE(sem.native_state().cancel_wait(w));  // ...so the late cancel changes nothing: the waiter owns it
  EXPECT_EQ(w.notified.load(), 1);
  EXPECT_EQ(sem.in_use(), 1);
  admit::permit granted(sem.native_state(), 1);
  granted.release();
  EXPECT_EQ(sem.available(), 1);
}

TEST(Semaphore, CancelThatWinsTheRaceReturnsThePermitsToTheNextWaiter) {
  admit::semaphore sem{2};
  auto held = *sem.try_acquire(2);
  recorded_waiter first{2};
  recorded_waiter second{1};
  ASSERT_TRUE(sem.native_state().begin_wait(first).queued);
  ASSERT_TRUE(sem.native_state().begin_wait(second).queued);
  held.split(1).release();
  EXPECT_EQ(first.assigned, 1);
  EXPECT_TRUE(sem.native_state().cancel_wait(first));
  EXPECT_FALSE(sem.native_state().cancel_wait(first));  // once
  EXPECT_EQ(first.notified.load(), 0);
  EXPECT_EQ(second.notified.load(), 1);  // the permit first held went on to second
  admit::permit granted(sem.native_state(), 1);
  held.release();
  EXPECT_EQ(sem.available(), 1);
}

}  // namespace

}  // namespace semaphore_wait_test
