// tests/semaphore_testing.hpp — what the local semaphore's tests share: waiting until requests are queued, and a
// waiter queued directly on the engine.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "admit/semaphore.hpp"

namespace admit::testing::semaphore_tests {

// Blocks until `n` requests are queued on `sem` (an observer of the queue; the waiting threads sleep on a futex).
template <class Semaphore>
void wait_for_waiters(const Semaphore& sem, std::size_t n) {
  while (sem.waiting() < n) std::this_thread::yield();
}

// A waiter queued directly on the engine, the way the Asio layer will queue its operations: notify records the
// resolution and nothing else runs, so the test sees the state between a grant and the waiter's wake-up.
struct recorded_waiter : admit::detail::semaphore_waiter {
  std::atomic<int> notified{0};
  explicit recorded_waiter(std::int64_t n) {
    needed = n;
    notify = [](admit::detail::semaphore_waiter* w) noexcept {
      static_cast<recorded_waiter*>(w)->notified.fetch_add(1, std::memory_order_release);
    };
  }
};

}  // namespace admit::testing::semaphore_tests
