// Stress tests of admit::admission: threads of every class doing random try_acquire / timed / cancellable acquire
// with random counts, holding their permits for a while, and a thread cancelling waits at random. Asserts that never
// more than max_in_flight permits are held; that the admissions, at the times the admission decided them on its own
// clock, are all allowed by a reference token bucket of the same rate and burst; that each class is served FIFO; that
// each class gets at least (a tolerance below) its share while every class keeps requests waiting; and that every
// call ends exactly once with nothing left queued or held. Run under ThreadSanitizer in CI.
//
// ADMIT_STRESS_MS sets how long each scenario runs (default 1500 ms).
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
#include <vector>

#include "admit/admission.hpp"
#include "admit/token_bucket.hpp"
#include "support/watchdog.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace admission_stress_test {

namespace {

using namespace std::chrono_literals;
using admit::errc;
using clock_type = std::chrono::steady_clock;

std::chrono::milliseconds run_time() {
  const char* env = std::getenv("ADMIT_STRESS_MS");
  return std::chrono::milliseconds{env != nullptr ? std::max<long long>(1, std::atoll(env)) : 1500};
}

using admit::testing_support::watchdog;

struct scenario {
  admit::rate rate;
  std::int64_t burst;
  std::int64_t max_in_flight;
  std::vector<double> shares;
  int threads_per_class;
  std::int64_t max_n;
  std::chrono::microseconds max_hold;
  std::chrono::milliseconds max_timeout;
  std::size_t max_waiters = 64;
  bool check_shares = true;  // every class keeps requests waiting (no queue bound sheds them)
  // Records every admission through on_admitted. Without the hook, one class admits without its mutex while nobody
  // waits (the fast path): then only the bounds that need no record are checked (held, tokens over the whole run).
  bool record_events = true;
};

// A worker's current stop_source, which the canceller may trigger at any time.
struct cancel_slot {
  std::mutex mutex;
  std::stop_source source;
};

struct totals {
  std::atomic<std::int64_t> held{0};
  std::atomic<std::int64_t> violations{0};
  std::atomic<std::int64_t> started{0};
  std::atomic<std::int64_t> ended{0};
  std::atomic<std::int64_t> outcomes[6]{};  // by errc up to exceeds_capacity (0: admitted)
  std::atomic<std::int64_t> would_block{0};
  std::atomic<std::int64_t> tokens{0};
};

void run_scenario(const scenario& s) {
  watchdog dog(std::chrono::seconds(120));
  std::mutex events_mutex;
  std::vector<admit::admission_event> events;
  admit::admission_options options{.rate = s.rate,
                                   .burst = s.burst,
                                   .max_in_flight = s.max_in_flight,
                                   .max_waiters = s.max_waiters,
                                   .classes = {},
                                   .on_admitted = {}};
  if (s.record_events) {
    options.on_admitted = [&](const admit::admission_event& e) {
      std::lock_guard lock(events_mutex);
      events.push_back(e);
    };
  }
  // (Names built with snprintf: GCC 12 -O3 warns falsely, -Wstringop-overflow, on "c" + std::to_string(c) here.)
  for (std::size_t c = 0; c < s.shares.size(); ++c) {
    char name[32];
    std::snprintf(name, sizeof name, "c%zu", c);
    options.classes.push_back({name, s.shares[c]});
  }
  const auto start = clock_type::now();
  admit::admission adm{options};
  totals t;
  const std::size_t workers = s.shares.size() * static_cast<std::size_t>(s.threads_per_class);
  std::vector<cancel_slot> slots(workers);
  const auto end = clock_type::now() + run_time();
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < workers; ++i) {
      threads.emplace_back([&, i] {
        const std::size_t priority = i % s.shares.size();
        std::mt19937_64 rng(i * 7919 + 17);
        std::uniform_int_distribution<int> pick(0, 99);
        std::uniform_int_distribution<std::int64_t> count(1, s.max_n);
        std::uniform_int_distribution<std::int64_t> hold(0, s.max_hold.count());
        std::uniform_int_distribution<std::int64_t> timeout(0, s.max_timeout.count());
        while (clock_type::now() < end) {
          const std::int64_t n = count(rng);
          const int op = pick(rng);
          t.started.fetch_add(1, std::memory_order_relaxed);
          // Made in one expression (GCC 12 -O3 warns falsely, -Wmaybe-uninitialized, on a result assigned later).
          admit::acquire_result r = [&]() -> admit::acquire_result {
            if (op < 10) return adm.try_acquire(priority, n);
            if (op < 70) return adm.try_acquire_for(std::chrono::milliseconds(timeout(rng)), priority, n);
            std::stop_token token;
            {
              std::lock_guard lock(slots[i].mutex);
              slots[i].source = std::stop_source{};
              token = slots[i].source.get_token();
            }
            return op < 85 ? adm.acquire(token, priority, n)
                           : adm.try_acquire_for(std::chrono::milliseconds(timeout(rng)), priority, n, token);
          }();
          t.ended.fetch_add(1, std::memory_order_relaxed);
          if (r) {
            const std::int64_t now_held = t.held.fetch_add(n, std::memory_order_acq_rel) + n;
            if (now_held > s.max_in_flight && s.max_in_flight > 0) t.violations.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(hold(rng)));
            t.held.fetch_sub(n, std::memory_order_acq_rel);
            r->release();
            t.outcomes[0].fetch_add(1, std::memory_order_relaxed);
            t.tokens.fetch_add(n, std::memory_order_relaxed);
          } else if (r.error() == errc::would_block) {
            t.would_block.fetch_add(1, std::memory_order_relaxed);
          } else {
            const int e = static_cast<int>(r.error());
            ASSERT_TRUE(e >= 1 && e <= 5) << "unexpected error " << e;
            t.outcomes[e].fetch_add(1, std::memory_order_relaxed);
            if (r.error() == errc::queue_full) std::this_thread::sleep_for(200us);  // shed: back off, as a client would
          }
        }
      });
    }
    // The canceller: triggers a random worker's stop_source now and then (a wait in progress, or a stale one).
    threads.emplace_back([&] {
      std::mt19937_64 rng(4242);
      std::uniform_int_distribution<std::size_t> who(0, workers - 1);
      while (clock_type::now() < end) {
        {
          cancel_slot& slot = slots[who(rng)];
          std::lock_guard lock(slot.mutex);
          slot.source.request_stop();
        }
        std::this_thread::sleep_for(1ms);
      }
    });
  }

  // Every call ended exactly once; nothing is left queued or held.
  std::int64_t ended_by_outcome = t.would_block.load();
  for (auto& o : t.outcomes) ended_by_outcome += o.load();
  EXPECT_EQ(t.started.load(), t.ended.load());
  EXPECT_EQ(t.ended.load(), ended_by_outcome);
  EXPECT_EQ(adm.waiting(), 0u);
  EXPECT_EQ(adm.in_flight(), 0);
  EXPECT_EQ(t.violations.load(), 0) << "more than max_in_flight permits were held at once";
  EXPECT_EQ(t.outcomes[static_cast<int>(errc::exceeds_capacity)].load(), 0);
  EXPECT_GT(t.outcomes[0].load(), 100);
  EXPECT_GT(t.outcomes[static_cast<int>(errc::cancelled)].load(), 0);
  if (s.max_waiters < workers) {
    EXPECT_GT(t.outcomes[static_cast<int>(errc::queue_full)].load(), 0);
  }

  if (!s.record_events) {
    // No more tokens than the bucket can give over the whole run: a full burst, then the rate.
    if (!s.rate.is_inf()) {
      const double most = static_cast<double>(s.burst) + s.rate.tokens_for(clock_type::now() - start);
      EXPECT_LE(static_cast<double>(t.tokens.load()), most) << "admitted faster than the rate";
    }
    std::printf("admitted %lld (tokens %lld), would_block %lld\n", static_cast<long long>(t.outcomes[0].load()),
                static_cast<long long>(t.tokens.load()), static_cast<long long>(t.would_block.load()));
    return;
  }
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  ASSERT_EQ(static_cast<std::int64_t>(events.size()), t.outcomes[0].load());
  // Admission times never run ahead of a reference token bucket of the same rate and burst (both start full).
  if (!s.rate.is_inf()) {
    admit::basic_token_bucket<clock_type> reference{s.rate, s.burst};
    for (std::size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      if (i > 0) {
        ASSERT_GE(e.at, events[i - 1].at) << "admission " << e.order << " decided earlier than the one before";
      }
      const clock_type::time_point at{std::chrono::duration_cast<clock_type::duration>(e.at)};
      ASSERT_TRUE(reference.try_acquire_at(at, e.n))
          << "admission " << e.order << " (n " << e.n << ") at " << e.at.count() << "ns is faster than the rate";
    }
  }
  // FIFO within each class: admission order follows arrival order.
  std::vector<std::uint64_t> last_arrival(s.shares.size(), 0);
  std::vector<std::int64_t> per_class(s.shares.size(), 0);
  std::vector<std::int64_t> entitled(s.shares.size(), 0);
  std::int64_t all = 0;
  for (const auto& e : events) {
    EXPECT_GT(e.arrival, last_arrival[e.priority]) << "class " << e.priority << " served out of order";
    last_arrival[e.priority] = e.arrival;
    per_class[e.priority] += e.n;
    if (e.within_guarantee) entitled[e.priority] += e.n;
    all += e.n;
  }
  // Each class got at least its share (every class kept requests waiting throughout), within a tolerance.
  for (std::size_t c = 0; c < s.shares.size() && s.check_shares; ++c) {
    const double share = static_cast<double>(per_class[c]) / static_cast<double>(all);
    EXPECT_GE(share, 0.7 * s.shares[c]) << "class " << c << " got " << per_class[c] << " of " << all;
  }
  std::printf("admitted %lld (tokens %lld), would_block %lld, queue_full %lld, timeout %lld, cancelled %lld\n",
              static_cast<long long>(t.outcomes[0].load()), static_cast<long long>(all),
              static_cast<long long>(t.would_block.load()),
              static_cast<long long>(t.outcomes[static_cast<int>(errc::queue_full)].load()),
              static_cast<long long>(t.outcomes[static_cast<int>(errc::timeout)].load()),
              static_cast<long long>(t.outcomes[static_cast<int>(errc::cancelled)].load()));
  for (std::size_t c = 0; c < s.shares.size(); ++c) {
    std::printf("  class %zu (share %.2f): %lld tokens (%lld within its guarantee)\n", c, s.shares[c],
                static_cast<long long>(per_class[c]), static_cast<long long>(entitled[c]));
  }
}

TEST(AdmissionStress, RateBoundClassesEachGetTheirShare) {
  run_scenario({.rate = admit::rate::per_second(1000),
                .burst = 8,
                .max_in_flight = 6,
                .shares = {0.5, 0.3, 0.2},
                .threads_per_class = 4,
                .max_n = 2,
                .max_hold = 300us,
                .max_timeout = 50ms});
}

TEST(AdmissionStress, ConcurrencyBoundClassesEachGetTheirShare) {
  run_scenario({.rate = admit::rate::inf(),
                .burst = 1,
                .max_in_flight = 6,
                .shares = {0.5, 0.33, 0.17},
                .threads_per_class = 4,
                .max_n = 1,
                .max_hold = 400us,
                .max_timeout = 5ms});
}

TEST(AdmissionStress, BothLimitsWithUnreservedCapacity) {
  run_scenario({.rate = admit::rate::per_second(2000),
                .burst = 4,
                .max_in_flight = 3,
                .shares = {0.4, 0.2},
                .threads_per_class = 4,
                .max_n = 2,
                .max_hold = 1000us,
                .max_timeout = 50ms});
}

TEST(AdmissionStress, ABoundedQueueShedsTheExcess) {
  run_scenario({.rate = admit::rate::per_second(5000),
                .burst = 5,
                .max_in_flight = 4,
                .shares = {0.5, 0.5},
                .threads_per_class = 4,
                .max_n = 2,
                .max_hold = 400us,
                .max_timeout = 10ms,
                .max_waiters = 3,
                .check_shares = false});
}

// One class and no on_admitted hook: admissions while nobody waits take the fast path (no mutex), the others the
// mutex, and the word they share passes between them each time a request queues or the queue drains.
TEST(AdmissionStress, OneClassWithoutAHookMixesTheFastPathAndTheQueue) {
  run_scenario({.rate = admit::rate::per_second(20000),
                .burst = 6,
                .max_in_flight = 4,
                .shares = {1.0},
                .threads_per_class = 8,
                .max_n = 2,
                .max_hold = 200us,
                .max_timeout = 5ms,
                .record_events = false});
}

TEST(AdmissionStress, OneClassWithoutAHookConcurrencyOnly) {
  run_scenario({.rate = admit::rate::inf(),
                .burst = 1,
                .max_in_flight = 3,
                .shares = {1.0},
                .threads_per_class = 8,
                .max_n = 2,
                .max_hold = 100us,
                .max_timeout = 2ms,
                .record_events = false});
}

}  // namespace

}  // namespace admission_stress_test
