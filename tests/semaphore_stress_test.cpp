// Model-checking stress tests of admit::semaphore: many threads doing random acquire / try_acquire / timed acquire /
// cancel / release (and resize / close), asserting at every step that no more permits are held than the capacity,
// that grants follow arrival order, that every waiter finishes (a watchdog fails the test on a lost wake-up), and
// that at the end every permit is back. Run under ThreadSanitizer in CI.
//
// ADMIT_STRESS_OPS sets the number of operations (default 300,000 in all, CI-sized; run with 10000000 for the long run:
//   ADMIT_STRESS_OPS=10000000 build/release/tests/semaphore_stress_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admit/detail/futex.hpp"
#include "admit/semaphore.hpp"
#include "support/watchdog.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace semaphore_stress_test {

namespace {

using namespace std::chrono_literals;
using admit::errc;

std::int64_t total_ops() {
  const char* env = std::getenv("ADMIT_STRESS_OPS");
  return env != nullptr ? std::max<std::int64_t>(1, std::atoll(env)) : 300'000;
}

using admit::testing_support::watchdog;

// A waiter queued on the engine as an asynchronous operation would be: notify flags it, the owner waits on the flag.
struct async_waiter : admit::detail::semaphore_waiter {
  std::atomic<std::uint32_t> done{0};
  explicit async_waiter(std::int64_t n) {
    needed = n;
    notify = [](admit::detail::semaphore_waiter* w) noexcept {
      std::atomic<std::uint32_t>* flag = &static_cast<async_waiter*>(w)->done;
      flag->store(1, std::memory_order_release);  // the owner may return from here on: wake by address only
      admit::detail::futex_wake_one(flag);
    };
  }
};

struct shared_model {
  admit::semaphore sem;
  std::int64_t bound;                 // no more than this many permits may ever be held at once
  std::atomic<std::int64_t> held{0};  // permits the workers hold (counted after taking, before returning)
  std::atomic<std::int64_t> violations{0};
  std::atomic<std::int64_t> outcomes[6]{};  // by errc (0 = granted)
  std::mutex fifo_mutex;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> fifo;  // (arrival sequence, grant order) of queued grants

  shared_model(std::int64_t permits, std::size_t max_waiters, std::int64_t max_bound)
      : sem(permits, {.max_waiters = max_waiters}), bound(max_bound) {}

  void hold(admit::permit& p, std::mt19937_64& rng) {
    const std::int64_t n = p.count();
    if (held.fetch_add(n, std::memory_order_acq_rel) + n > bound) violations.fetch_add(1);
    for (int spin = static_cast<int>(rng() % 64); spin > 0; --spin) std::atomic_signal_fence(std::memory_order_seq_cst);
    if (rng() % 8 == 0) std::this_thread::yield();
    held.fetch_sub(n, std::memory_order_acq_rel);
    p.release();
  }

  void count(errc e) { outcomes[static_cast<int>(e)].fetch_add(1, std::memory_order_relaxed); }
};

// One worker's random operation on the model.
void random_operation(shared_model& m, std::mt19937_64& rng, std::optional<std::stop_source>& stop_slot,
                      std::mutex& stop_mutex) {
  const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 3);
  switch (rng() % 5) {
    case 0: {  // try_acquire
      if (auto p = m.sem.try_acquire(n)) m.hold(*p, rng);
      break;
    }
    case 1: {                 // acquire, cancellable by the controller through the published stop_source
      std::stop_token token;  // half of them cannot be cancelled: a lost wake-up of those hangs (the watchdog fires)
      if (rng() % 2 == 0) {
        std::lock_guard lock(stop_mutex);
        token = stop_slot.emplace().get_token();
      }
      auto r = m.sem.acquire(n, token);
      m.count(r.error());
      if (r) m.hold(*r, rng);
      break;
    }
    case 2: {  // timed acquire on the steady clock
      auto r = m.sem.try_acquire_for(std::chrono::microseconds(rng() % 200), n);
      m.count(r.error());
      if (r) m.hold(*r, rng);
      break;
    }
    default: {  // asynchronous-style waiter, cancelled at a random moment (racing its grant)
      async_waiter w{n};
      const auto begun = m.sem.native_state().begin_wait(w);
      if (!begun.queued) {
        m.count(begun.error);
        if (begun.error == errc{}) {
          admit::permit p(m.sem.native_state(), n);
          m.hold(p, rng);
        }
        break;
      }
      if (rng() % 3 == 0) {
        for (int spin = static_cast<int>(rng() % 256); spin > 0; --spin)
          std::atomic_signal_fence(std::memory_order_seq_cst);
        if (m.sem.native_state().cancel_wait(w)) {
          m.count(errc::cancelled);
          break;
        }
      }
      while (w.done.load(std::memory_order_acquire) == 0) admit::detail::futex_wait(w.done, 0);
      m.count(w.outcome);
      if (w.outcome == errc{}) {
        {
          std::lock_guard lock(m.fifo_mutex);
          m.fifo.emplace_back(w.sequence, w.served);
        }
        admit::permit p(m.sem.native_state(), n);
        m.hold(p, rng);
      }
      break;
    }
  }
}

void check_fifo(std::vector<std::pair<std::uint64_t, std::uint64_t>> fifo) {
  std::sort(fifo.begin(), fifo.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  for (std::size_t i = 1; i < fifo.size(); ++i) {
    ASSERT_LT(fifo[i - 1].first, fifo[i].first)
        << "grant #" << fifo[i].second << " (arrival " << fifo[i].first << ") came after grant #" << fifo[i - 1].second
        << " (arrival " << fifo[i - 1].first << "): not FIFO";
  }
}

void run(shared_model& m, int threads, std::int64_t ops, bool resize) {
  watchdog dog(std::chrono::seconds(600));
  std::vector<std::optional<std::stop_source>> stops(static_cast<std::size_t>(threads));
  std::vector<std::mutex> stop_mutexes(static_cast<std::size_t>(threads));
  std::atomic<int> running{threads};
  std::vector<std::jthread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7919 + 17);
      for (std::int64_t i = 0; i < ops / threads; ++i) {
        random_operation(m, rng, stops[static_cast<std::size_t>(t)], stop_mutexes[static_cast<std::size_t>(t)]);
      }
      running.fetch_sub(1);
    });
  }
  // The controller: cancels random blocked acquisitions and, when asked, resizes the semaphore.
  std::mt19937_64 rng(99);
  std::int64_t added = 0;
  while (running.load() > 0) {
    const auto t = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(threads));
    {
      std::lock_guard lock(stop_mutexes[t]);
      if (stops[t]) stops[t]->request_stop();
    }
    if (resize) {
      if (added < 2 && rng() % 2 == 0) {
        m.sem.add_permits(1);
        ++added;
      } else if (added > 0) {
        (void)m.sem.forget_permits(1);
        --added;
      }
    }
    std::this_thread::yield();
  }
  workers.clear();
  if (added > 0) (void)m.sem.forget_permits(added);
}

TEST(SemaphoreStress, NeverMoreHeldThanCapacityGrantsInOrderEveryWaiterFinishes) {
  const std::int64_t capacity = 4;
  // At most 3 waiters, so that a full queue is common with 8 threads (4 waiting while the permits are held): with 6,
  // a full queue needed 7 of the 8 threads waiting or arriving at once, and a slow machine once ran 300,000
  // operations without one, failing the coverage check below.
  shared_model m(capacity, 3, capacity);
  run(m, 8, total_ops(), /*resize=*/false);
  EXPECT_EQ(m.violations.load(), 0) << "more permits held than the capacity";
  check_fifo(m.fifo);
  EXPECT_EQ(m.sem.available(), capacity) << "permits lost or counted twice";
  EXPECT_EQ(m.sem.in_use(), 0);
  EXPECT_EQ(m.sem.waiting(), 0u);
  // Every kind of outcome happened, so the test exercised what it claims to.
  for (errc e : {errc{}, errc::queue_full, errc::timeout, errc::cancelled}) {
    EXPECT_GT(m.outcomes[static_cast<int>(e)].load(), 0) << "no outcome " << static_cast<int>(e);
  }
  EXPECT_GT(m.fifo.size(), 10u);
}

TEST(SemaphoreStress, ResizingKeepsTheBoundAndReturnsEveryPermit) {
  const std::int64_t capacity = 3;
  shared_model m(capacity, 8, capacity + 2);
  run(m, 8, total_ops() / 2, /*resize=*/true);
  EXPECT_EQ(m.violations.load(), 0) << "more permits held than the largest capacity";
  check_fifo(m.fifo);
  EXPECT_EQ(m.sem.capacity(), capacity);
  EXPECT_EQ(m.sem.available(), capacity) << "permits lost or counted twice";
  EXPECT_EQ(m.sem.in_use(), 0);
}

TEST(SemaphoreStress, EveryReleaseWakesTheWaitersItServes) {
  // Only blocking, uncancellable waits: nothing but releases can wake a waiter, so a release that fails to hand off
  // leaves the last waiters asleep for good when the other threads finish (the watchdog fires).
  watchdog dog(std::chrono::seconds(300));
  const std::int64_t capacity = 2;
  shared_model m(capacity, 64, capacity);
  std::vector<std::jthread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&m, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1000);
      for (std::int64_t i = 0; i < total_ops() / 16; ++i) {
        auto r = m.sem.acquire(1 + static_cast<std::int64_t>(rng() % 2));
        ASSERT_TRUE(r);
        m.hold(*r, rng);
      }
    });
  }
  threads.clear();
  EXPECT_EQ(m.violations.load(), 0);
  EXPECT_EQ(m.sem.available(), capacity);
}

TEST(SemaphoreStress, CloseWakesEveryWaiter) {
  for (int round = 0; round < 20; ++round) {
    watchdog dog(std::chrono::seconds(120));
    admit::semaphore sem{2};
    std::atomic<int> closed{0};
    std::atomic<int> granted{0};
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (;;) {
          auto r = sem.acquire(1 + granted.load() % 2);
          if (!r) {
            EXPECT_EQ(r.error(), errc::closed);
            closed.fetch_add(1);
            return;
          }
          granted.fetch_add(1);
        }
      });
    }
    while (granted.load() < 50) std::this_thread::yield();
    sem.close();
    threads.clear();
    EXPECT_EQ(closed.load(), 8);
    EXPECT_EQ(sem.waiting(), 0u);
    EXPECT_EQ(sem.available(), 2);
  }
}

}  // namespace

}  // namespace semaphore_stress_test
