// tests/redis/support/semaphore_testing.hpp — what the distributed semaphore's tests share: a bounded wait for the
// queue in Redis, async_acquire as a future, and a resource that checks fencing tokens.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>

#include "admit/redis/semaphore.hpp"
#include "limiter_testing.hpp"

namespace admit::redis::testing {

// Waits until the semaphore's queue in Redis holds `n` waiters (a real process's state: bounded polling).
inline void wait_for_waiters(semaphore& s, std::int64_t n) {
  ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == n; }))
      << "waiters: " << s.inspect().first.waiter_count;
}

// async_acquire's (error_code, lease) as a future; with a timeout, async_acquire_for.
inline std::future<std::pair<std::error_code, lease>> acquire_async(
    semaphore& s, std::int64_t n, std::optional<std::chrono::steady_clock::duration> timeout = {}) {
  auto p = std::make_shared<std::promise<std::pair<std::error_code, lease>>>();
  auto f = p->get_future();
  auto done = [p](std::error_code ec, lease l) { p->set_value({ec, std::move(l)}); };
  if (timeout) {
    s.async_acquire_for(*timeout, n, std::move(done));
  } else {
    s.async_acquire(n, std::move(done));
  }
  return f;
}

// A resource that accepts a write only with a fencing token at least as large as any it has seen (what a database
// does with a conditional update): the protection a lease alone cannot give.
class fenced_resource {
 public:
  bool write(std::int64_t token) {
    std::lock_guard lock(m_);
    if (token < highest_) return false;
    highest_ = token;
    return true;
  }

 private:
  std::mutex m_;
  std::int64_t highest_ = 0;
};

}  // namespace admit::redis::testing
