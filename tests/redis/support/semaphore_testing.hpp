// tests/redis/support/semaphore_testing.hpp — what the distributed semaphore's tests share: a bounded wait for the
// queue in Redis, async_acquire as a future, a release's wake-up reaching its waiter, and a resource that checks
// fencing tokens.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
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

// The waiters in Redis of a semaphore or an admission (its inspect()); -1 when inspect fails.
template <class Limit>
std::int64_t waiter_count(Limit& l) {
  const auto [s, ec] = l.inspect();
  return ec ? -1 : s.waiter_count;
}

// On `c` (a connection or a cluster), semaphore `name` of one permit: with it held and a second caller waiting (its
// poll interval 30 s, so that only the release's wake-up can reach it in time), the release hands the permit over
// within 5 s, with a larger fencing token.
template <class Client>  // connection or cluster
void expect_the_release_wakes_the_waiter(Client& c, const std::string& name) {
  semaphore_options o;
  o.poll_interval = std::chrono::seconds(30);
  semaphore s(c, name, 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  auto pending = std::async(std::launch::async, [&] { return s.try_acquire_for(std::chrono::seconds(20)); });
  wait_for_waiters(s, 1);
  const auto released = std::chrono::steady_clock::now();
  ASSERT_EQ(held->release().first, lease::release_status::released);
  auto r = pending.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - released, std::chrono::seconds(5));
  EXPECT_GT(r->fencing_token(), held->fencing_token());
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
