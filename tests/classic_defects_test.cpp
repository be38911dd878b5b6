// Defects common in rate limiters and semaphores, one test each, against every limiter they could affect: a thread or
// timer per limiter, refill driven by a timer, a window limit that depends on the window's unit, an abandoned wait
// that creates tokens or races with a refill, a head waiter that blocks those behind it, an off-by-one waiter bound,
// release waking an arbitrary waiter, a newcomer taking a permit meant for a woken waiter, allocation on the fast path.
// Each test is named after the guarantee it checks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "admit/fixed_window.hpp"
#include "admit/gcra.hpp"
#include "admit/pacer.hpp"
#include "admit/semaphore.hpp"
#include "admit/sliding_log.hpp"
#include "admit/sliding_window.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"
#include "admit/warmup.hpp"

// Counts allocations, so that a test can show that deciding allocates nothing. (GCC's -Wmismatched-new-delete cannot
// see that this operator new and operator delete are a matching malloc/free pair once they are inlined.)
namespace {
std::atomic<std::size_t> allocations{0};
}  // namespace
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

using namespace std::chrono_literals;
using admit::rate;
using tp = std::chrono::steady_clock::time_point;
const tp t0 = tp{} + 1000h;

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// A limiter never starts a thread or a timer (a limiter that refills by a background thread and a timer per tick
// costs a thread per limiter that never stops): a limiter is memory and nothing else. Building a thousand of each
// starts no thread, deciding allocates nothing, and a limiter idle for a year answers from the clock alone.
template <class Limiter, class Make>
void expect_no_thread_no_allocation(Make make) {
  const std::size_t threads_before = thread_count();
  std::vector<std::unique_ptr<Limiter>> limiters;
  for (int i = 0; i < 1000; ++i) limiters.push_back(make());
  const std::size_t before = allocations.load();
  for (auto& l : limiters) {
    (void)l->try_acquire_at(t0);
    (void)l->decide_at(t0 + 1ms);
    (void)l->time_until_available_at(t0 + 2ms);
    (void)l->try_acquire_at(t0 + 24h * 365);
  }
  EXPECT_EQ(allocations.load(), before);
  EXPECT_EQ(thread_count(), threads_before);
}

TEST(ClassicDefects, NoLimiterStartsAThreadOrTimerOrAllocatesToDecide) {
  expect_no_thread_no_allocation<admit::token_bucket>(
      [] { return std::make_unique<admit::token_bucket>(rate::per_second(1000), 10); });
  expect_no_thread_no_allocation<admit::gcra>([] { return std::make_unique<admit::gcra>(rate::per_second(1000), 10); });
  expect_no_thread_no_allocation<admit::pacer>([] { return std::make_unique<admit::pacer>(rate::per_second(1000)); });
  expect_no_thread_no_allocation<admit::fixed_window>([] { return std::make_unique<admit::fixed_window>(10, 1s); });
  expect_no_thread_no_allocation<admit::sliding_window>([] { return std::make_unique<admit::sliding_window>(10, 1s); });
  expect_no_thread_no_allocation<admit::sliding_log>([] { return std::make_unique<admit::sliding_log>(10, 1s); });
  expect_no_thread_no_allocation<admit::warmup>(
      [] { return std::make_unique<admit::warmup>(rate::per_second(1000), 1s); });
}

// High rates are exact (refill driven by a timer cannot tick fast enough for them): refill is arithmetic on the clock.
// At a million and at a hundred million per second, 10 ms of requests every 5 ns admit exactly rate · 10 ms + burst.
TEST(ClassicDefects, HighRatesAreExactBecauseRefillIsArithmetic) {
  for (const double per_second : {1e6, 1e8}) {
    admit::token_bucket bucket{rate::per_second(per_second), 100};
    admit::gcra gcra{rate::per_second(per_second), 100};
    std::int64_t by_bucket = 0;
    std::int64_t by_gcra = 0;
    for (auto now = t0; now <= t0 + 10ms; now += 5ns) {
      by_bucket += bucket.try_acquire_at(now) ? 1 : 0;
      by_gcra += gcra.try_acquire_at(now) ? 1 : 0;
    }
    const auto expected = static_cast<std::int64_t>(per_second / 100) + 100;
    EXPECT_EQ(by_bucket, expected) << per_second;
    EXPECT_EQ(by_gcra, expected) << per_second;
  }
}

// A window's limit does not depend on the unit the window is given in (a window sized from its length in the wrong
// unit admits a thousand times too many or too few): the limit is a count per window, and 100 per 1 s, per 1000 ms,
// per 1000000 µs admit the same 100.
TEST(ClassicDefects, WindowLimitsDoNotDependOnTheWindowsUnit) {
  for (const std::chrono::nanoseconds window :
       {std::chrono::nanoseconds(1s), std::chrono::nanoseconds(1000ms), std::chrono::nanoseconds(1'000'000us)}) {
    admit::sliding_window counter{100, window};
    admit::sliding_log log{100, window};
    admit::fixed_window fixed{100, window};
    int a = 0;
    int b = 0;
    int c = 0;
    const tp start = tp{} + 1000s;  // a window boundary
    for (int i = 0; i < 1000; ++i) {
      const tp now = start + i * 1ms;  // 1000 requests spread over one window
      a += counter.try_acquire_at(now) ? 1 : 0;
      b += log.try_acquire_at(now) ? 1 : 0;
      c += fixed.try_acquire_at(now) ? 1 : 0;
    }
    EXPECT_EQ(a, 100);
    EXPECT_EQ(b, 100);
    EXPECT_EQ(c, 100);
  }
}

// An abandoned wait (timed out or cancelled) creates no tokens and races with nothing (a wait that marks itself
// abandoned outside the lock races with the refill that serves it): it leaves through the same atomic state as
// everything else. Under ThreadSanitizer, threads that acquire, time out and cancel at random never create tokens —
// when all have left, the bucket holds at most what it started with minus what the successful callers took. (Not
// exactly that: as x/time/rate's CancelAt, a cancelled reservation gives back only the tokens no later reservation
// depends on, so interleaved cancels leave some tokens spent; time refills them.)
TEST(ClassicDefects, AbandonedWaitsConserveTokensUnderConcurrency) {
  using clock = admit::testing::manual_clock;
  clock::reset();
  admit::basic_token_bucket<clock> bucket{rate::per_second(1000), 20};
  std::atomic<std::int64_t> taken{0};
  std::vector<std::stop_source> stops(6);
  std::vector<std::jthread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 rng(static_cast<unsigned>(i));
      for (int k = 0; k < 200; ++k) {
        const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 3);
        bool ok = false;
        switch (rng() % 3) {
          case 0:
            ok = bucket.try_acquire(n);
            break;
          case 1:
            ok = bucket.try_acquire_for(0ms, n);  // a deadline that only an immediate grant meets
            break;
          default: {
            std::stop_source stop;
            stop.request_stop();  // abandoned before it starts: must take nothing
            ok = bucket.acquire(n, stop.get_token());
            EXPECT_FALSE(ok);
            // Reserve and cancel: the tokens must come back.
            auto r = bucket.reserve(n);
            r.cancel();
            break;
          }
        }
        if (ok) taken.fetch_add(n);
      }
    });
  }
  threads.clear();  // joins
  // Time never moved: nothing refilled, so nothing beyond the burst was ever granted or given back.
  EXPECT_LE(taken.load(), 20);
  EXPECT_LE(bucket.tokens_at(clock::now()), 20.0 - static_cast<double>(taken.load()));
}

// A request that cannot be served does not block the requests behind it that would fit (as a queue whose head waits
// for more than the burst blocks everyone forever). A request that cannot be served within its deadline fails at once
// and takes nothing, so it never stands in front of a later small request; and a request larger than the burst is
// refused at once instead of waiting forever at the head.
TEST(ClassicDefects, AnUnservableHeadDoesNotBlockThoseBehind) {
  using clock = admit::testing::manual_clock;
  clock::reset();
  admit::basic_token_bucket<clock> bucket{rate::per_second(10), 5};
  ASSERT_TRUE(bucket.try_acquire(4));              // 1 token left
  EXPECT_FALSE(bucket.try_acquire_for(100ms, 5));  // needs 400 ms: fails now, takes nothing
  EXPECT_FALSE(bucket.acquire(6));                 // can never fit: fails now
  EXPECT_TRUE(bucket.try_acquire(1));              // the small request behind them is served at once
  admit::basic_pacer<clock> pacer{rate::per_second(10), admit::pacer_options{.slack = 2}};
  EXPECT_FALSE(pacer.try_acquire_for(0ms, 4));  // more than slack + 1 at once: refused, nothing claimed
  EXPECT_TRUE(pacer.try_acquire());
}

// The waiter bound is exact (a check written `waiting > max` lets max + 1 wait) and a rejection leaves the semaphore
// usable (a rejection that returns still holding a lock hangs every acquisition after it): exactly max_waiters wait,
// the next is rejected at once, and the semaphore goes on serving.
TEST(ClassicDefects, WaiterBoundIsExactAndARejectionLeavesTheSemaphoreUsable) {
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
TEST(ClassicDefects, ReleaseWakesTheLongestWaitingFirst) {
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
TEST(ClassicDefects, NoNewcomerSlipsInBetweenAReleaseAndTheWakeUp) {
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
TEST(ClassicDefects, SemaphoreTryAcquireAndReleaseAllocateNothing) {
  admit::semaphore sem{4};
  const std::size_t before = allocations.load();
  for (int i = 0; i < 1000; ++i) {
    auto p = sem.try_acquire(2);
    EXPECT_TRUE(p);
  }
  EXPECT_EQ(allocations.load(), before);
}

}  // namespace
