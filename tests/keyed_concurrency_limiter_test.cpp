// admit::keyed_concurrency_limiter: the bound per key, keys independent of each other, the key cap (refusal, never an
// eviction of a key that holds permits), an entry freed with its last permit or waiter, FIFO waits per key with their
// deadline, cancellation and queue bound, close, and the metrics.
#include "admit/keyed_concurrency_limiter.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"
#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace keyed_concurrency_limiter_test {

namespace {

using namespace std::chrono_literals;
using admit::errc;
using manual_clock = admit::testing::manual_clock;
using limiter = admit::keyed_concurrency_limiter<>;
using manual_limiter = admit::basic_keyed_concurrency_limiter<std::string, manual_clock>;

// Waits (without sleeping to make time pass) until `key` has n waiters queued.
template <class L>
void wait_for_waiters(const L& l, const std::string& key, std::size_t n) {
  while (l.waiting(key) < n) std::this_thread::yield();
}

TEST(KeyedConcurrencyLimiter, EachKeyHasAtMostLimitInFlight) {
  limiter l{{.limit = 2}};
  auto a1 = l.try_acquire("a");
  auto a2 = l.try_acquire("a");
  ASSERT_TRUE(a1 && a2);
  EXPECT_FALSE(l.try_acquire("a"));
  EXPECT_EQ(l.in_flight("a"), 2);
  a1->release();
  EXPECT_TRUE(l.try_acquire("a"));
}

TEST(KeyedConcurrencyLimiter, KeysAreIndependent) {
  limiter l{{.limit = 1}};
  auto a = l.try_acquire("a");
  ASSERT_TRUE(a);
  auto b = l.try_acquire(std::string_view("b"));  // transparent lookup
  ASSERT_TRUE(b);
  EXPECT_FALSE(l.try_acquire("a"));
  EXPECT_EQ(l.size(), 2u);
  EXPECT_EQ(l.in_flight("a"), 1);
  EXPECT_EQ(l.in_flight("b"), 1);
}

TEST(KeyedConcurrencyLimiter, AnEntryIsFreedWithItsLastPermit) {
  limiter l{{.limit = 3}};
  auto p = l.try_acquire("a", 2);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->count(), 2);
  auto q = l.try_acquire("a");
  ASSERT_TRUE(q);
  p->release();
  EXPECT_TRUE(l.contains("a"));  // q still holds one
  q.reset();
  EXPECT_FALSE(l.contains("a"));
  EXPECT_EQ(l.size(), 0u);
  const auto s = l.stats();
  EXPECT_EQ(s.inserted, 1u);
  EXPECT_EQ(s.removed, 1u);
}

TEST(KeyedConcurrencyLimiter, ARefusedOrOversizedRequestStoresNothing) {
  limiter l{{.limit = 2}};
  EXPECT_FALSE(l.try_acquire("a", 3));
  auto r = l.acquire("a", 3);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::exceeds_capacity);
  EXPECT_FALSE(l.contains("a"));
  auto held = l.try_acquire("b", 2);
  EXPECT_FALSE(l.try_acquire("b"));
  EXPECT_EQ(l.stats().inserted, 1u);  // the refused try_acquire of b left its entry alone
}

TEST(KeyedConcurrencyLimiter, PermitsMoveAndReleaseOnce) {
  limiter l{{.limit = 1}};
  auto p = *l.try_acquire("a");
  limiter::permit q = std::move(p);
  EXPECT_FALSE(p);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_TRUE(q);
  p.release();  // nothing
  EXPECT_TRUE(l.contains("a"));
  q = limiter::permit{};  // assigned over: released
  EXPECT_FALSE(l.contains("a"));
  EXPECT_TRUE(l.try_acquire("a"));
}

TEST(KeyedConcurrencyLimiter, ANewKeyIsRefusedAtTheCapAndAHeldKeyIsNeverEvicted) {
  limiter l{{.limit = 1, .max_keys = 1, .shards = 1}};
  auto a = l.try_acquire("a");
  ASSERT_TRUE(a);
  // (Keys appended to, not built with "b" + std::to_string(i): GCC 12 -O3 warns falsely, -Wstringop-overflow.)
  std::string key = "b";
  for (int i = 0; i < 10; ++i) {
    key += std::to_string(i);
    EXPECT_FALSE(l.try_acquire(key));
  }
  auto r = l.acquire("c");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::queue_full);
  EXPECT_TRUE(l.contains("a"));
  EXPECT_EQ(l.in_flight("a"), 1);
  EXPECT_EQ(l.size(), 1u);
  EXPECT_EQ(l.stats().refused_keys, 11u);
  a->release();
  EXPECT_TRUE(l.try_acquire("c"));  // room again once a's entry is gone
}

TEST(KeyedConcurrencyLimiter, AKeyWithWaitersKeepsItsEntry) {
  limiter l{{.limit = 1, .max_keys = 1, .shards = 1}};
  auto a = l.try_acquire("a");
  std::optional<limiter::acquire_result> got;
  std::jthread waiter([&] { got.emplace(l.acquire("a")); });
  wait_for_waiters(l, "a", 1);
  a->release();  // handed to the waiter: the entry stays, now held by it
  waiter.join();
  ASSERT_TRUE(got && *got);
  EXPECT_TRUE(l.contains("a"));
  EXPECT_FALSE(l.try_acquire("b"));  // still at the cap
  got.reset();
  EXPECT_FALSE(l.contains("a"));
}

TEST(KeyedConcurrencyLimiter, WaitersOfAKeyAreServedFifo) {
  limiter l{{.limit = 1}};
  auto held = l.try_acquire("a");
  std::vector<int> order;
  std::mutex m;
  std::vector<std::jthread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto p = l.acquire("a");
      ASSERT_TRUE(p);
      std::lock_guard lock(m);
      order.push_back(i);
    });
    wait_for_waiters(l, "a", static_cast<std::size_t>(i) + 1);
  }
  auto other = l.try_acquire("b");  // another key is not held back
  EXPECT_TRUE(other);
  held->release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  other.reset();
  EXPECT_EQ(l.size(), 0u);
}

TEST(KeyedConcurrencyLimiter, AWaitTimesOutOnTheClockAndLeavesTheQueue) {
  manual_clock::reset();
  manual_limiter l{{.limit = 1}};
  auto held = l.try_acquire("a");
  std::optional<manual_limiter::acquire_result> got;
  std::jthread waiter([&] { got.emplace(l.try_acquire_for("a", 100ms)); });
  manual_clock::wait_for_sleepers(1);
  EXPECT_EQ(l.waiting("a"), 1u);
  manual_clock::advance(100ms);
  waiter.join();
  ASSERT_TRUE(got && !*got);
  EXPECT_EQ(got->error(), errc::timeout);
  EXPECT_EQ(l.waiting("a"), 0u);
  EXPECT_TRUE(l.contains("a"));  // still held
  held.reset();
  EXPECT_FALSE(l.contains("a"));
}

TEST(KeyedConcurrencyLimiter, TheDefaultTimeoutBoundsAcquire) {
  manual_clock::reset();
  manual_limiter l{{.limit = 1, .timeout = 50ms}};
  auto held = l.try_acquire("a");
  std::optional<manual_limiter::acquire_result> got;
  std::jthread waiter([&] { got.emplace(l.acquire("a")); });
  manual_clock::wait_for_sleepers(1);
  manual_clock::advance(50ms);
  waiter.join();
  ASSERT_TRUE(got && !*got);
  EXPECT_EQ(got->error(), errc::timeout);
}

TEST(KeyedConcurrencyLimiter, AWaitEndsWhenCancelledAndItsEntryGoesWithTheLastReference) {
  limiter l{{.limit = 1}};
  auto held = l.try_acquire("a");
  std::stop_source stop;
  std::optional<limiter::acquire_result> got;
  std::jthread waiter([&] { got.emplace(l.acquire("a", 1, stop.get_token())); });
  wait_for_waiters(l, "a", 1);
  stop.request_stop();
  waiter.join();
  ASSERT_TRUE(got && !*got);
  EXPECT_EQ(got->error(), errc::cancelled);
  EXPECT_EQ(l.waiting("a"), 0u);
  held.reset();
  EXPECT_FALSE(l.contains("a"));
  EXPECT_EQ(l.stats().removed, 1u);
}

TEST(KeyedConcurrencyLimiter, MaxWaitersIsPerKey) {
  limiter l{{.limit = 1, .max_waiters = 0}};
  auto a = l.try_acquire("a");
  auto r = l.acquire("a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::queue_full);
  EXPECT_TRUE(l.acquire("b"));  // another key is admitted (it need not wait)
  EXPECT_EQ(l.stats().refused_keys, 0u);
}

TEST(KeyedConcurrencyLimiter, CloseFailsWaitersAndLaterAcquisitions) {
  limiter l{{.limit = 1}};
  auto held = l.try_acquire("a");
  std::optional<limiter::acquire_result> got;
  std::jthread waiter([&] { got.emplace(l.acquire("a")); });
  wait_for_waiters(l, "a", 1);
  l.close();
  waiter.join();
  ASSERT_TRUE(got && !*got);
  EXPECT_EQ(got->error(), errc::closed);
  EXPECT_EQ(l.acquire("b").error(), errc::closed);
  EXPECT_FALSE(l.try_acquire("b"));
  held.reset();  // held permits stay valid and release
  EXPECT_EQ(l.size(), 0u);
}

TEST(KeyedConcurrencyLimiter, MetricsCountEachDecisionOnceWithTheGauges) {
  manual_clock::reset();
  manual_limiter l{{.limit = 2, .max_waiters = 1, .max_keys = 16, .shards = 1}};
  EXPECT_EQ(l.metrics().admitted, 0u);
  std::vector<admit::acquire_outcome> events;
  l.enable_metrics([&](const admit::limiter_event& e) { events.push_back(e.outcome); });
  auto a = l.try_acquire("a", 2);
  EXPECT_FALSE(l.try_acquire("a"));  // unavailable
  EXPECT_EQ(l.acquire("a", 3).error(), errc::exceeds_capacity);
  auto b = l.acquire("b");  // admitted at once
  std::optional<manual_limiter::acquire_result> got;
  std::jthread waiter([&] { got.emplace(l.try_acquire_for("a", 10ms)); });
  manual_clock::wait_for_sleepers(1);
  EXPECT_EQ(l.try_acquire_for("a", 10ms).error(), errc::queue_full);  // the one waiter slot of a is taken
  auto s = l.metrics();
  EXPECT_EQ(s.limit, 2);
  EXPECT_EQ(s.in_flight, 3);
  EXPECT_EQ(s.waiting, 1u);
  a->release();
  waiter.join();
  ASSERT_TRUE(got && *got);
  s = l.metrics();
  EXPECT_EQ(s.admitted, 3u);
  EXPECT_EQ(s.unavailable, 1u);
  EXPECT_EQ(s.exceeds_capacity, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.in_flight, 2);  // b, and the waiter's permit in `got`
  EXPECT_EQ(events.size(), 6u);
}

TEST(KeyedConcurrencyLimiter, InvalidOptionsThrowNamingTheValue) {
  EXPECT_THROW(limiter({.limit = 0}), std::invalid_argument);
  EXPECT_THROW(limiter({.limit = 1, .timeout = -1ms}), std::invalid_argument);
  EXPECT_THROW(limiter({.limit = 1, .max_keys = 0}), std::invalid_argument);
  EXPECT_THROW(limiter({.limit = 1, .shards = 0}), std::invalid_argument);
  limiter l{{.limit = 1}};
  EXPECT_THROW((void)l.try_acquire("a", 0), std::invalid_argument);
  // Named as the limiter (it said "admit::semaphore: n must be ...").
  EXPECT_EQ(admit::testing::invalid_argument_message([&] { (void)l.try_acquire("a", 0); }),
            "admit::keyed_concurrency_limiter: n must be in [1, 576460752303423488], got 0");
  EXPECT_FALSE(l.contains("a"));
}

TEST(KeyedConcurrencyLimiter, IntegerKeys) {
  admit::keyed_concurrency_limiter<int> l{{.limit = 1}};
  auto p = l.try_acquire(7);
  EXPECT_TRUE(p);
  EXPECT_FALSE(l.try_acquire(7));
  EXPECT_TRUE(l.try_acquire(8));
}

// The metrics event hook may throw: the grant's permits and the entry's reference belong to the keyed permit before
// the hook runs, so the exception leaves nothing held and the entry is freed.
TEST(KeyedConcurrencyLimiter, AThrowingEventHookLeaksNoPermitNorEntry) {
  limiter l{{.limit = 1}};
  std::atomic<bool> armed{true};
  l.enable_metrics([&armed](const admit::limiter_event& e) {
    if (armed && e.outcome == admit::acquire_outcome::admitted) throw std::runtime_error("hook");
  });
  EXPECT_THROW((void)l.try_acquire("k"), std::runtime_error);
  EXPECT_EQ(l.in_flight("k"), 0);
  EXPECT_EQ(l.size(), 0u);
  EXPECT_THROW((void)l.acquire("k"), std::runtime_error);  // granted at once
  EXPECT_EQ(l.in_flight("k"), 0);
  EXPECT_EQ(l.size(), 0u);

  armed = false;
  auto held = l.try_acquire("k");
  armed = true;
  bool threw = false;
  std::jthread waiter([&] {
    try {
      (void)l.acquire("k");
    } catch (const std::runtime_error&) {
      threw = true;
    }
  });
  wait_for_waiters(l, "k", 1);
  held.reset();  // granted to the waiter, whose hook throws
  waiter.join();
  EXPECT_TRUE(threw);
  EXPECT_EQ(l.in_flight("k"), 0);
  EXPECT_EQ(l.size(), 0u);
}

}  // namespace

}  // namespace keyed_concurrency_limiter_test
