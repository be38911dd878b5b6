// admit::detail::futex_mutex: one holder at a time, every update made under it kept, and no thread left asleep when
// the mutex is free. Run under ThreadSanitizer too: the counter it guards is a plain integer, so a lock that let two
// holders in (or did not order one holder's writes before the next one's reads) is reported as a data race.
#include "admit/detail/futex_mutex.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using admit::detail::futex_mutex;

TEST(FutexMutex, TryLockFailsWhileHeldAndSucceedsOnceUnlocked) {
  futex_mutex m;
  ASSERT_TRUE(m.try_lock());
  EXPECT_FALSE(m.try_lock());
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(FutexMutex, OneHolderAtATimeAndNoUpdateLost) {
  constexpr int threads = 8;
  constexpr int rounds = 20'000;
  futex_mutex m;
  std::int64_t counter = 0;  // guarded by m: not atomic on purpose
  int inside = 0;            // holders now, guarded by m
  std::atomic<int> overlaps{0};
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < rounds; ++i) {
          std::lock_guard lock(m);
          if (++inside != 1) overlaps.fetch_add(1);
          ++counter;
          if (i % 64 == 0) std::this_thread::yield();  // hold it across a reschedule now and then: others sleep
          --inside;
        }
      });
    }
  }
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, std::int64_t{threads} * rounds);
  EXPECT_TRUE(m.try_lock());  // free at the end: no holder left it marked
  m.unlock();
}

TEST(FutexMutex, AThreadAsleepOnItIsWokenByTheUnlock) {
  futex_mutex m;
  m.lock();
  std::atomic<bool> waiting{false};
  std::atomic<bool> got{false};
  std::jthread waiter([&] {
    waiting.store(true);
    std::lock_guard lock(m);  // sleeps: the main thread holds it
    got.store(true);
  });
  while (!waiting.load()) std::this_thread::yield();
  EXPECT_FALSE(got.load());
  m.unlock();
  waiter.join();  // returns only if the unlock woke it
  EXPECT_TRUE(got.load());
}

}  // namespace
