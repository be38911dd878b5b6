// admit::semaphore: permits, FIFO, hand-off, the waiter bound, close, resizing — deterministic (manual clock,
// observers of the queue; nothing sleeps to make time pass). Deadlines and cancellation: semaphore_wait_test.cpp.
#include "admit/semaphore.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"
#include "admit/testing/manual_clock.hpp"
#include "semaphore_testing.hpp"
#include "support/count_allocations.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace semaphore_test {

namespace {

using namespace std::chrono_literals;
using admit::errc;
using clock_type = admit::testing::manual_clock;
using manual_semaphore = admit::basic_semaphore<clock_type>;
using testing::HasSubstr;

using admit::testing::semaphore_tests::recorded_waiter;
using admit::testing::semaphore_tests::wait_for_waiters;

TEST(Semaphore, TryAcquireTakesPermitsAndTheirDestructionReturnsThem) {
  admit::semaphore sem{3};
  {
    auto p = sem.try_acquire(2);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->count(), 2);
    EXPECT_TRUE(static_cast<bool>(*p));
    EXPECT_EQ(sem.available(), 1);
    EXPECT_EQ(sem.in_use(), 2);
    EXPECT_FALSE(sem.try_acquire(2));
    EXPECT_EQ(sem.available(), 1);  // a refusal takes nothing
  }
  EXPECT_EQ(sem.available(), 3);
  EXPECT_EQ(sem.in_use(), 0);
  EXPECT_EQ(sem.capacity(), 3);
}

TEST(Semaphore, PermitReleasesExactlyOnce) {
  admit::semaphore sem{2};
  auto p = *sem.try_acquire(2);
  p.release();
  EXPECT_FALSE(static_cast<bool>(p));
  EXPECT_EQ(p.count(), 0);
  p.release();
  EXPECT_EQ(sem.available(), 2);

  auto a = *sem.try_acquire(1);
  admit::permit b = std::move(a);
  EXPECT_EQ(a.count(), 0);  // NOLINT(bugprone-use-after-move): a moved-from permit is empty by contract
  EXPECT_EQ(b.count(), 1);
  b = *sem.try_acquire(1);  // assigning over releases the old permit
  EXPECT_EQ(sem.available(), 1);
}

TEST(Semaphore, SplitAndMergeMovePermitsBetweenObjects) {
  admit::semaphore sem{5};
  auto p = *sem.try_acquire(5);
  auto part = p.split(2);
  EXPECT_EQ(p.count(), 3);
  EXPECT_EQ(part.count(), 2);
  part.release();
  EXPECT_EQ(sem.available(), 2);
  EXPECT_EQ(p.split(0).count(), 0);
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)p.split(4); }),
              HasSubstr("split: n must be in [0, 3] (the permits it holds), got 4"));
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)p.split(-1); }), HasSubstr("-1"));
  auto q = *sem.try_acquire(2);
  p.merge(std::move(q));
  EXPECT_EQ(p.count(), 5);
  admit::semaphore other{1};
  auto foreign = *other.try_acquire();
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { p.merge(std::move(foreign)); }),
              HasSubstr("different semaphores"));
  p.release();
  EXPECT_EQ(sem.available(), 5);
}

TEST(Semaphore, InvalidCountsThrowNamingTheValue) {
  EXPECT_THAT(admit::testing::invalid_argument_message([] { admit::semaphore s{-1}; }), HasSubstr("got -1"));
  admit::semaphore sem{2};
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)sem.try_acquire(0); }), HasSubstr("got 0"));
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)sem.acquire(-3); }), HasSubstr("got -3"));
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { sem.add_permits(-1); }), HasSubstr("got -1"));
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)sem.forget_permits(3); }),
              HasSubstr("forget_permits(3) exceeds the capacity 2"));
  EXPECT_THAT(
      admit::testing::invalid_argument_message([&] { sem.add_permits(admit::detail::semaphore_state::max_permits); }),
      HasSubstr("would exceed"));
}

TEST(Semaphore, ErrorCodesHaveTheAdmitCategory) {
  const std::error_code ec = errc::queue_full;
  EXPECT_STREQ(ec.category().name(), "admit");
  EXPECT_EQ(ec.message(), "queue full: too many waiters");
  EXPECT_EQ(std::error_code(errc::exceeds_capacity).message(),
            "request exceeds the limit's capacity (its permits, or its rate's burst): it cannot be admitted unless the "
            "capacity grows");
  EXPECT_NE(std::error_code(errc::timeout), std::error_code(errc::cancelled));
}

TEST(Semaphore, AcquireResultValueThrowsTheErrorWhenEmpty) {
  admit::semaphore sem{1, {.max_waiters = 0}};
  auto held = *sem.try_acquire();
  auto r = sem.acquire();
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error(), errc::queue_full);
  try {
    (void)r.value();
    FAIL() << "value() of a failed result must throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::queue_full);
  }
}

TEST(Semaphore, AcquireTakesFreePermitsWithoutQueueing) {
  admit::semaphore sem{2};
  auto r = sem.acquire(2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->count(), 2);
  EXPECT_EQ(r.error(), errc{});
  EXPECT_EQ(sem.waiting(), 0u);
}

TEST(Semaphore, ReleaseHandsPermitsToWaitersInArrivalOrder) {
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  std::vector<int> order;
  std::mutex order_mutex;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto r = sem.acquire();
      ASSERT_TRUE(r);
      {
        std::lock_guard lock(order_mutex);
        order.push_back(i);
      }
    });
    wait_for_waiters(sem, static_cast<std::size_t>(i) + 1);  // thread i is queued before thread i+1 starts
  }
  held.release();  // each waiter releases on leaving its scope, which hands the permit to the next
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(sem.available(), 1);
}

TEST(Semaphore, TryAcquireDoesNotJumpTheQueue) {
  admit::semaphore sem{2};
  auto held = *sem.try_acquire(2);
  recorded_waiter w{2};
  ASSERT_TRUE(sem.native_state().begin_wait(w).queued);
  held.split(1).release();  // one free permit — but it belongs to the waiter at the head now
  EXPECT_FALSE(sem.try_acquire(1));
  EXPECT_EQ(sem.available(), 0);
  EXPECT_EQ(w.assigned, 1);
  held.release();
  EXPECT_EQ(w.notified.load(), 1);
  EXPECT_EQ(w.outcome, errc{});
  admit::permit granted(sem.native_state(), 2);  // the waiter owns two permits now
  EXPECT_EQ(sem.in_use(), 2);
}

TEST(Semaphore, LargeRequestAtTheHeadHoldsBackSmallerOnesBehindIt) {
  admit::semaphore sem{4};
  auto held = *sem.try_acquire(4);
  recorded_waiter big{3};
  recorded_waiter small{1};
  ASSERT_TRUE(sem.native_state().begin_wait(big).queued);
  ASSERT_TRUE(sem.native_state().begin_wait(small).queued);
  held.split(2).release();  // 2 free: not enough for the head's 3, and the small request behind it is not served
  EXPECT_EQ(small.notified.load(), 0);
  EXPECT_EQ(big.assigned, 2);
  held.split(1).release();
  EXPECT_EQ(big.notified.load(), 1);
  EXPECT_EQ(small.notified.load(), 0);
  held.release();
  EXPECT_EQ(small.notified.load(), 1);
  EXPECT_LT(big.served, small.served);
  admit::permit a(sem.native_state(), 3);
  admit::permit b(sem.native_state(), 1);
}

TEST(Semaphore, NoNewcomerTakesPermitsBetweenAGrantAndTheWakeUp) {
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  recorded_waiter w{1};
  ASSERT_TRUE(sem.native_state().begin_wait(w).queued);
  held.release();
  // The waiter has not run yet (its notify only recorded); the permit is its own: nobody else can have it.
  EXPECT_FALSE(sem.try_acquire());
  EXPECT_EQ(sem.try_acquire_for(0ms).error(), errc::timeout);
  EXPECT_EQ(sem.in_use(), 1);
  admit::permit granted(sem.native_state(), 1);
}

TEST(Semaphore, MaxWaitersAreQueuedAndTheNextIsRejectedAtOnce) {
  manual_semaphore sem{1, {.max_waiters = 2}};
  auto held = *sem.try_acquire();
  recorded_waiter a{1};
  recorded_waiter b{1};
  ASSERT_TRUE(sem.native_state().begin_wait(a).queued);
  ASSERT_TRUE(sem.native_state().begin_wait(b).queued);
  EXPECT_EQ(sem.acquire().error(), errc::queue_full);
  EXPECT_EQ(sem.try_acquire_for(1h).error(), errc::queue_full);
  EXPECT_EQ(sem.waiting(), 2u);
  ASSERT_TRUE(sem.native_state().cancel_wait(b));
  recorded_waiter c{1};
  EXPECT_TRUE(sem.native_state().begin_wait(c).queued);  // room again
  EXPECT_TRUE(sem.native_state().cancel_wait(a));
  EXPECT_TRUE(sem.native_state().cancel_wait(c));
}

TEST(Semaphore, RequestsAboveTheCapacityFailAtOnce) {
  manual_semaphore sem{3};
  EXPECT_FALSE(sem.try_acquire(4));
  EXPECT_EQ(sem.acquire(4).error(), errc::exceeds_capacity);
  EXPECT_EQ(sem.try_acquire_for(1h, 4).error(), errc::exceeds_capacity);
  EXPECT_EQ(sem.try_acquire_for(0s, 4).error(), errc::exceeds_capacity);
  EXPECT_EQ(sem.waiting(), 0u);
  admit::semaphore empty{0};
  EXPECT_EQ(empty.acquire().error(), errc::exceeds_capacity);
}

TEST(Semaphore, CloseCompletesEveryWaiterAndLaterAcquisitionsFail) {
  clock_type::reset();
  manual_semaphore sem{2};
  auto held = *sem.try_acquire(2);
  auto untimed = std::async(std::launch::async, [&] { return sem.acquire(2); });
  wait_for_waiters(sem, 1);
  auto timed = std::async(std::launch::async, [&] { return sem.try_acquire_for(1h); });
  clock_type::wait_for_sleepers(1);
  held.split(1).release();  // the head holds one; close gives it back
  sem.close();
  EXPECT_EQ(untimed.get().error(), errc::closed);
  EXPECT_EQ(timed.get().error(), errc::closed);
  EXPECT_TRUE(sem.is_closed());
  EXPECT_FALSE(sem.try_acquire());
  EXPECT_EQ(sem.acquire().error(), errc::closed);
  EXPECT_EQ(sem.try_acquire_for(0s).error(), errc::closed);
  held.release();  // permits held across a close may still be released
  EXPECT_EQ(sem.in_use(), 0);
  sem.close();  // idempotent
}

TEST(Semaphore, AddPermitsServesWaitersFirst) {
  admit::semaphore sem{2};
  auto held = *sem.try_acquire(2);
  recorded_waiter w{2};
  ASSERT_TRUE(sem.native_state().begin_wait(w).queued);
  sem.add_permits(1);
  EXPECT_EQ(w.assigned, 1);
  EXPECT_EQ(w.notified.load(), 0);
  sem.add_permits(2);
  EXPECT_EQ(w.notified.load(), 1);
  EXPECT_EQ(sem.capacity(), 5);
  EXPECT_EQ(sem.available(), 1);
  admit::permit granted(sem.native_state(), 2);
  EXPECT_EQ(sem.in_use(), 4);
}

TEST(Semaphore, ForgetPermitsRemovesFreeOnesNowAndHeldOnesAsTheyReturn) {
  admit::semaphore sem{4};
  auto held = *sem.try_acquire(3);
  EXPECT_EQ(sem.forget_permits(2), 1);  // the one free permit goes now; one more is owed
  EXPECT_EQ(sem.capacity(), 2);
  EXPECT_EQ(sem.available(), 0);
  EXPECT_EQ(sem.in_use(), 3);  // above the new capacity until the debt is paid
  EXPECT_FALSE(sem.try_acquire());
  held.split(1).release();  // pays the debt
  EXPECT_EQ(sem.available(), 0);
  EXPECT_EQ(sem.in_use(), 2);
  held.release();
  EXPECT_EQ(sem.available(), 2);
  EXPECT_EQ(sem.in_use(), 0);
  EXPECT_TRUE(sem.try_acquire(2));
}

TEST(Semaphore, ForgetPermitsFailsWaitersThatCanNoLongerBeServed) {
  admit::semaphore sem{4};
  auto held = *sem.try_acquire(4);
  recorded_waiter large{3};
  recorded_waiter small{1};
  ASSERT_TRUE(sem.native_state().begin_wait(large).queued);
  ASSERT_TRUE(sem.native_state().begin_wait(small).queued);
  EXPECT_EQ(sem.forget_permits(2), 0);
  EXPECT_EQ(large.notified.load(), 1);
  EXPECT_EQ(large.outcome, errc::exceeds_capacity);
  EXPECT_EQ(small.notified.load(), 0);
  held.split(2).release();  // pays the debt of 2
  EXPECT_EQ(small.notified.load(), 0);
  held.split(1).release();
  EXPECT_EQ(small.notified.load(), 1);
  EXPECT_EQ(small.outcome, errc{});
  admit::permit granted(sem.native_state(), 1);
  EXPECT_EQ(sem.in_use(), 2);
}

TEST(Semaphore, ForgettingEverythingThenAddingBackWorks) {
  admit::semaphore sem{3};
  EXPECT_EQ(sem.forget_permits(3), 3);
  EXPECT_EQ(sem.capacity(), 0);
  EXPECT_FALSE(sem.try_acquire());
  sem.add_permits(2);
  EXPECT_EQ(sem.available(), 2);
  EXPECT_TRUE(sem.try_acquire(2));
}

// The waiter bound is exact (a check written `waiting > max` lets max + 1 wait) and a rejection leaves the semaphore
// usable (a rejection that returns still holding a lock hangs every acquisition after it): exactly max_waiters wait,
// the next is rejected at once, and the semaphore goes on serving.
TEST(Semaphore, WaiterBoundIsExactAndARejectionLeavesTheSemaphoreUsable) {
  admit::semaphore sem{1, {.max_waiters = 3}};
  auto held = *sem.try_acquire();
  std::vector<std::jthread> waiters;
  std::atomic<int> granted{0};
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&] {
      auto r = sem.acquire();
      EXPECT_TRUE(r);
      granted.fetch_add(1);
    });
  }
  while (sem.waiting() < 3) std::this_thread::yield();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sem.acquire().error(), admit::errc::queue_full);
  EXPECT_EQ(sem.waiting(), 3u);
  held.release();
  waiters.clear();
  EXPECT_EQ(granted.load(), 3);
  EXPECT_TRUE(sem.try_acquire());
}

// Release wakes the longest waiting first (waiters kept in an unordered container are woken in any order, and one
// may starve): waiters queued one after another are served in that order, each release handing the permit to the
// oldest.
TEST(Semaphore, ReleaseWakesTheLongestWaitingFirst) {
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  std::mutex order_mutex;
  std::vector<int> order;
  std::vector<std::jthread> waiters;
  for (int i = 0; i < 6; ++i) {
    waiters.emplace_back([&, i] {
      auto r = sem.acquire();
      ASSERT_TRUE(r);
      std::lock_guard lock(order_mutex);
      order.push_back(i);
    });  // the permit returns at the end of the lambda and goes to the next in line
    while (sem.waiting() < static_cast<std::size_t>(i) + 1) std::this_thread::yield();
  }
  held.release();
  waiters.clear();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

// No newcomer takes the permit between a release and the wake-up of the waiter it is meant for (a release that frees
// the permit and leaves the woken waiter to take it again lets a newcomer in between, and limit + 1 run at once): a
// release hands the permit to the waiter before it returns, so whether or not the waiter has woken yet, a newcomer
// finds nothing. (This test caught a window in which a waiter was already
// counted in waiting() but not yet visible to a release: the release left the permit free for a newcomer.)
TEST(Semaphore, NoNewcomerSlipsInBetweenAReleaseAndTheWakeUp) {
  admit::semaphore sem{1};
  for (int round = 0; round < 1000; ++round) {
    auto held = *sem.try_acquire();
    std::atomic<bool> done{false};
    std::jthread waiter([&] {
      auto r = sem.acquire();
      EXPECT_TRUE(r);
      while (!done.load()) std::this_thread::yield();  // hold the permit until the newcomers have tried
    });
    while (sem.waiting() < 1) std::this_thread::yield();
    held.release();
    EXPECT_FALSE(sem.try_acquire());
    EXPECT_EQ(sem.try_acquire_for(0ms).error(), admit::errc::timeout);
    done.store(true);
  }
}

// The semaphore's fast path is memory only, like the rate limiters': try_acquire and release allocate nothing.
TEST(Semaphore, TryAcquireAndReleaseAllocateNothing) {
  admit::semaphore sem{4};
  const std::size_t before = admit_test::allocations();
  for (int i = 0; i < 1000; ++i) {
    auto p = sem.try_acquire(2);
    EXPECT_TRUE(p);
  }
  EXPECT_EQ(admit_test::allocations(), before);
}

}  // namespace

}  // namespace semaphore_test
