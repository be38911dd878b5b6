// admit::token_bucket under threads: a lost compare-and-swap is never a refusal, reconfiguration races decisions,
// cancellations race reservations, and abandoned waits create no tokens (run under ThreadSanitizer too).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace token_bucket_concurrency_test {

namespace {

using namespace std::chrono_literals;
using admit::rate;
using admit::token_bucket;
using tp = std::chrono::steady_clock::time_point;

const tp t0 = tp{} + 1000h;  // far from the epoch

// A lost compare-and-swap must never be reported as "limit exceeded": with tokens for every request, none is refused.
TEST(TokenBucketConcurrency, StressNoSpuriousRejectUnderContention) {
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  token_bucket lim{rate::per_second(1), threads * per_thread};  // enough for every request
  std::atomic<int> rejected{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      for (int k = 0; k < per_thread; ++k) {
        if (!lim.try_acquire_at(t0)) rejected.fetch_add(1);
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(rejected.load(), 0);
  EXPECT_EQ(lim.tokens_at(t0), 0);
}

TEST(TokenBucketConcurrency, StressTotalAdmittedWithinBoundWhileTimeAdvances) {
  constexpr int threads = 4;
  token_bucket lim{rate::per_second(1000), 50};
  std::atomic<std::int64_t> clock_ns{0};
  std::atomic<std::int64_t> admitted{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      for (int k = 0; k < 20000; ++k) {
        const auto now = t0 + std::chrono::nanoseconds(clock_ns.fetch_add(10000));  // 10 µs per call
        if (lim.try_acquire_at(now)) admitted.fetch_add(1);
        if (k % 1000 == 0) lim.set_burst_at(now, 50);  // reconfiguration racing decisions
      }
    });
  }
  for (auto& th : pool) th.join();
  const double elapsed = static_cast<double>(clock_ns.load()) / 1e9;
  EXPECT_LE(static_cast<double>(admitted.load()), 1000 * elapsed + 50);
  EXPECT_GE(static_cast<double>(admitted.load()), 1000 * elapsed * 0.9);
}

// A cancellation and a reservation racing: the cancellation must never give back tokens a reservation committed in
// between depends on. Over any window, what was granted stays within rate·w + burst.
TEST(TokenBucketConcurrency, CancellationsRacingReservationsNeverOverAdmit) {
  for (int round = 0; round < 50; ++round) {
    token_bucket lim{rate::per_second(1), 1};
    ASSERT_TRUE(lim.try_acquire_at(t0));
    std::vector<tp> granted;  // times at which kept reservations act
    std::mutex m;
    std::vector<std::thread> pool;
    for (int i = 0; i < 4; ++i) {
      pool.emplace_back([&, i] {
        for (int k = 0; k < 50; ++k) {
          auto r = lim.reserve_at(t0, 1);
          if (!r.ok()) continue;
          if ((k + i) % 2 == 0) {
            r.cancel_at(t0);
          } else {
            std::lock_guard lock(m);
            granted.push_back(r.ready_at());
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    std::sort(granted.begin(), granted.end());
    // Burst 1 and one token a second: kept reservations act at least 1 s apart.
    for (std::size_t j = 1; j < granted.size(); ++j) ASSERT_GE(granted[j] - granted[j - 1], 1s) << "round " << round;
  }
}

// An abandoned wait (timed out or cancelled) creates no tokens and races with nothing (a wait that marks itself
// abandoned outside the lock races with the refill that serves it): it leaves through the same atomic state as
// everything else. Under ThreadSanitizer, threads that acquire, time out and cancel at random never create tokens —
// when all have left, the bucket holds at most what it started with minus what the successful callers took. (Not
// exactly that: as x/time/rate's CancelAt, a cancelled reservation gives back only the tokens no later reservation
// depends on, so interleaved cancels leave some tokens spent; time refills them.)
TEST(TokenBucketConcurrency, AbandonedWaitsConserveTokensUnderConcurrency) {
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
            ok = bucket.try_acquire_for(0ms, n).has_value();  // a deadline that only an immediate grant meets
            break;
          default: {
            std::stop_source stop;
            stop.request_stop();  // abandoned before it starts: must take nothing
            const admit::wait_result r0 = bucket.acquire(n, stop.get_token());
            EXPECT_EQ(r0.error(), admit::errc::cancelled);
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

}  // namespace

}  // namespace token_bucket_concurrency_test
