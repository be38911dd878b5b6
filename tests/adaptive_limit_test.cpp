// Tests of <admit/adaptive_limit.hpp>: the limiter's bookkeeping, a simulated service in virtual time (every
// algorithm finds its capacity, follows it down and back up), and a threaded run under contention. Each algorithm's
// own arithmetic is tested in tests/adaptive/<algorithm>_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "admit/adaptive_limit.hpp"
#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace adaptive_limit_test {

namespace {

using namespace std::chrono_literals;
using admit::limit_sample;
using ns = std::chrono::nanoseconds;

static_assert(admit::limit_algorithm<admit::aimd_limit>);
static_assert(admit::limit_algorithm<admit::gradient2_limit>);
static_assert(admit::limit_algorithm<admit::vegas_limit>);
static_assert(!admit::limit_algorithm<int>);

// ---------------------------------------------------------------------------------------------------------------
// The limiter, with a scripted algorithm that records its samples and moves the limit as told.

struct script {
  std::int64_t next = 3;  // the limit after each update
  std::vector<limit_sample> samples;
};

class scripted_limit {
 public:
  explicit scripted_limit(std::shared_ptr<script> s) : script_(std::move(s)), limit_(script_->next) {}
  std::int64_t limit() const noexcept { return limit_; }
  std::int64_t min_limit() const noexcept { return 1; }
  std::int64_t max_limit() const noexcept { return 1000; }
  std::int64_t update(const limit_sample& s) {
    script_->samples.push_back(s);
    return limit_ = script_->next;
  }

 private:
  std::shared_ptr<script> script_;
  std::int64_t limit_;
};
static_assert(admit::limit_algorithm<scripted_limit>);

using clock = admit::testing::manual_clock;
using scripted_limiter = admit::basic_adaptive_limiter<scripted_limit, clock>;
clock::time_point at(ns t) { return clock::time_point{t}; }

TEST(AdaptiveLimiter, TryAcquireRejectsAtTheLimit) {
  auto s = std::make_shared<script>();
  scripted_limiter limiter{scripted_limit{s}};
  EXPECT_EQ(limiter.limit(), 3);
  auto a = limiter.try_acquire(at(0ms));
  auto b = limiter.try_acquire(at(0ms));
  auto c = limiter.try_acquire(at(0ms));
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(c->in_flight_at_acquire(), 3);
  EXPECT_EQ(limiter.in_flight(), 3);
  EXPECT_FALSE(limiter.try_acquire(at(0ms)));
  a->record_ignored();
  EXPECT_FALSE(*a);
  EXPECT_EQ(limiter.in_flight(), 2);
  EXPECT_TRUE(limiter.try_acquire(at(0ms)));  // and released (ignored) at once by its destructor
  EXPECT_TRUE(s->samples.empty());            // ignored outcomes are not samples
}

TEST(AdaptiveLimiter, SamplesCarryStartLatencyInFlightAndOutcome) {
  auto s = std::make_shared<script>();
  scripted_limiter limiter{scripted_limit{s}};
  clock::reset();
  clock::set(at(1s));
  auto a = limiter.try_acquire(at(100ms));  // explicit now
  auto b = limiter.try_acquire();           // now from the clock: 1 s
  auto c = limiter.try_acquire(at(2s));
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(b->acquired_at(), at(1s));
  a->record_success(at(130ms));
  clock::set(at(1500ms));
  b->record_dropped();
  c->record_success(at(1s));  // before the acquire: latency clamped to zero
  ASSERT_EQ(s->samples.size(), 3u);
  EXPECT_EQ(s->samples[0].start, 100ms);
  EXPECT_EQ(s->samples[0].rtt, 30ms);
  EXPECT_EQ(s->samples[0].in_flight, 1);
  EXPECT_FALSE(s->samples[0].dropped);
  EXPECT_EQ(s->samples[1].start, 1s);
  EXPECT_EQ(s->samples[1].rtt, 500ms);
  EXPECT_EQ(s->samples[1].in_flight, 2);
  EXPECT_TRUE(s->samples[1].dropped);
  EXPECT_EQ(s->samples[2].rtt, 0ns);
  EXPECT_EQ(s->samples[2].in_flight, 3);
  EXPECT_EQ(limiter.in_flight(), 0);
}

TEST(AdaptiveLimiter, ExplicitLatencyAndDestructionWithoutOutcome) {
  auto s = std::make_shared<script>();
  scripted_limiter limiter{scripted_limit{s}};
  {
    auto a = limiter.try_acquire(at(0ms));
    auto b = limiter.try_acquire(at(0ms));
    ASSERT_TRUE(a && b);
    a->record_success(std::chrono::microseconds(250));
    a->record_dropped(1s);  // already recorded: nothing
    b->record_dropped(-3ms);
    auto moved = std::move(*limiter.try_acquire(at(0ms)));
    EXPECT_EQ(limiter.in_flight(), 1);
  }  // b (empty) and moved (no outcome: ignored) die
  ASSERT_EQ(s->samples.size(), 2u);
  EXPECT_EQ(s->samples[0].rtt, 250us);
  EXPECT_FALSE(s->samples[0].dropped);
  EXPECT_EQ(s->samples[1].rtt, 0ns);
  EXPECT_TRUE(s->samples[1].dropped);
  EXPECT_EQ(limiter.in_flight(), 0);
  EXPECT_EQ(limiter.limit(), 3);
}

TEST(AdaptiveLimiter, ACutIsInForceAtOnceAndHeldPermitsArePaidBackOnRelease) {
  auto s = std::make_shared<script>();
  s->next = 6;
  scripted_limiter limiter{scripted_limit{s}};
  std::vector<scripted_limiter::permit> held;
  for (int i = 0; i < 6; ++i) held.push_back(std::move(*limiter.try_acquire(at(0ms))));
  s->next = 2;
  held[0].record_success(at(1ms));  // limit 6 -> 2 with 5 still held: 3 owed
  EXPECT_EQ(limiter.limit(), 2);
  EXPECT_EQ(limiter.in_flight(), 5);
  for (int i = 1; i <= 3; ++i) {
    held[static_cast<std::size_t>(i)].record_ignored();
    EXPECT_FALSE(limiter.try_acquire(at(1ms))) << "in flight " << limiter.in_flight() << " >= limit 2";
  }
  held[4].record_ignored();  // in flight 1 < 2
  auto p = limiter.try_acquire(at(1ms));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->in_flight_at_acquire(), 2);
  EXPECT_FALSE(limiter.try_acquire(at(1ms)));
}

TEST(AdaptiveLimiter, WaitersQueueForTheLimitAndARaiseServesThem) {
  auto s = std::make_shared<script>();
  s->next = 1;
  scripted_limiter limiter{scripted_limit{s}};
  clock::reset();
  auto first = limiter.try_acquire(at(0ms));
  ASSERT_TRUE(first);
  std::optional<scripted_limiter::acquire_result> second, third;
  std::jthread t2([&] { second.emplace(limiter.acquire()); });
  while (limiter.waiting() < 1) std::this_thread::yield();  // an observer, not a sleep
  std::jthread t3([&] { third.emplace(limiter.acquire()); });
  while (limiter.waiting() < 2) std::this_thread::yield();
  s->next = 3;
  first->record_success(at(5ms));  // limit 1 -> 3: both waiters served
  t2.join();
  t3.join();
  ASSERT_TRUE(*second);
  ASSERT_TRUE(*third);
  EXPECT_EQ(limiter.limit(), 3);
  EXPECT_EQ(limiter.in_flight(), 2);
  EXPECT_EQ((*second)->acquired_at(), at(0ms));  // measured from the grant, on the clock
}

TEST(AdaptiveLimiter, TimedWaitTimesOutOnTheClockAndMaxWaitersRejects) {
  auto s = std::make_shared<script>();
  s->next = 1;
  scripted_limiter limiter{scripted_limit{s}, {.max_waiters = 1}};
  clock::reset();
  auto held = limiter.try_acquire();
  ASSERT_TRUE(held);
  std::optional<scripted_limiter::acquire_result> waited;
  std::jthread t([&] { waited.emplace(limiter.try_acquire_for(100ms)); });
  clock::wait_for_sleepers(1);
  EXPECT_EQ(limiter.acquire().error(), admit::errc::queue_full);
  clock::advance(100ms);
  t.join();
  EXPECT_EQ(waited->error(), admit::errc::timeout);
  EXPECT_EQ(limiter.try_acquire_for(0ms).error(), admit::errc::timeout);
  limiter.close();
  EXPECT_EQ(limiter.acquire().error(), admit::errc::closed);
}

TEST(AdaptiveLimiter, MetricsCountEachAcquisitionOnceWithTheGauges) {
  auto s = std::make_shared<script>();
  s->next = 1;
  scripted_limiter limiter{scripted_limit{s}, {.max_waiters = 1}};
  clock::reset();
  EXPECT_EQ(limiter.metrics().admitted, 0u);  // not enabled: the counters stay 0, the gauges are there
  EXPECT_EQ(limiter.metrics().limit, 1);
  std::size_t events = 0;
  limiter.enable_metrics([&](const admit::limiter_event&) { ++events; });
  auto held = limiter.try_acquire();  // admitted at once
  ASSERT_TRUE(held);
  EXPECT_FALSE(limiter.try_acquire());  // unavailable
  std::optional<scripted_limiter::acquire_result> waited;
  std::jthread t([&] { waited.emplace(limiter.try_acquire_for(100ms)); });
  clock::wait_for_sleepers(1);
  EXPECT_EQ(limiter.acquire().error(), admit::errc::queue_full);
  auto m = limiter.metrics();
  EXPECT_EQ(m.in_flight, 1);
  EXPECT_EQ(m.waiting, 1u);
  clock::advance(40ms);
  held->record_ignored();  // the waiter gets the slot after 40 ms
  t.join();
  ASSERT_TRUE(waited && *waited);
  EXPECT_EQ(limiter.try_acquire_for(0ms).error(), admit::errc::timeout);
  m = limiter.metrics();
  EXPECT_EQ(m.admitted, 2u);
  EXPECT_EQ(m.waited, 1u);
  EXPECT_EQ(m.wait.max, 40ms);
  EXPECT_EQ(m.unavailable, 1u);
  EXPECT_EQ(m.rejected, 1u);
  EXPECT_EQ(m.timed_out, 1u);
  EXPECT_EQ(m.in_flight, 1);
  EXPECT_EQ(m.limit, 1);
  EXPECT_EQ(events, 5u);
  EXPECT_EQ(limiter.wait_times().count(), 2u);
}

// ---------------------------------------------------------------------------------------------------------------
// A simulated service in virtual time: a discrete-event simulation, single-threaded, no sleeping.
//
// The service has `capacity` C workers and a base latency of 10 ms; with n requests in it, a new one takes
// base * max(1, n / C) (n > C: it shares the workers, Little's law: throughput stays C / base), times a seeded +-5%
// jitter. It also bounds its own backlog, as servers do (an accept queue, a thread pool's queue): with more than
// C + C / 5 in it, it answers 503 after 1 ms — a dropped sample. Clients offer 2x the capacity, one request every
// base / (2C), and drop whatever the limiter refuses. The run is 3 phases of 30 s: C = 50, C = 25, C = 50 again.

struct sim_phase_result {
  double mean_limit = 0;  // time-weighted over the last 10 s of the phase
  std::int64_t min_limit = 0;
  std::int64_t max_limit = 0;
  double goodput = 0;  // successes per second over the last 10 s, as a fraction of the capacity C / base
};

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <class Algorithm>
std::vector<sim_phase_result> simulate(Algorithm algorithm, std::vector<std::int64_t> capacities) {
  using limiter_t = admit::basic_adaptive_limiter<Algorithm, clock>;
  limiter_t limiter{std::move(algorithm)};
  constexpr ns base = 10ms;
  constexpr ns phase = 30s;
  constexpr ns measured = 10s;  // the end of each phase
  std::uint64_t rng = 12345;

  struct completion {
    ns when;
    std::size_t slot;
    bool dropped;
    bool operator>(const completion& o) const { return when > o.when || (when == o.when && slot > o.slot); }
  };
  std::priority_queue<completion, std::vector<completion>, std::greater<>> pending;
  std::vector<std::optional<typename limiter_t::permit>> slots;
  std::vector<std::size_t> free_slots;

  std::vector<sim_phase_result> results;
  ns now = 0ns;
  ns next_arrival = 0ns;
  for (std::size_t p = 0; p < capacities.size(); ++p) {
    const std::int64_t c = capacities[p];
    const ns interarrival = base / (2 * c);
    const ns phase_end = phase * static_cast<std::int64_t>(p + 1);
    const ns window_start = phase_end - measured;
    sim_phase_result r;
    r.min_limit = std::numeric_limits<std::int64_t>::max();
    double limit_area = 0;
    std::int64_t successes = 0;
    ns last = now;
    while (now < phase_end) {
      const bool completion_first = !pending.empty() && pending.top().when <= next_arrival;
      const ns t = std::min(completion_first ? pending.top().when : next_arrival, phase_end);
      if (t > window_start) {  // the limit held from `last` to `t`
        const ns from = std::max(last, window_start);
        limit_area += static_cast<double>(limiter.limit()) * static_cast<double>((t - from).count());
      }
      now = last = t;
      if (t == phase_end) break;
      if (t >= window_start) {
        r.min_limit = std::min(r.min_limit, limiter.limit());
        r.max_limit = std::max(r.max_limit, limiter.limit());
      }
      if (completion_first) {
        const completion done = pending.top();
        pending.pop();
        auto& permit = *slots[done.slot];
        if (done.dropped) {
          permit.record_dropped(at(now));
        } else {
          permit.record_success(at(now));
          if (now >= window_start) ++successes;
        }
        slots[done.slot].reset();
        free_slots.push_back(done.slot);
        continue;
      }
      next_arrival += interarrival;
      auto admitted = limiter.try_acquire(at(now));
      if (!admitted) continue;  // the client sheds it
      const std::int64_t n = limiter.in_flight();
      std::size_t slot = 0;
      if (free_slots.empty()) {
        slot = slots.size();
        slots.emplace_back();
      } else {
        slot = free_slots.back();
        free_slots.pop_back();
      }
      slots[slot].emplace(std::move(*admitted));
      if (n > c + c / 5) {
        pending.push({now + 1ms, slot, true});  // 503
      } else {
        const double load = std::max(1.0, static_cast<double>(n) / static_cast<double>(c));
        const double jitter = 0.95 + 0.1 * static_cast<double>(splitmix(rng) >> 11) * 0x1.0p-53;
        pending.push(
            {now + ns(static_cast<std::int64_t>(static_cast<double>(base.count()) * load * jitter)), slot, false});
      }
    }
    r.mean_limit = limit_area / static_cast<double>(measured.count());
    r.goodput = static_cast<double>(successes) / 10.0 / (static_cast<double>(c) / 0.010);
    results.push_back(r);
  }
  return results;
}

void print(const char* name, const std::vector<sim_phase_result>& results, const std::vector<std::int64_t>& caps) {
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::printf("[ sim      ] %-9s C=%-3lld limit mean %6.2f min %3lld max %3lld goodput %.3f\n", name,
                static_cast<long long>(caps[i]), results[i].mean_limit, static_cast<long long>(results[i].min_limit),
                static_cast<long long>(results[i].max_limit), results[i].goodput);
  }
}

// Tolerance: the service itself refuses beyond 1.2 C, so a limit that has found the capacity lives in [C, 1.2 C]
// plus the algorithm's own step; a loss-based sawtooth dips to backoff * 1.2 C. Each phase must end with the mean
// limit in [0.9 C, 1.3 C] and goodput (successes per second, over C / base) of at least 0.9: the limit neither
// overshoots into 503s for long nor starves the service.
void expect_tracks_capacity(const std::vector<sim_phase_result>& results, const std::vector<std::int64_t>& caps) {
  ASSERT_EQ(results.size(), caps.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const double c = static_cast<double>(caps[i]);
    EXPECT_GE(results[i].mean_limit, 0.9 * c) << "phase " << i;
    EXPECT_LE(results[i].mean_limit, 1.3 * c) << "phase " << i;
    EXPECT_GE(results[i].goodput, 0.9) << "phase " << i;
    EXPECT_LE(results[i].goodput, 1.0) << "phase " << i;
  }
}

const std::vector<std::int64_t> capacities{50, 25, 50};

TEST(AdaptiveLimitSimulation, AimdFindsTheCapacityFollowsItDownAndRecovers) {
  const auto r = simulate(admit::aimd_limit{{.initial_limit = 10}}, capacities);
  print("aimd", r, capacities);
  expect_tracks_capacity(r, capacities);
}

TEST(AdaptiveLimitSimulation, Gradient2FindsTheCapacityFollowsItDownAndRecovers) {
  const auto r = simulate(admit::gradient2_limit{{.initial_limit = 10}}, capacities);
  print("gradient2", r, capacities);
  expect_tracks_capacity(r, capacities);
}

TEST(AdaptiveLimitSimulation, VegasFindsTheCapacityFollowsItDownAndRecovers) {
  const auto r = simulate(admit::vegas_limit{{.initial_limit = 10}}, capacities);
  print("vegas", r, capacities);
  expect_tracks_capacity(r, capacities);
}

// ---------------------------------------------------------------------------------------------------------------
// Threads: 8 threads acquire (try, timed, blocking) and record random outcomes while AIMD moves the limit in [2, 8].

TEST(AdaptiveLimiterThreads, InFlightNeverExceedsTheLimitInForce) {
  admit::adaptive_limiter<admit::aimd_limit> limiter{admit::aimd_limit{
      {.initial_limit = 8, .min_limit = 2, .max_limit = 8, .backoff_ratio = 0.5, .increase = 4, .timeout = 1s}}};
  std::atomic<std::int64_t> held{0};
  std::atomic<std::int64_t> worst{0};
  std::atomic<std::int64_t> lowest_limit{8};
  std::atomic<std::int64_t> admitted{0};
  std::atomic<bool> over{false};
  constexpr int per_thread = 20'000;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        std::uint64_t rng = static_cast<std::uint64_t>(t) + 1;
        for (int i = 0; i < per_thread; ++i) {
          const std::uint64_t r = splitmix(rng);
          std::optional<admit::adaptive_limiter<admit::aimd_limit>::permit> p;
          if (r % 4 == 0) {
            auto w = limiter.try_acquire_for(1ms);
            if (w) p.emplace(std::move(w.value()));
          } else if (r % 4 == 1) {
            auto w = limiter.acquire();
            if (w) p.emplace(std::move(w.value()));
          } else {
            p = limiter.try_acquire();
          }
          if (!p) continue;
          admitted.fetch_add(1, std::memory_order_relaxed);
          const std::int64_t h = held.fetch_add(1) + 1;
          std::int64_t prev = worst.load();
          while (h > prev && !worst.compare_exchange_weak(prev, h)) {
          }
          if (h > 8 || p->in_flight_at_acquire() > 8) over = true;
          const std::int64_t l = limiter.limit();
          std::int64_t lo = lowest_limit.load();
          while (l < lo && !lowest_limit.compare_exchange_weak(lo, l)) {
          }
          held.fetch_sub(1);
          switch ((r >> 8) % 10) {
            case 0:
              p->record_dropped();
              break;
            case 1:
              p->record_ignored();
              break;
            case 2:
              break;  // destroyed without an outcome: ignored
            default:
              p->record_success();
              break;
          }
        }
      });
    }
  }
  EXPECT_FALSE(over) << "worst in flight " << worst.load();
  EXPECT_LE(worst.load(), 8);
  EXPECT_LT(lowest_limit.load(), 8);  // cuts did happen while threads held permits
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(limiter.in_flight(), 0);
  EXPECT_EQ(limiter.waiting(), 0u);
  // Quiescent: exactly `limit` permits can be taken.
  std::vector<admit::adaptive_limiter<admit::aimd_limit>::permit> all;
  while (auto p = limiter.try_acquire()) all.push_back(std::move(*p));
  EXPECT_EQ(static_cast<std::int64_t>(all.size()), limiter.limit());
}

}  // namespace

}  // namespace adaptive_limit_test
