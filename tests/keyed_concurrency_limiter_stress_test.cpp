// Stress test of admit::keyed_concurrency_limiter: threads on a few keys doing try_acquire, timed waits, cancelled
// waits and releases, asserting that no key ever has more than its limit held, that every acquisition ends exactly
// once (counted by outcome and by the metrics; a watchdog fails the test on a lost wake-up), and that at the end
// every entry is gone. Run under ThreadSanitizer in CI.
//
// ADMIT_STRESS_OPS sets the number of operations (default 100,000 in all).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/keyed_concurrency_limiter.hpp"
#include "support/watchdog.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;

std::int64_t total_ops() {
  const char* env = std::getenv("ADMIT_STRESS_OPS");
  return env != nullptr ? std::max<std::int64_t>(1, std::atoll(env)) : 100'000;
}

TEST(KeyedConcurrencyLimiterStress, NoKeyEverExceedsItsLimitAndEveryWaiterEndsOnce) {
  admit::testing_support::watchdog dog(120s);
  constexpr int keys = 3;
  constexpr std::int64_t limit = 2;
  admit::keyed_concurrency_limiter<> l{{.limit = limit, .max_waiters = 4, .max_keys = 16, .shards = 1}};
  l.enable_metrics();
  const std::array<std::string, keys> names{"alpha", "beta", "gamma"};
  std::array<std::atomic<std::int64_t>, keys> held{};
  std::atomic<std::int64_t> violations{0};
  std::atomic<std::int64_t> attempts{0};
  std::atomic<std::int64_t> granted{0};
  std::atomic<std::int64_t> refused{0};

  const int threads = 6;
  const std::int64_t per_thread = total_ops() / threads;
  std::vector<std::jthread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919U + 1U);
      for (std::int64_t i = 0; i < per_thread; ++i) {
        const int k = static_cast<int>(rng() % keys);
        const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 2);
        const unsigned kind = rng() % 4;
        attempts.fetch_add(1, std::memory_order_relaxed);
        std::optional<admit::keyed_concurrency_limiter<>::permit> p;
        if (kind == 0) {
          if (auto q = l.try_acquire(names[static_cast<std::size_t>(k)], n)) p.emplace(std::move(*q));
        } else if (kind == 1) {
          // A stop already requested: the wait ends at once unless the permits are free (cancelled otherwise).
          std::stop_source stopped;
          stopped.request_stop();
          if (auto r = l.acquire(names[static_cast<std::size_t>(k)], n, stopped.get_token())) p.emplace(std::move(*r));
        } else {
          if (auto r =
                  l.try_acquire_for(names[static_cast<std::size_t>(k)], std::chrono::microseconds(rng() % 200), n)) {
            p.emplace(std::move(*r));
          }
        }
        if (!p) {
          refused.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        granted.fetch_add(1, std::memory_order_relaxed);
        auto& h = held[static_cast<std::size_t>(k)];
        if (h.fetch_add(n, std::memory_order_acq_rel) + n > limit) violations.fetch_add(1);
        if (rng() % 8 == 0) std::this_thread::yield();
        h.fetch_sub(n, std::memory_order_acq_rel);
        p->release();
      }
    });
  }
  for (auto& w : workers) w.join();

  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(granted.load() + refused.load(), attempts.load());
  const auto s = l.metrics();
  EXPECT_EQ(s.admitted, static_cast<std::uint64_t>(granted.load()));
  EXPECT_EQ(s.unavailable + s.rejected + s.timed_out + s.cancelled, static_cast<std::uint64_t>(refused.load()));
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(l.size(), 0u);  // every entry freed with its last reference
  const auto st = l.stats();
  EXPECT_EQ(st.inserted, st.removed);
  EXPECT_EQ(st.refused_keys, 0u);
}

}  // namespace
