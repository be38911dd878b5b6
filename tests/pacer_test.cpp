#include "admit/pacer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"
#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace pacer_test {

namespace {

using namespace std::chrono_literals;
using clock_type = admit::testing::manual_clock;
using pacer = admit::basic_pacer<clock_type>;
using time_point = pacer::time_point;
using admit::pacer_options;
using admit::rate;

time_point at(std::chrono::nanoseconds d) { return time_point{d}; }

using admit::testing::invalid_argument_message;

// When a caller at `now` reserving n slots may go (the reservation's ready_at()). Also checks the reservation's shape:
// always ok(), holding n tokens, and its delay from `now` is the time until then.
time_point ready_at(pacer& p, time_point now, std::int64_t n = 1) {
  const admit::basic_reservation<clock_type> r = p.reserve_at(now, n);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.tokens(), n);
  EXPECT_EQ(r.delay_from(now), r.ready_at() - now);
  return r.ready_at();
}

TEST(Pacer, InvalidConfigurationThrowsNamingTheValue) {
  EXPECT_NE(invalid_argument_message([] { pacer p{rate{}}; }).find("0/s"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              pacer p{rate::per_second(10), pacer_options{.slack = -3}};
            }).find("-3"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              pacer p{rate::per_second(10), pacer_options{.per = -5ns}};
            }).find("-5"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              pacer p{rate::per_second(10), pacer_options{.per = 0ns}};
            }).find("per"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              pacer p{rate::every(std::chrono::hours(24 * 365)), pacer_options{.slack = 1000}};
            }).find("1000"),
            std::string::npos);
}

TEST(Pacer, ExposesItsConfiguration) {
  const pacer p{rate::per_second(100)};
  EXPECT_EQ(p.interval(), 10ms);
  EXPECT_EQ(p.slack(), 10);  // uber's default
  EXPECT_EQ(p.get_rate(), rate::per_second(100));
  EXPECT_EQ(pacer(rate::per_second(100), pacer_options::without_slack()).slack(), 0);
  // The interval is rounded up to whole nanoseconds: never faster than the rate.
  EXPECT_EQ(pacer(rate::per_second(3)).interval(), 333'333'334ns);
}

// uber's TestInitial: the first call goes at once and earns no slack; the rest follow one interval apart.
TEST(Pacer, FirstCallGoesAtOnceAndEarnsNoSlack) {
  for (const auto& options : {pacer_options{}, pacer_options::without_slack()}) {
    pacer p{rate::per_second(10), options};
    const auto t0 = at(1h);  // long after the clock's epoch: idle time before the first call banks nothing
    EXPECT_EQ(ready_at(p, t0), t0);
    EXPECT_EQ(ready_at(p, t0), t0 + 100ms);
    EXPECT_EQ(ready_at(p, t0), t0 + 200ms);
  }
}

// A bug once: try_acquire_at(t, 0) did not start the pacing clock while decide_at(t, 0) did.
TEST(Pacer, ZeroRequestStartsThePacingClockWhicheverMemberMakesIt) {
  pacer by_try{rate::per_second(10)};
  pacer by_decide{rate::per_second(10)};
  const auto t0 = at(1h);
  EXPECT_TRUE(by_try.try_acquire_at(t0, 0));
  EXPECT_TRUE(by_decide.decide_at(t0, 0));
  for (const auto later : {t0 + 50ms, t0 + 300ms, t0 + 5s}) {
    EXPECT_EQ(by_try.time_until_available_at(later, 11), by_decide.time_until_available_at(later, 11));
  }
  EXPECT_EQ(ready_at(by_try, t0 + 300ms, 3), ready_at(by_decide, t0 + 300ms, 3));
}

TEST(Pacer, WithoutSlackRequestsAreEvenlySpaced) {
  pacer p{rate::per_second(100), pacer_options::without_slack()};
  // Saturated demand: slots exactly one interval apart.
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ready_at(p, at(0ms)), at(i * 10ms)) << i;
  // After idling, exactly one caller goes at once and the next waits a whole interval: idle time earns nothing.
  const auto t = at(10s);
  EXPECT_TRUE(p.try_acquire_at(t));
  EXPECT_FALSE(p.try_acquire_at(t));
  EXPECT_EQ(p.time_until_available_at(t), 10ms);
  EXPECT_FALSE(p.try_acquire_at(t + 9ms));
  EXPECT_TRUE(p.try_acquire_at(t + 10ms));
  // A caller late for its slot goes at once but its lateness is not banked.
  EXPECT_TRUE(p.try_acquire_at(t + 35ms));
  EXPECT_FALSE(p.try_acquire_at(t + 44ms));
  EXPECT_TRUE(p.try_acquire_at(t + 45ms));
}

TEST(Pacer, SlackLetsIdleTimePayForALaterBurstOfAtMostSlack) {
  pacer p{rate::per_second(100)};  // slack 10
  EXPECT_TRUE(p.try_acquire_at(at(0ms)));
  // After a long idle the burst is slack + 1: the caller whose slot it is plus `slack` banked slots.
  for (const std::chrono::nanoseconds idle : {std::chrono::nanoseconds(1s), std::chrono::nanoseconds(1h)}) {
    const auto t = at(idle);
    int admitted = 0;
    while (p.try_acquire_at(t)) ++admitted;
    EXPECT_EQ(admitted, 11) << idle.count();
    EXPECT_EQ(p.time_until_available_at(t), 10ms);
    // ...then the pace is even again.
    EXPECT_EQ(ready_at(p, t), t + 10ms);
    EXPECT_EQ(ready_at(p, t), t + 20ms);
  }
}

TEST(Pacer, ShortIdleBanksOnlyTheSlotsItMissed) {
  pacer p{rate::per_second(100)};
  EXPECT_TRUE(p.try_acquire_at(at(0ms)));  // next slot at 10ms
  int admitted = 0;
  while (p.try_acquire_at(at(50ms))) ++admitted;
  EXPECT_EQ(admitted, 5);  // the slots of 10, 20, 30, 40 and 50ms
}

// uber's TestImmediateSlackReapply: rate 1/s, slack 1: after idling, 2 at once and then 1 per second.
TEST(Pacer, SlackIsReappliedAfterEachIdle) {
  pacer p{rate::per_second(1), pacer_options{.slack = 1}};
  EXPECT_EQ(ready_at(p, at(0s)), at(0s));
  const auto t = at(2s);
  EXPECT_EQ(ready_at(p, t), t);
  EXPECT_EQ(ready_at(p, t + 1ns), t + 1ns);
  EXPECT_EQ(ready_at(p, t + 2ns), t + 1s);
  EXPECT_EQ(ready_at(p, t + 3ns), t + 2s);
}

// uber's TestPer: 7 per minute.
TEST(Pacer, PerSetsThePeriodTheRateIsCountedIn) {
  pacer p{rate::per_second(7), pacer_options{.slack = 0, .per = std::chrono::minutes(1)}};
  EXPECT_EQ(p.interval(), 8'571'428'572ns);  // 60s / 7, rounded up
  int by_1s = 0;
  int by_1min = 0;
  int by_2min = 0;
  for (int i = 0; i < 20; ++i) {
    const auto go = ready_at(p, at(0s));
    by_1s += go <= at(1s) ? 1 : 0;
    by_1min += go <= at(60s + 1us) ? 1 : 0;
    by_2min += go <= at(120s + 1us) ? 1 : 0;
  }
  EXPECT_EQ(by_1s, 1);
  EXPECT_EQ(by_1min, 8);
  EXPECT_EQ(by_2min, 15);
}

TEST(Pacer, MultipleSlotsAtOnceFitOnlyWithinTheSlack) {
  pacer p{rate::per_second(100), pacer_options{.slack = 4}};
  EXPECT_TRUE(p.try_acquire_at(at(0ms)));
  EXPECT_FALSE(p.try_acquire_at(at(1s), 6));  // more than slack + 1: never
  EXPECT_EQ(p.time_until_available_at(at(1s), 6), std::chrono::nanoseconds::max());
  const auto never = p.decide_at(at(1s), 6);
  EXPECT_TRUE(never.exceeds_capacity());
  EXPECT_TRUE(p.try_acquire_at(at(1s), 3));
  EXPECT_FALSE(p.try_acquire_at(at(1s), 3));  // only 2 banked slots left
  EXPECT_EQ(p.time_until_available_at(at(1s), 3), 10ms);
  EXPECT_TRUE(p.try_acquire_at(at(1s), 2));
  EXPECT_TRUE(p.try_acquire_at(at(1s), 0));  // n == 0 always fits
  // reserve of n slots returns the start of the last one.
  EXPECT_EQ(ready_at(p, at(1s), 3), at(1s) + 30ms);
}

TEST(Pacer, DecisionReportsLimitRemainingRetryAndReset) {
  pacer p{rate::per_second(100), pacer_options{.slack = 2}};
  auto d = p.decide_at(at(0ms));
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.limit, 3);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 0ns);
  EXPECT_EQ(d.reset_after, 30ms);  // next slot at 10ms, slack fully banked 20ms later
  d = p.decide_at(at(5ms));
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 5ms);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 25ms);
  d = p.decide_at(at(1s));
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 2);
  d = p.decide_at(at(1s), 0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 2);  // n == 0 consumes nothing
}

TEST(Pacer, QueriesConsumeNothing) {
  pacer p{rate::per_second(100), pacer_options::without_slack()};
  EXPECT_EQ(p.time_until_available_at(at(0ms)), 0ns);
  EXPECT_EQ(p.time_until_available_at(at(0ms)), 0ns);
  EXPECT_TRUE(p.try_acquire_at(at(0ms)));
  EXPECT_EQ(p.time_until_available_at(at(4ms)), 6ms);
  EXPECT_EQ(p.time_until_available_at(at(4ms)), 6ms);
  EXPECT_EQ(p.time_until_available_at(at(4ms), 2), std::chrono::nanoseconds::max());  // without slack n = 1 only
}

TEST(Pacer, RetryAfterIsTruthfulBeforeTheFirstAdmission) {
  // A query starts the pacing clock, so waiting as told really admits a multi-slot request.
  pacer p{rate::per_second(100), pacer_options{.slack = 5}};
  const auto wait = p.time_until_available_at(at(1s), 4);
  EXPECT_EQ(wait, 30ms);
  EXPECT_FALSE(p.try_acquire_at(at(1s) + wait - 1ns, 4));
  EXPECT_TRUE(p.try_acquire_at(at(1s) + wait, 4));
}

TEST(Pacer, EarlierTimeNeverOverAdmits) {
  pacer p{rate::per_second(100), pacer_options{.slack = 3}};
  EXPECT_TRUE(p.try_acquire_at(at(10s)));
  // Back in time: nothing is banked, the next slot is still 10ms after the last admission.
  EXPECT_FALSE(p.try_acquire_at(at(5s)));
  EXPECT_EQ(p.time_until_available_at(at(5s)), 5s + 10ms);
  EXPECT_EQ(ready_at(p, at(5s)), at(10s + 10ms));
  EXPECT_TRUE(p.try_acquire_at(at(10s + 20ms)));
  EXPECT_FALSE(p.try_acquire_at(at(10s + 20ms)));
}

TEST(Pacer, InfiniteRateLetsEveryoneThrough) {
  pacer p{rate::inf()};
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(p.try_acquire_at(at(0ms), 1'000'000));
  EXPECT_EQ(ready_at(p, at(5ms), 1'000'000), at(5ms));
  EXPECT_EQ(p.time_until_available_at(at(0ms), 1'000'000), 0ns);
  EXPECT_TRUE(p.decide_at(at(0ms)).admitted);
}

TEST(Pacer, HugeReservationSaturatesInsteadOfOverflowing) {
  pacer p{rate::per_second(1), pacer_options::without_slack()};
  const auto far = ready_at(p, at(0s), std::numeric_limits<std::int64_t>::max() / 2);
  EXPECT_EQ(far.time_since_epoch().count(), std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(p.try_acquire_at(at(1000h)));
  EXPECT_EQ(p.time_until_available_at(at(0s)).count(), std::numeric_limits<std::int64_t>::max());
}

// --- blocking forms, on the manual clock (no real sleeping) ---

TEST(Pacer, TakeSleepsUntilEachCallersSlot) {
  clock_type::reset();
  clock_type::set(at(1s));
  pacer p{rate::per_second(10)};
  std::vector<time_point> got(3);
  std::vector<std::jthread> threads;
  for (auto& g : got) threads.emplace_back([&p, &g] { g = p.take().value(); });
  clock_type::wait_for_sleepers(2);  // one went at once, two sleep towards +100ms and +200ms
  EXPECT_EQ(clock_type::advance(100ms), 1U);
  clock_type::advance(100ms);
  threads.clear();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<time_point>{at(1s), at(1s + 100ms), at(1s + 200ms)}));
}

TEST(Pacer, CancelledTakeGivesItsSlotBackWhenNobodyCameAfter) {
  clock_type::reset();
  pacer p{rate::per_second(10), pacer_options::without_slack()};
  EXPECT_EQ(p.take().value(), at(0ms));
  std::stop_source stop;
  admit::expected<time_point, admit::errc> got = at(-1s);
  std::jthread t([&] { got = p.take(stop.get_token()); });
  clock_type::wait_for_sleepers(1);
  stop.request_stop();
  t.join();
  EXPECT_EQ(got.error(), admit::errc::cancelled);
  // As if the cancelled caller had never come: the next caller gets the 100ms slot.
  EXPECT_EQ(ready_at(p, at(0ms)), at(100ms));
  // Already stopped: returns at once, claims nothing.
  EXPECT_EQ(p.take(stop.get_token()).error(), admit::errc::cancelled);
  EXPECT_EQ(p.acquire(1, stop.get_token()).error(), admit::errc::cancelled);
  EXPECT_EQ(ready_at(p, at(0ms)), at(200ms));
}

TEST(Pacer, CancelledTakeLeavesAGapWhenSomeoneCameAfter) {
  clock_type::reset();
  pacer p{rate::per_second(10), pacer_options::without_slack()};
  EXPECT_EQ(p.take().value(), at(0ms));
  std::stop_source stop;
  admit::expected<time_point, admit::errc> first = at(-1s);
  std::jthread t1([&] { first = p.take(stop.get_token()); });  // slot 100ms
  clock_type::wait_for_sleepers(1);
  std::jthread t2([&] { EXPECT_EQ(p.take().value(), at(200ms)); });  // slot 200ms
  clock_type::wait_for_sleepers(2);
  stop.request_stop();
  t1.join();
  EXPECT_EQ(first.error(), admit::errc::cancelled);
  EXPECT_EQ(ready_at(p, at(0ms)), at(300ms));  // the 100ms slot stays unused; nobody is moved
  clock_type::advance(200ms);
  t2.join();
}

TEST(Pacer, TimedAcquireFailsAtOnceWhenItsSlotIsPastTheDeadline) {
  clock_type::reset();
  pacer p{rate::per_second(10), pacer_options::without_slack()};
  EXPECT_TRUE(p.try_acquire_for(0s));
  EXPECT_EQ(p.try_acquire_for(99ms).error(),
            admit::errc::timeout);  // slot at 100ms: fails without sleeping or claiming
  EXPECT_EQ(p.try_acquire_until(at(-1s)).error(), admit::errc::timeout);  // a past deadline is try_acquire()
  EXPECT_EQ(p.try_acquire_for(-5s).error(), admit::errc::timeout);
  EXPECT_EQ(p.time_until_available_at(at(0ms)), 100ms);  // nothing claimed by the failures
  std::jthread t([&] { EXPECT_TRUE(p.try_acquire_for(100ms)); });
  clock_type::wait_for_sleepers(1);
  clock_type::advance(100ms);
  t.join();
}

TEST(Pacer, AcquireWaitsForAllItsSlots) {
  clock_type::reset();
  pacer p{rate::per_second(10), pacer_options{.slack = 2}};
  EXPECT_TRUE(p.acquire());  // starts pacing at 0
  bool done = false;
  std::jthread t([&] { done = p.acquire(3).has_value(); });  // slots 100, 200, 300ms
  clock_type::wait_for_sleepers(1);
  EXPECT_EQ(clock_type::advance(200ms), 0U);
  EXPECT_EQ(clock_type::advance(100ms), 1U);
  t.join();
  EXPECT_TRUE(done);
}

// --- contention, and the bound ---

// That no limiter starts a thread or a timer, or allocates to decide: tests/limiter_contract_test.cpp, for every
// limiter.

TEST(Pacer, LostCompareAndSwapIsNeverReportedAsARefusal) {
  // Slack large enough for every request: any refusal would be spurious.
  constexpr int threads = 4;
  constexpr int per_thread = 50'000;
  pacer p{rate::per_second(1000), pacer_options{.slack = 1'000'000}};
  ASSERT_TRUE(p.try_acquire_at(at(0s)));  // starts pacing
  const auto t = at(2000s);               // 2'000'000 slots banked, capped to 1'000'000
  std::atomic<int> refused{0};
  std::latch start(threads);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&] {
        start.arrive_and_wait();
        for (int k = 0; k < per_thread; ++k) {
          if (!p.try_acquire_at(t)) refused.fetch_add(1);
        }
      });
    }
  }
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(p.decide_at(t, 0).remaining, 1'000'001 - threads * per_thread);
}

TEST(Pacer, ConcurrentCallersStayWithinTheBound) {
  constexpr int threads = 4;
  constexpr int per_thread = 50'000;
  constexpr std::int64_t slack = 7;
  pacer p{rate::every(1us), pacer_options{.slack = slack}};
  std::atomic<std::int64_t> virtual_now{0};  // caller-supplied times, racing and out of order across threads
  std::atomic<std::int64_t> admitted{0};
  std::latch start(threads);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&, i] {
        std::mt19937_64 rng(static_cast<std::uint64_t>(i) + 1);
        start.arrive_and_wait();
        for (int k = 0; k < per_thread; ++k) {
          const auto now = virtual_now.fetch_add(static_cast<std::int64_t>(rng() % 300));
          const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 2);
          if (p.try_acquire_at(at(std::chrono::nanoseconds{now}), n)) admitted.fetch_add(n);
        }
      });
    }
  }
  const std::int64_t elapsed = virtual_now.load();
  // Every admitted slot starts within [first call - slack * interval, last time]; slots are one interval apart.
  EXPECT_LE(admitted.load(), elapsed / 1000 + slack + 1);
  EXPECT_GT(admitted.load(), elapsed / 1000 / 4);  // and it does admit
}

// Over any window of length w, at most w / interval + slack + 1 callers pass.
TEST(Pacer, PropertyAnyWindowAdmitsAtMostRateTimesWindowPlusSlackPlusOne) {
  std::mt19937_64 rng(2024);
  for (const std::int64_t slack : {0, 1, 5, 20}) {
    pacer p{rate::per_second(1000), pacer_options{.slack = slack}};  // 1ms
    std::vector<std::int64_t> admitted;                              // ns
    std::int64_t now = 0;
    for (int i = 0; i < 20'000; ++i) {
      // Bursty arrivals: mostly tight, sometimes long idle gaps.
      const auto r = rng() % 100;
      now += r < 80 ? static_cast<std::int64_t>(rng() % 200'000) : static_cast<std::int64_t>(rng() % 40'000'000);
      const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 3);
      if (p.try_acquire_at(at(std::chrono::nanoseconds{now}), n)) {
        for (std::int64_t k = 0; k < n; ++k) admitted.push_back(now);
      }
    }
    ASSERT_GT(admitted.size(), 1000U);
    for (const std::int64_t w :
         {std::int64_t{0}, std::int64_t{500'000}, std::int64_t{3'000'000}, std::int64_t{50'000'000}}) {
      std::size_t lo = 0;
      for (std::size_t hi = 0; hi < admitted.size(); ++hi) {
        while (admitted[hi] - admitted[lo] > w) ++lo;
        ASSERT_LE(static_cast<std::int64_t>(hi - lo + 1), w / 1'000'000 + slack + 1)
            << "slack " << slack << " window " << w << " at " << admitted[hi];
      }
    }
  }
}

// A request that cannot be served does not block the requests behind it: more slots than slack + 1 at once are
// refused at once, claiming nothing, so the next caller is served as if it had never come.
TEST(Pacer, AnUnservableRequestDoesNotBlockThoseBehind) {
  using clock = admit::testing::manual_clock;
  clock::reset();
  admit::basic_pacer<clock> p{rate::per_second(10), admit::pacer_options{.slack = 2}};
  EXPECT_FALSE(p.try_acquire_for(0ms, 4));  // more than slack + 1 at once: refused, nothing claimed
  EXPECT_TRUE(p.try_acquire());
}

}  // namespace

}  // namespace pacer_test
