// Tests of admit::basic_concurrency_limiter (include/admit/concurrency_limiter.hpp): outcomes and counters exact,
// timed waits on the manual clock (threads wait as its sleepers; the test advances it), the wait histogram within its
// documented error, the waiter bound exact, waiters woken in arrival order, no newcomer taking a permit meant for a
// woken waiter, the event hook once per outcome.
#include "admit/concurrency_limiter.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"
#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace concurrency_limiter_test {

namespace {

using namespace std::chrono_literals;
using clock_type = admit::testing::manual_clock;
using limiter = admit::basic_concurrency_limiter<clock_type>;
using admit::acquire_outcome;
using admit::concurrency_limiter_options;
using admit::errc;
using admit::limiter_event;
using ::testing::HasSubstr;

concurrency_limiter_options options(std::int64_t limit, std::size_t max_waiters = SIZE_MAX,
                                    std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max()) {
  concurrency_limiter_options o;
  o.limit = limit;
  o.max_waiters = max_waiters;
  o.timeout = timeout;
  return o;
}

// Waits (an observer, not a sleep) until `n` requests are queued.
template <class L>
void wait_for_waiting(const L& l, std::size_t n) {
  while (l.waiting() < n) std::this_thread::yield();
}

// Collects events; the hook may be called from several threads.
struct event_log {
  std::mutex mutex;
  std::vector<limiter_event> events;
  limiter::event_handler handler() {
    return [this](const limiter_event& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
    };
  }
  std::vector<limiter_event> take() {
    std::lock_guard lock(mutex);
    return events;
  }
};

class ConcurrencyLimiter : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
};

TEST_F(ConcurrencyLimiter, ImmediateAdmissionsAndRefusalsAreCountedExactly) {
  limiter l{options(2)};
  auto a = l.try_acquire();
  auto b = l.acquire();
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_FALSE(l.try_acquire());
  EXPECT_EQ(l.try_acquire_for(0ms).error(), errc::timeout);  // nothing free, no wait
  EXPECT_EQ(l.try_acquire_until(clock_type::now()).error(), errc::timeout);
  const auto s = l.metrics();
  EXPECT_EQ(s.limit, 2);
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.unavailable, 1u);
  EXPECT_EQ(s.timed_out, 2u);
  EXPECT_EQ(s.rejected + s.cancelled + s.closed + s.exceeds_capacity, 0u);
  EXPECT_EQ(s.wait.count, 2u);
  EXPECT_EQ(s.wait.p99, 0ns);
  EXPECT_EQ(s.wait.max, 0ns);
  a->release();
  EXPECT_EQ(l.in_flight(), 1);
}

TEST_F(ConcurrencyLimiter, RejectsInvalidConfigurationNamingTheValue) {
  EXPECT_THAT(admit::testing::invalid_argument_message([] { limiter l{options(0)}; }), HasSubstr("got 0"));
  EXPECT_THAT(admit::testing::invalid_argument_message([] { limiter l{options(-3)}; }), HasSubstr("got -3"));
  EXPECT_THAT(admit::testing::invalid_argument_message([] { limiter l{options((std::int64_t{1} << 59) + 1)}; }),
              HasSubstr("got 576460752303423489"));
  EXPECT_THAT(admit::testing::invalid_argument_message([] { limiter l{options(1, 1, -1ms)}; }),
              HasSubstr("timeout must not be negative, got -1000000ns"));
  limiter l{options(1)};
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)l.try_acquire(0); }), HasSubstr("got 0"));
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { l.set_limit(0); }), HasSubstr("got 0"));
  EXPECT_EQ(l.metrics().unavailable, 0u);  // an invalid call is not an outcome
}

// The waiter bound is exact (a check written `waiting > max` lets max + 1 wait): max_waiters wait and the next fails
// at once.
TEST_F(ConcurrencyLimiter, MaxWaitersBoundIsExact) {
  limiter l{options(1, 2)};
  auto held = l.try_acquire();
  ASSERT_TRUE(held);
  std::vector<std::future<errc>> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] { return l.acquire().error(); }));
    wait_for_waiting(l, static_cast<std::size_t>(i) + 1);
  }
  const auto third = l.acquire();  // would be the third waiter: rejected without waiting
  EXPECT_EQ(third.error(), errc::queue_full);
  EXPECT_EQ(l.try_acquire_for(1h).error(), errc::queue_full);
  auto s = l.metrics();
  EXPECT_EQ(s.waiting, 2u);
  EXPECT_EQ(s.rejected, 2u);
  held->release();  // to the first waiter, which releases on return: then the second
  for (auto& w : waiters) EXPECT_EQ(w.get(), errc{});
  s = l.metrics();
  EXPECT_EQ(s.admitted, 3u);
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.in_flight, 0);
}

TEST_F(ConcurrencyLimiter, ZeroMaxWaitersNeverWaits) {
  limiter l{options(1, 0)};
  auto held = l.try_acquire();
  EXPECT_EQ(l.acquire().error(), errc::queue_full);
  EXPECT_EQ(l.metrics().rejected, 1u);
  held->release();
  EXPECT_TRUE(l.acquire());  // nothing to wait for: admitted
}

// Release wakes the longest waiting first (waiters kept in an unordered container would be woken in any order): the
// grant order is the arrival order.
TEST_F(ConcurrencyLimiter, WakesWaitersInArrivalOrder) {
  constexpr int n = 6;
  limiter l{options(1)};
  auto held = l.try_acquire();
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto r = l.acquire();
      ASSERT_TRUE(r);
      std::lock_guard lock(mutex);
      order.push_back(i);  // then r's permit goes to the next waiter
    });
    wait_for_waiting(l, static_cast<std::size_t>(i) + 1);
  }
  held->release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(l.metrics().admitted, static_cast<std::uint64_t>(n) + 1);
}

// No newcomer takes the permit between a release and the wake-up of the waiter it is meant for (a release that frees
// the slot and leaves the woken waiter to take it again lets a newcomer in, and limit + 1 run): the release hands the
// permit to the waiter, so no newcomer can take it, however late the waiter wakes.
TEST_F(ConcurrencyLimiter, NoNewcomerTakesAPermitBetweenReleaseAndWakeUp) {
  limiter l{options(1)};
  for (int round = 0; round < 50; ++round) {
    auto held = l.try_acquire();
    ASSERT_TRUE(held);
    std::promise<void> done;
    auto may_return = done.get_future().share();
    auto waiter = std::async(std::launch::async, [&] {
      auto r = l.acquire();
      may_return.wait();  // keeps the permit until the test has tried to steal it
      return r.has_value();
    });
    wait_for_waiting(l, 1);
    held->release();
    // Whether or not the waiter thread has run yet, its permit is taken.
    EXPECT_FALSE(l.try_acquire());
    EXPECT_EQ(l.try_acquire_for(0ms).error(), errc::timeout);
    EXPECT_EQ(l.in_flight(), 1);
    done.set_value();
    EXPECT_TRUE(waiter.get());
    EXPECT_EQ(l.in_flight(), 0);
  }
  const auto s = l.metrics();
  EXPECT_EQ(s.admitted, 100u);
  EXPECT_EQ(s.unavailable, 50u);
  EXPECT_EQ(s.timed_out, 50u);
}

TEST_F(ConcurrencyLimiter, DefaultTimeoutOnTheManualClock) {
  event_log log;
  limiter l{options(1, SIZE_MAX, 100ms), log.handler()};
  auto held = l.try_acquire();
  auto waiter = std::async(std::launch::async, [&] { return l.acquire().error(); });
  clock_type::wait_for_sleepers(1);
  EXPECT_EQ(clock_type::advance(99ms), 0u);
  EXPECT_EQ(l.waiting(), 1u);
  EXPECT_EQ(clock_type::advance(1ms), 1u);
  EXPECT_EQ(waiter.get(), errc::timeout);
  const auto s = l.metrics();
  EXPECT_EQ(s.timed_out, 1u);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.wait.count, 1u);  // only the admission of `held`: timeouts are not admitted waits
  const auto events = log.take();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].outcome, acquire_outcome::timeout);
  EXPECT_EQ(events[1].wait, 100ms);
  held->release();
  EXPECT_EQ(l.in_flight(), 0);
}

TEST_F(ConcurrencyLimiter, RecordsTheWaitOfAGrantedRequest) {
  event_log log;
  limiter l{options(1, SIZE_MAX, 1s), log.handler()};
  auto held = l.try_acquire();
  auto waiter = std::async(std::launch::async, [&] { return l.acquire().has_value(); });
  clock_type::wait_for_sleepers(1);
  EXPECT_EQ(clock_type::advance(30ms), 0u);
  held->release();
  EXPECT_TRUE(waiter.get());
  const auto s = l.metrics();
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.wait.count, 2u);
  EXPECT_EQ(s.wait.max, 30ms);
  EXPECT_EQ(s.wait.p99, 30ms);  // the bucket's bound, lowered to the exact maximum
  EXPECT_EQ(s.wait.p50, 0ns);
  EXPECT_EQ(s.wait.mean, 15ms);
  const auto events = log.take();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].outcome, acquire_outcome::admitted);
  EXPECT_EQ(events[1].wait, 30ms);
}

// Ten waits of 10, 20, ..., 100 ms: the percentiles are the exact nearest-rank values, at most 1/32 above.
TEST_F(ConcurrencyLimiter, WaitPercentilesWithinTheDocumentedError) {
  limiter l{options(1, SIZE_MAX, 1h)};
  for (int k = 1; k <= 10; ++k) {
    auto held = l.try_acquire();
    ASSERT_TRUE(held);
    auto waiter = std::async(std::launch::async, [&] { return l.acquire().has_value(); });
    clock_type::wait_for_sleepers(1);
    clock_type::advance(std::chrono::milliseconds(10 * k));
    held->release();
    ASSERT_TRUE(waiter.get());
  }
  const auto s = l.metrics();
  EXPECT_EQ(s.admitted, 20u);
  EXPECT_EQ(s.wait.count, 20u);  // ten immediate (0) and ten waits
  // Nearest rank over 20 values: p50 is the 10th (0), p90 the 18th (80ms), p99 the 20th (100ms, the exact maximum).
  EXPECT_EQ(s.wait.p50, 0ns);
  const auto within = [](std::chrono::nanoseconds reported, std::chrono::nanoseconds exact) {
    return reported >= exact && static_cast<double>(reported.count()) <
                                    static_cast<double>(exact.count()) * (1 + admit::wait_histogram::relative_error);
  };
  EXPECT_TRUE(within(s.wait.p90, 80ms)) << s.wait.p90.count();
  EXPECT_EQ(s.wait.p99, 100ms);
  EXPECT_EQ(s.wait.max, 100ms);
  EXPECT_EQ(s.wait.mean, 27500us);  // 550ms / 20
  EXPECT_TRUE(within(l.wait_times().percentile(75), 50ms)) << l.wait_times().percentile(75).count();
}

TEST_F(ConcurrencyLimiter, TryAcquireForAndUntilOverrideTheDefaultTimeout) {
  event_log log;
  limiter l{options(1, SIZE_MAX, 0ms), log.handler()};  // acquire() never waits
  auto held = l.try_acquire();
  EXPECT_EQ(l.acquire().error(), errc::timeout);
  auto waiter = std::async(std::launch::async, [&] { return l.try_acquire_for(50ms).error(); });
  clock_type::wait_for_sleepers(1);
  EXPECT_EQ(clock_type::advance(50ms), 1u);
  EXPECT_EQ(waiter.get(), errc::timeout);
  auto until = std::async(std::launch::async, [&] { return l.try_acquire_until(clock_type::now() + 20ms).error(); });
  clock_type::wait_for_sleepers(1);
  held->release();
  EXPECT_EQ(until.get(), errc{});
  const auto events = log.take();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[1].outcome, acquire_outcome::timeout);
  EXPECT_EQ(events[1].wait, 0ns);
  EXPECT_EQ(events[2].outcome, acquire_outcome::timeout);
  EXPECT_EQ(events[2].wait, 50ms);
  EXPECT_EQ(events[3].outcome, acquire_outcome::admitted);
  EXPECT_EQ(events[3].wait, 0ns);  // granted before the clock moved
}

TEST_F(ConcurrencyLimiter, StopTokenCancelsAWait) {
  limiter l{options(1)};
  auto held = l.try_acquire();
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] { return l.acquire(1, stop.get_token()).error(); });
  wait_for_waiting(l, 1);
  stop.request_stop();
  EXPECT_EQ(waiter.get(), errc::cancelled);
  EXPECT_EQ(l.acquire(1, stop.get_token()).error(), errc::cancelled);  // already stopped, nothing free
  const auto s = l.metrics();
  EXPECT_EQ(s.cancelled, 2u);
  EXPECT_EQ(s.waiting, 0u);
  held->release();
  EXPECT_EQ(l.metrics().in_flight, 0);
}

TEST_F(ConcurrencyLimiter, CloseFailsWaitersAndLaterRequests) {
  limiter l{options(1)};
  auto held = l.try_acquire();
  auto waiter = std::async(std::launch::async, [&] { return l.acquire().error(); });
  wait_for_waiting(l, 1);
  l.close();
  EXPECT_TRUE(l.is_closed());
  EXPECT_EQ(waiter.get(), errc::closed);
  EXPECT_EQ(l.acquire().error(), errc::closed);
  EXPECT_FALSE(l.try_acquire());
  const auto s = l.metrics();
  EXPECT_EQ(s.closed, 3u);
  EXPECT_EQ(s.unavailable, 0u);
  EXPECT_EQ(s.in_flight, 1);
  held->release();  // still valid after close
  EXPECT_EQ(l.in_flight(), 0);
}

TEST_F(ConcurrencyLimiter, ExceedsCapacityAtOnce) {
  limiter l{options(2, SIZE_MAX, 1h)};
  EXPECT_EQ(l.acquire(3).error(), errc::exceeds_capacity);
  EXPECT_FALSE(l.try_acquire(3));
  EXPECT_TRUE(l.acquire(2));
  EXPECT_EQ(l.metrics().exceeds_capacity, 2u);
  EXPECT_EQ(clock_type::sleepers(), 0u);
}

TEST_F(ConcurrencyLimiter, SetLimitServesOrFailsWaiters) {
  limiter l{options(1)};
  auto held = l.try_acquire();
  auto small = std::async(std::launch::async, [&] { return l.acquire(1).error(); });
  wait_for_waiting(l, 1);
  l.set_limit(2);  // the new permit goes to the waiter
  EXPECT_EQ(small.get(), errc{});
  EXPECT_EQ(l.limit(), 2);
  auto big = std::async(std::launch::async, [&] { return l.acquire(2).error(); });
  wait_for_waiting(l, 1);
  l.set_limit(1);  // the waiter can never be served now
  EXPECT_EQ(big.get(), errc::exceeds_capacity);
  EXPECT_EQ(l.limit(), 1);
  EXPECT_EQ(l.in_flight(), 1);  // `held`: the waiter's partial grant went back and paid the shrink
  EXPECT_FALSE(l.try_acquire());
  held->release();
  EXPECT_TRUE(l.try_acquire());
  const auto s = l.metrics();
  EXPECT_EQ(s.admitted, 3u);
  EXPECT_EQ(s.exceeds_capacity, 1u);
  EXPECT_EQ(s.unavailable, 1u);
}

// Shrinking below the permits held: the difference is owed and paid by the next releases, never over-admitted.
TEST_F(ConcurrencyLimiter, ShrinkingBelowHeldPermitsIsPaidByReleases) {
  limiter l{options(2)};
  auto a = l.try_acquire();
  auto b = l.try_acquire();
  l.set_limit(1);
  EXPECT_EQ(l.limit(), 1);
  a->release();  // pays the debt
  EXPECT_FALSE(l.try_acquire());
  EXPECT_EQ(l.in_flight(), 1);
  b->release();
  auto c = l.try_acquire();
  EXPECT_TRUE(c);
  EXPECT_FALSE(l.try_acquire());
}

// Every acquisition produces exactly one event, after its counter, with the outcome the caller saw.
TEST_F(ConcurrencyLimiter, EventHookCalledOncePerOutcome) {
  std::vector<limiter_event> seen;
  std::vector<std::uint64_t> counted;  // the counter total the hook observed, to check it runs after counting
  limiter* self = nullptr;
  limiter l{options(1, 1, 10ms), [&](const limiter_event& e) {
              seen.push_back(e);
              const auto s = self->metrics();
              counted.push_back(s.admitted + s.unavailable + s.rejected + s.timed_out + s.cancelled + s.closed +
                                s.exceeds_capacity);
            }};
  self = &l;
  auto held = l.try_acquire();   // admitted
  (void)l.try_acquire();         // unavailable
  (void)l.try_acquire_for(0ms);  // timeout, no wait
  (void)l.acquire(2);            // exceeds_capacity
  std::stop_source stop;
  stop.request_stop();
  (void)l.acquire(1, stop.get_token());  // cancelled
  l.close();
  (void)l.acquire();  // closed
  held->release();
  const std::vector<acquire_outcome> want = {acquire_outcome::admitted,  acquire_outcome::unavailable,
                                             acquire_outcome::timeout,   acquire_outcome::exceeds_capacity,
                                             acquire_outcome::cancelled, acquire_outcome::closed};
  ASSERT_EQ(seen.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(seen[i].outcome, want[i]) << i;
    EXPECT_EQ(counted[i], i + 1) << i;
  }
  EXPECT_EQ(seen[3].n, 2);

  // queue_full, from a separate limiter (one waiter allowed, one queued).
  std::vector<acquire_outcome> outcomes;
  std::mutex mutex;
  limiter q{options(1, 1), [&](const limiter_event& e) {
              std::lock_guard lock(mutex);
              outcomes.push_back(e.outcome);
            }};
  auto h = q.try_acquire();
  auto waiter = std::async(std::launch::async, [&] { return q.acquire().has_value(); });
  wait_for_waiting(q, 1);
  EXPECT_EQ(q.acquire().error(), errc::queue_full);
  h->release();
  EXPECT_TRUE(waiter.get());
  std::lock_guard lock(mutex);
  EXPECT_EQ(outcomes, (std::vector<acquire_outcome>{acquire_outcome::admitted, acquire_outcome::queue_full,
                                                    acquire_outcome::admitted}));
}

// A hook that throws: the caller sees the exception and the permit acquired by the call is released.
TEST_F(ConcurrencyLimiter, ThrowingHookReleasesThePermit) {
  limiter l{options(1), [](const limiter_event&) { throw std::runtime_error("metrics down"); }};
  EXPECT_THROW((void)l.acquire(), std::runtime_error);
  EXPECT_EQ(l.in_flight(), 0);
  EXPECT_THROW((void)l.try_acquire(), std::runtime_error);
  EXPECT_EQ(l.in_flight(), 0);
  EXPECT_EQ(l.metrics().admitted, 2u);
}

// Threads hammer a limiter on the real clock: at no time do more than `limit` hold permits, and the counters add up
// to the calls made. Asserts invariants only (no timing); run under TSan too.
TEST(ConcurrencyLimiterStress, CountersAddUpAndLimitHolds) {
  constexpr int threads = 8;
  constexpr int calls = 3000;
  constexpr std::int64_t limit = 3;
  admit::concurrency_limiter l{options(limit, 4, 200us)};
  std::atomic<std::int64_t> holding{0};
  std::atomic<std::int64_t> peak{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < calls; ++i) {
        std::optional<admit::permit> p;
        switch (rng() % 4) {
          case 0:
            p = l.try_acquire();
            break;
          case 1:
            if (auto r = l.acquire()) p = std::move(*r);
            break;
          case 2:
            if (auto r = l.try_acquire_for(std::chrono::microseconds(rng() % 100))) p = std::move(*r);
            break;
          default:
            if (auto r = l.acquire(2)) p = std::move(*r);
            break;
        }
        if (p && *p) {
          const std::int64_t now = holding.fetch_add(p->count()) + p->count();
          admit::detail::raise_to(peak, now);
          std::this_thread::yield();
          holding.fetch_sub(p->count());
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  const auto s = l.metrics();
  EXPECT_LE(peak.load(), limit);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.admitted + s.unavailable + s.rejected + s.timed_out + s.cancelled + s.closed + s.exceeds_capacity,
            static_cast<std::uint64_t>(threads) * calls);
  EXPECT_EQ(s.wait.count, s.admitted);
  EXPECT_GT(s.admitted, 0u);
}

}  // namespace

}  // namespace concurrency_limiter_test
