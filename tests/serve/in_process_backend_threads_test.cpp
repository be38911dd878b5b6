// Stress tests of serve/engine/in_process_backend.hpp under std::thread (run under ThreadSanitizer): eight threads on
// one hot key admit exactly the limit per fixed window; concurrency leases never hold more than the limit; reloads
// while threads decide lose no counts of an unchanged rule. Invariants, not timings; times are explicit.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "serve/engine/in_process_backend.hpp"

namespace admit::serve {
// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace in_process_backend_threads_test {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;

constexpr std::int64_t base_s = 1'699'920'000;
sys::time_point at(std::chrono::nanoseconds t) {
  return sys::time_point{std::chrono::duration_cast<sys::duration>(std::chrono::seconds{base_s} + t)};
}

rate_limit_rule fixed_rule(std::uint32_t limit) {
  rate_limit_rule r;
  r.full_key = "d.hot";
  r.requests_per_unit = limit;
  r.per = unit::second;
  return r;
}

TEST(InProcessBackendThreads, EightThreadsOnOneHotKeyAdmitExactlyTheLimitPerWindow) {
  constexpr int threads = 8, windows = 20, tries = 200;
  constexpr std::uint32_t limit = 300;
  std::vector<rate_limit_rule> rules{fixed_rule(limit)};
  in_process_backend b;
  b.configure_rules(rules);
  std::vector<std::atomic<int>> admitted(windows);
  std::barrier sync(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int w = 0; w < windows; ++w) {
        sync.arrive_and_wait();  // every thread in the same window
        for (int i = 0; i < tries; ++i) {
          const std::vector<hit> hits{{&rules[0], "hot", 1, std::nullopt}};
          const auto when = std::chrono::seconds{w} + std::chrono::microseconds{(t * tries + i) % 1'000'000};
          if (b.decide_at(hits, at(when))[0].result == hit_outcome::state::ok) ++admitted[static_cast<std::size_t>(w)];
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int w = 0; w < windows; ++w)
    EXPECT_EQ(admitted[static_cast<std::size_t>(w)].load(), static_cast<int>(limit)) << "window " << w;
}

TEST(InProcessBackendThreads, LeasesNeverHoldMoreThanTheLimit) {
  constexpr int threads = 8, rounds = 2000;
  std::vector<rate_limit_rule> rules(1);
  rules[0].full_key = "d.c";
  rules[0].algorithm = algorithm::concurrency;
  rules[0].concurrency = 3;
  in_process_backend b{{.lease_ttl = std::chrono::hours(24 * 365 * 200)}};
  b.configure_rules(rules);
  std::atomic<int> holding{0}, most{0}, granted{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < rounds; ++i) {
        const std::vector<hit> hits{{&rules[0], "k", 1, std::nullopt}};
        hit_outcome o = b.decide_at(hits, at(0s))[0];
        if (o.result != hit_outcome::state::ok) continue;
        const int now = ++holding;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        ++granted;
        --holding;
        EXPECT_TRUE(b.release_at(o.lease, at(0s)));
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(b.leases(), 0u);
}

TEST(InProcessBackendThreads, ReloadsWhileThreadsDecideLoseNoCountOfAnUnchangedRule) {
  constexpr int threads = 4, tries = 500;
  std::vector<rate_limit_rule> rules{fixed_rule(1'000'000)};
  in_process_backend b;
  b.configure_rules(rules);
  std::atomic<bool> stop{false};
  std::thread reloader([&] {
    std::vector<std::vector<rate_limit_rule>> generations;
    generations.reserve(1000);
    while (!stop.load()) {
      generations.push_back({fixed_rule(1'000'000)});  // the same rule, a new configuration each time
      b.configure_rules(generations.back());
      if (generations.size() == 1000) break;
    }
  });
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < tries; ++i) {
        const std::vector<hit> hits{{&rules[0], "k", 1, std::nullopt}};
        EXPECT_EQ(b.decide_at(hits, at(0s))[0].result, hit_outcome::state::ok);
      }
    });
  }
  for (auto& th : pool) th.join();
  stop = true;
  reloader.join();
  const std::vector<hit> check{{&rules[0], "k", 0, std::nullopt}};
  EXPECT_EQ(b.decide_at(check, at(0s))[0].count_after, static_cast<std::uint64_t>(threads * tries));
}

}  // namespace in_process_backend_threads_test
}  // namespace admit::serve
