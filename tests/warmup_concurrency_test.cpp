// admit::warmup's blocking forms on the manual clock (sleeping out the debt, cancellation giving the charge back or
// not, a deadline the debt outlasts) and its behaviour under threads: concurrent reservations lose no update, one
// admission per round under contention, a lost race is never a refusal, callers reading a racing clock stay within
// the stable rate. The single-threaded rules and Guava's sequences: warmup_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <latch>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "admit/warmup.hpp"
#include "warmup_testing.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::testing::warmup_tests;
using admit::rate;

// --- blocking forms, on the manual clock ---

TEST(Warmup, AcquireSleepsOutTheDebt) {
  clock_type::reset();
  warmup w{rate::per_second(2), 4s};
  EXPECT_TRUE(w.acquire());  // cold: goes at once, owes 1.375s
  bool done = false;
  std::jthread t([&] { done = w.acquire().has_value(); });
  clock_type::wait_for_sleepers(1);
  EXPECT_EQ(clock_type::advance(1374ms), 0U);
  EXPECT_EQ(clock_type::advance(1ms), 1U);
  t.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(w.time_until_available(), 1125ms);
}

TEST(Warmup, CancelledAcquireGivesItsChargeBackWhenNobodyCameAfter) {
  clock_type::reset();
  warmup w{rate::per_second(2), 4s};
  EXPECT_TRUE(w.acquire());
  std::stop_source stop;
  admit::wait_result got;
  std::jthread t([&] { got = w.acquire(1, stop.get_token()); });
  clock_type::wait_for_sleepers(1);
  stop.request_stop();
  t.join();
  EXPECT_EQ(got.error(), admit::errc::cancelled);
  EXPECT_EQ(w.time_until_available(), 1375ms);                                // as if it had never come
  EXPECT_DOUBLE_EQ(w.stored_permits_at(at(0s)), 7.0);                         // its stored permit is back too
  EXPECT_EQ(w.acquire(1, stop.get_token()).error(), admit::errc::cancelled);  // already stopped: charges nothing
  EXPECT_EQ(w.time_until_available(), 1375ms);
}

TEST(Warmup, CancelledAcquireKeepsItsChargeWhenSomeoneCameAfter) {
  clock_type::reset();
  warmup w{rate::per_second(2), 4s};
  EXPECT_TRUE(w.acquire());
  std::stop_source stop;
  std::jthread t1([&] { EXPECT_FALSE(w.acquire(1, stop.get_token())); });  // goes at 1.375s
  clock_type::wait_for_sleepers(1);
  std::jthread t2([&] { EXPECT_TRUE(w.acquire()); });  // goes at 2.5s
  clock_type::wait_for_sleepers(2);
  stop.request_stop();
  t1.join();
  EXPECT_EQ(w.time_until_available(), 1375ms + 1125ms + 875ms);
  clock_type::advance(2500ms);
  t2.join();
}

TEST(Warmup, TimedAcquireFailsAtOnceWhenTheDebtOutlastsTheDeadline) {
  clock_type::reset();
  warmup w{rate::per_second(2), 4s};
  EXPECT_TRUE(w.try_acquire_for(0s));
  EXPECT_EQ(w.try_acquire_for(1374ms).error(), admit::errc::timeout);
  EXPECT_FALSE(w.try_acquire_until(at(-1s)));
  EXPECT_FALSE(w.try_acquire_for(-1s));
  EXPECT_EQ(w.time_until_available(), 1375ms);  // the failures charged nothing
  std::jthread t([&] { EXPECT_TRUE(w.try_acquire_for(1375ms)); });
  clock_type::wait_for_sleepers(1);
  clock_type::advance(1375ms);
  t.join();
  EXPECT_EQ(w.time_until_available(), 1125ms);
}

// --- concurrency ---

// Concurrent reservations at one instant: every cost is charged exactly once, whatever the interleaving (the costs
// of n = 1 requests depend only on how many came before), so the waits are exactly the sequential ones.
TEST(Warmup, ConcurrentReservationsLoseNoUpdate) {
  constexpr int threads = 4;
  constexpr int per_thread = 2'000;
  warmup shared{rate::per_second(1000), 3s, 3.0};
  warmup sequential{rate::per_second(1000), 3s, 3.0};
  std::vector<std::int64_t> expected;
  for (int i = 0; i < threads * per_thread; ++i) expected.push_back(wait_at(sequential, at(0s)).count());
  std::vector<std::vector<std::int64_t>> got(threads);
  std::latch start(threads);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&, i] {
        start.arrive_and_wait();
        for (int k = 0; k < per_thread; ++k)
          got[static_cast<std::size_t>(i)].push_back(shared.reserve_at(at(0s)).delay_from(at(0s)).count());
      });
    }
  }
  std::vector<std::int64_t> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, expected);  // expected is increasing already
  EXPECT_EQ(shared.time_until_available_at(at(0s)), sequential.time_until_available_at(at(0s)));
}

// Rounds of simultaneous try_acquire at one instant, far enough apart to pay any debt: exactly one admission per
// round. Zero would be a spurious refusal caused by contention; two would be over-admission.
TEST(Warmup, ExactlyOneAdmissionPerRoundUnderContention) {
  constexpr int threads = 4;
  constexpr int rounds = 2'000;
  warmup w{rate::per_second(1000), 100ms, 3.0};  // cold interval 3ms
  std::atomic<int> admitted{0};
  std::barrier sync(threads);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&] {
        for (int r = 0; r < rounds; ++r) {
          sync.arrive_and_wait();
          if (w.try_acquire_at(at(std::chrono::milliseconds(5 * r)))) admitted.fetch_add(1);
        }
      });
    }
  }
  EXPECT_EQ(admitted.load(), rounds);
}

// One caller whose requests always fit (1ms apart) races reservers that keep committing tiny charges (<= 3ns each,
// never enough to reach its next request): every one of its requests must be admitted. A lost race reported as a
// refusal fails this.
TEST(Warmup, LostRaceIsNeverReportedAsARefusal) {
  constexpr int reservers = 2;
  constexpr int ops = 200'000;
  warmup w{rate::every(1ns), 1us, 3.0};
  std::atomic<int> refused{0};
  std::atomic<bool> done{false};
  std::latch start(reservers + 1);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < reservers; ++i) {
      workers.emplace_back([&] {
        start.arrive_and_wait();
        // At most ~ops reservations of <= 3ns each in all: never enough to reach the next 1ms request.
        for (int k = 0; k < ops / reservers && !done.load(std::memory_order_relaxed); ++k) (void)w.reserve_at(at(0ns));
      });
    }
    workers.emplace_back([&] {
      start.arrive_and_wait();
      for (int k = 1; k <= ops; ++k) {
        if (!w.try_acquire_at(at(std::chrono::milliseconds(k)))) refused.fetch_add(1);
      }
      done.store(true);
    });
  }
  EXPECT_EQ(refused.load(), 0);
}

// A clock whose every read is 1us after the previous one, in every thread (one atomic counter: a read that happens
// after another returns a later time).
struct ticking_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<ticking_clock>;
  static constexpr bool is_steady = true;
  static inline std::atomic<std::int64_t> ticks{0};
  static time_point now() noexcept { return time_point{1us * ticks.fetch_add(1)}; }
};

// The benchmark's warmup/admit/now case as a stress test: threads calling try_acquire() and decide() on a clock that
// moves 1us per read, with requests costing 1 to 3ns, so that every request fits when it is decided. Every call must
// be admitted: a refusal is a clock reading compared with an admission committed after it was taken.
TEST(Warmup, ClockReadingCallersRacingAreNeverRefused) {
  constexpr int threads = 4;
  constexpr int per_thread = 20'000;
  admit::basic_warmup<ticking_clock> w{rate::every(1ns), 1ms, 3.0};
  std::atomic<int> refused{0};
  std::latch start(threads);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&, i] {
        start.arrive_and_wait();
        for (int k = 0; k < per_thread; ++k) {
          const bool ok = (k + i) % 2 == 0 ? w.try_acquire() : w.decide().admitted;
          if (!ok) refused.fetch_add(1);
        }
      });
    }
  }
  EXPECT_EQ(refused.load(), 0);
}

TEST(Warmup, ConcurrentCallersWithRacingTimesStayWithinTheStableRate) {
  constexpr int threads = 4;
  constexpr int per_thread = 40'000;
  warmup w{rate::every(10us), 5ms, 3.0};
  std::atomic<std::int64_t> virtual_now{0};
  std::atomic<std::int64_t> permits{0};
  std::latch start(threads);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&, i] {
        std::mt19937_64 rng(static_cast<std::uint64_t>(i) + 11);
        start.arrive_and_wait();
        for (int k = 0; k < per_thread; ++k) {
          const auto now = virtual_now.fetch_add(static_cast<std::int64_t>(rng() % 2000));
          const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 2);
          if (w.try_acquire_at(at(std::chrono::nanoseconds{now}), n)) permits.fetch_add(n);
        }
      });
    }
  }
  // Admissions are spaced by their costs (>= n stable intervals) in commit order: all but the last fit the elapsed.
  EXPECT_LE(permits.load(), virtual_now.load() / 10'000 + 2);
  EXPECT_GT(permits.load(), virtual_now.load() / 10'000 / 4);
}

}  // namespace
