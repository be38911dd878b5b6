// admit::asio::async_wait over every rate limiter, on the manual clock (timers fire when the test advances it).
// The select reactor compares timers with Clock::now() whenever it runs; see asio_async_acquire_test.cpp.
#define BOOST_ASIO_DISABLE_EPOLL 1

#include "admit/asio/async_wait.hpp"

#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/fixed_window.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/pacer.hpp"
#include "admit/sliding_log.hpp"
#include "admit/sliding_window.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"
#include "admit/warmup.hpp"

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using clock_type = admit::testing::manual_clock;

struct result {
  int calls = 0;
  error_code ec;
};

auto record(net::io_context& ctx, result& r) {
  return net::bind_executor(ctx, [&r](error_code ec) {
    ++r.calls;
    r.ec = ec;
  });
}

// Drives one waiter on `limiter` whose capacity is spent: it completes exactly when the clock reaches `expected`.
template <class Limiter>
void expect_wait_completes_after(Limiter& limiter, std::chrono::nanoseconds expected) {
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  result r;
  admit::asio::async_wait(limiter, 1, record(ctx, r));
  EXPECT_EQ(r.calls, 0);  // never inside the initiating call
  ctx.poll();
  clock_type::advance(expected - 1ns);
  ctx.poll();
  EXPECT_EQ(r.calls, 0) << "completed early";
  clock_type::advance(1ns);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(r.calls, 1);
  EXPECT_FALSE(r.ec) << r.ec.message();
}

TEST(AsioAsyncWait, TokenBucketWaitsForItsReservation) {
  clock_type::reset();
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 1};
  ASSERT_TRUE(bucket.try_acquire());
  expect_wait_completes_after(bucket, 100ms);
}

TEST(AsioAsyncWait, GcraRetriesWhenItsCapacityComesBack) {
  clock_type::reset();
  admit::basic_gcra<clock_type> limiter{admit::rate::per_second(10), 1};
  ASSERT_TRUE(limiter.try_acquire());
  expect_wait_completes_after(limiter, 100ms);
  EXPECT_FALSE(limiter.try_acquire());  // the waiter took the token it waited for
}

TEST(AsioAsyncWait, WindowsAndLogWaitForTheirWindow) {
  clock_type::reset();
  admit::basic_fixed_window<clock_type> fixed{1, 1s};
  ASSERT_TRUE(fixed.try_acquire());
  expect_wait_completes_after(fixed, 1s);
  clock_type::reset();
  admit::basic_sliding_log<clock_type> log{1, 1s};
  ASSERT_TRUE(log.try_acquire());
  expect_wait_completes_after(log, 1s);
}

TEST(AsioAsyncWait, PacerAndWarmupWaitForTheirSlot) {
  clock_type::reset();
  admit::basic_pacer<clock_type> pacer{admit::rate::per_second(10)};
  ASSERT_TRUE(pacer.try_acquire());
  expect_wait_completes_after(pacer, 100ms);
  clock_type::reset();
  admit::basic_warmup<clock_type> warmup{admit::rate::per_second(10), 1s};
  ASSERT_TRUE(warmup.try_acquire());
  const auto expected = warmup.time_until_available(1);
  ASSERT_GT(expected, 0ns);
  expect_wait_completes_after(warmup, expected);
}

TEST(AsioAsyncWait, ExceedingTheBurstFailsAtOnceThroughTheExecutor) {
  clock_type::reset();
  net::io_context ctx;
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 2};
  admit::basic_gcra<clock_type> gcra{admit::rate::per_second(10), 2};
  result a, b;
  admit::asio::async_wait(bucket, 3, record(ctx, a));
  admit::asio::async_wait(gcra, 3, record(ctx, b));
  EXPECT_EQ(a.calls + b.calls, 0);
  ctx.run();
  EXPECT_TRUE(a.ec == admit::errc::exceeds_capacity);
  EXPECT_TRUE(b.ec == admit::errc::exceeds_capacity);
}

// A negative count throws from the initiating call (in every build), starts nothing and gives nothing back.
TEST(AsioAsyncWait, NegativeCountThrowsAtInitiation) {
  clock_type::reset();
  net::io_context ctx;
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 1};
  admit::basic_gcra<clock_type> gcra{admit::rate::per_second(10), 1};
  ASSERT_TRUE(bucket.try_acquire());
  ASSERT_TRUE(gcra.try_acquire());
  result a, b;
  EXPECT_THROW(admit::asio::async_wait(bucket, -1, record(ctx, a)), std::invalid_argument);
  EXPECT_THROW(admit::asio::async_wait(gcra, -3, record(ctx, b)), std::invalid_argument);
  ctx.run();
  EXPECT_EQ(a.calls + b.calls, 0);
  EXPECT_FALSE(bucket.try_acquire());
  EXPECT_FALSE(gcra.try_acquire());
}

// n == 0 on a token bucket in debt waits until the debt is paid (x/time/rate WaitN(ctx, 0)).
TEST(AsioAsyncWait, ZeroOnATokenBucketInDebtWaitsForTheDebt) {
  clock_type::reset();
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 1};
  ASSERT_TRUE(bucket.reserve(1).ok());
  ASSERT_TRUE(bucket.reserve(1).ok());  // 100 ms of debt
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  result r;
  admit::asio::async_wait(bucket, 0, record(ctx, r));
  ctx.poll();
  clock_type::advance(99ms);
  ctx.poll();
  EXPECT_EQ(r.calls, 0) << "completed early";
  clock_type::advance(1ms);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(r.calls, 1);
  EXPECT_FALSE(r.ec) << r.ec.message();
}

TEST(AsioAsyncWait, CancellingATokenBucketWaitGivesTheTokensBack) {
  clock_type::reset();
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 1};
  ASSERT_TRUE(bucket.try_acquire());
  net::cancellation_signal signal;
  result r;
  admit::asio::async_wait(bucket, 1, net::bind_cancellation_slot(signal.slot(), record(ctx, r)));
  ctx.poll();
  EXPECT_LT(bucket.tokens(), 0.0);  // reserved into the future
  signal.emit(net::cancellation_type::total);
  ctx.poll();
  EXPECT_EQ(r.ec, net::error::operation_aborted);
  EXPECT_DOUBLE_EQ(bucket.tokens(), 0.0);  // given back
  clock_type::advance(100ms);
  EXPECT_TRUE(bucket.try_acquire());  // as if the waiter had never come
}

// A wait whose context is destroyed while it waits gives its tokens back, as a cancellation does (they stayed spent:
// the bucket stayed in debt for a caller that never came).
TEST(AsioAsyncWait, ATokenBucketWaitDestroyedWithItsContextGivesTheTokensBack) {
  clock_type::reset();
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 1};
  ASSERT_TRUE(bucket.try_acquire());
  result r;
  {
    net::io_context ctx;
    auto work = net::make_work_guard(ctx);
    admit::asio::async_wait(bucket, 1, record(ctx, r));
    ctx.poll();
    EXPECT_LT(bucket.tokens(), 0.0);  // reserved into the future
  }
  EXPECT_EQ(r.calls, 0);
  EXPECT_DOUBLE_EQ(bucket.tokens(), 0.0);  // given back
  clock_type::advance(100ms);
  EXPECT_TRUE(bucket.try_acquire());  // as if the waiter had never come
}

TEST(AsioAsyncWait, Coroutine) {
  clock_type::reset();
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  admit::basic_gcra<clock_type> limiter{admit::rate::per_second(1), 1};
  int admitted = 0;
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        for (int i = 0; i < 3; ++i) {
          co_await admit::asio::async_wait(limiter, 1, net::use_awaitable);
          ++admitted;
        }
      },
      net::detached);
  ctx.poll();
  EXPECT_EQ(admitted, 1);
  clock_type::advance(1s);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(admitted, 2);
  clock_type::advance(1s);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(admitted, 3);
}

// --- the waiter bound and the metrics ---

// On a limiter whose capacity is spent, with max_waiters 2: two waits hold the two places while their timers wait; a
// third completes with queue_full (through the executor, counted once); when one leaves (cancelled), the next can
// wait. start(token) starts one async_wait on the limiter.
template <class Limiter, class Start>
void expect_bounded(Limiter& limiter, Start start) {
  limiter.set_max_waiters(2);
  limiter.enable_metrics();
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  net::cancellation_signal leave_first, leave_second, leave_fourth;
  result first, second, third, fourth;
  start(net::bind_cancellation_slot(leave_first.slot(), record(ctx, first)));
  start(net::bind_cancellation_slot(leave_second.slot(), record(ctx, second)));
  ctx.poll();
  EXPECT_EQ(limiter.waiting(), 2U);
  start(record(ctx, third));
  EXPECT_EQ(third.calls, 0);  // never inside the initiating call
  ctx.poll();
  EXPECT_EQ(third.calls, 1);
  EXPECT_TRUE(third.ec == admit::errc::queue_full) << third.ec.message();
  EXPECT_EQ(limiter.waiting(), 2U);

  leave_first.emit(net::cancellation_type::terminal);
  ctx.poll();
  EXPECT_EQ(first.ec, net::error::operation_aborted);
  EXPECT_EQ(limiter.waiting(), 1U);
  start(net::bind_cancellation_slot(leave_fourth.slot(), record(ctx, fourth)));
  ctx.poll();
  EXPECT_EQ(fourth.calls, 0) << fourth.ec.message();  // waits: a place was free
  EXPECT_EQ(limiter.waiting(), 2U);

  leave_second.emit(net::cancellation_type::terminal);
  leave_fourth.emit(net::cancellation_type::terminal);
  ctx.poll();
  EXPECT_EQ(second.calls + fourth.calls, 2);
  EXPECT_EQ(limiter.waiting(), 0U);
  const admit::limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.rejected, 1U);
  EXPECT_EQ(s.cancelled, 3U);
  EXPECT_EQ(s.admitted, 0U);
}

template <class Limiter>
void expect_bounded(Limiter& limiter) {
  expect_bounded(limiter, [&limiter](auto&& token) { admit::asio::async_wait(limiter, 1, std::move(token)); });
}

TEST(AsioAsyncWait, BeyondMaxWaitersCompletesWithQueueFull) {
  clock_type::reset();
  {
    admit::basic_token_bucket<clock_type> l{admit::rate::per_second(10), 1};
    ASSERT_TRUE(l.try_acquire());
    expect_bounded(l);
  }
  {
    admit::basic_gcra<clock_type> l{admit::rate::per_second(10), 1};
    ASSERT_TRUE(l.try_acquire());
    expect_bounded(l);
  }
  {
    admit::basic_pacer<clock_type> l{admit::rate::per_second(10)};
    ASSERT_TRUE(l.try_acquire());
    expect_bounded(l);
  }
  {
    admit::basic_warmup<clock_type> l{admit::rate::per_second(10), 1s};
    ASSERT_TRUE(l.try_acquire());
    expect_bounded(l);
  }
  {
    admit::basic_fixed_window<clock_type> l{1, 1s};
    ASSERT_TRUE(l.try_acquire());
    expect_bounded(l);
  }
  {
    admit::basic_sliding_window<clock_type> l{1, 1s};
    ASSERT_TRUE(l.try_acquire());
    expect_bounded(l);
  }
  {
    admit::basic_sliding_log<clock_type> l{1, 1s};
    ASSERT_TRUE(l.try_acquire());
    expect_bounded(l);
  }
  {
    admit::keyed<admit::basic_gcra<clock_type>> l{admit::rate::per_second(10), 1};
    ASSERT_TRUE(l.try_acquire(std::string("k")));
    expect_bounded(l, [&l](auto&& token) { admit::asio::async_wait(l, "k", 1, std::move(token)); });
  }
}

// A request admitted at once holds no place: with max_waiters 0 it still completes admitted.
TEST(AsioAsyncWait, AdmittedAtOnceIsNeverRefusedForTheBound) {
  clock_type::reset();
  net::io_context ctx;
  admit::basic_gcra<clock_type> gcra{admit::rate::per_second(10), 1};
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 1};
  gcra.set_max_waiters(0);
  bucket.set_max_waiters(0);
  result a, b, c, d;
  admit::asio::async_wait(gcra, 1, record(ctx, a));
  admit::asio::async_wait(bucket, 1, record(ctx, b));
  admit::asio::async_wait(gcra, 1, record(ctx, c));    // would have to wait
  admit::asio::async_wait(bucket, 1, record(ctx, d));  // would have to wait
  ctx.run();
  EXPECT_FALSE(a.ec) << a.ec.message();
  EXPECT_FALSE(b.ec) << b.ec.message();
  EXPECT_TRUE(c.ec == admit::errc::queue_full);
  EXPECT_TRUE(d.ec == admit::errc::queue_full);
  EXPECT_DOUBLE_EQ(bucket.tokens(), 0.0);  // the refused wait reserved nothing
}

// One outcome per operation, whatever it tried while waiting: the admission after a wait records the time from the
// initiation to the admission; admitted at once records 0; n above the burst is exceeds_capacity.
TEST(AsioAsyncWait, EachOperationCountsOneOutcome) {
  clock_type::reset();
  admit::basic_gcra<clock_type> gcra{admit::rate::per_second(10), 1};
  admit::basic_token_bucket<clock_type> bucket{admit::rate::per_second(10), 1};
  std::vector<admit::limiter_event> events;
  gcra.enable_metrics([&](const admit::limiter_event& e) { events.push_back(e); });
  bucket.enable_metrics();
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  result at_once, later, too_big, bucket_later;
  admit::asio::async_wait(gcra, 1, record(ctx, at_once));
  admit::asio::async_wait(gcra, 1, record(ctx, later));
  admit::asio::async_wait(gcra, 2, record(ctx, too_big));
  ASSERT_TRUE(bucket.try_acquire());
  admit::asio::async_wait(bucket, 1, record(ctx, bucket_later));
  ctx.poll();
  EXPECT_EQ(gcra.waiting(), 1U);
  EXPECT_EQ(bucket.waiting(), 1U);
  clock_type::advance(100ms);
  ASSERT_TRUE(gcra.try_acquire());  // takes the token first: the waiter's attempt is refused, and it waits again
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(later.calls, 0);
  EXPECT_EQ(bucket_later.calls, 1);
  clock_type::advance(100ms);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(later.calls, 1);
  EXPECT_FALSE(later.ec) << later.ec.message();
  ASSERT_EQ(events.size(), 4U);  // the refused attempt while waiting counts nothing
  EXPECT_EQ(events[0].outcome, admit::acquire_outcome::admitted);
  EXPECT_EQ(events[0].wait, 0ns);
  EXPECT_EQ(events[1].outcome, admit::acquire_outcome::exceeds_capacity);
  EXPECT_EQ(events[2].outcome, admit::acquire_outcome::admitted);  // the try_acquire
  EXPECT_EQ(events[3].outcome, admit::acquire_outcome::admitted);
  EXPECT_EQ(events[3].wait, 200ms);
  EXPECT_EQ(gcra.metrics().admitted, 3U);
  EXPECT_EQ(gcra.metrics().unavailable, 0U);
  EXPECT_EQ(gcra.metrics().waited, 1U);
  EXPECT_EQ(gcra.waiting(), 0U);
  EXPECT_EQ(bucket.metrics().admitted, 2U);  // the try_acquire and the wait
  EXPECT_EQ(bucket.metrics().waited, 1U);
  EXPECT_EQ(bucket.metrics().wait.count, 2U);
}

// A keyed limiter's key waits for its own capacity, and counts in the keyed limiter's metrics.
TEST(AsioAsyncWait, KeyedWaitsForItsKey) {
  clock_type::reset();
  admit::keyed<admit::basic_gcra<clock_type>> per_key{admit::rate::per_second(10), 1};
  per_key.enable_metrics();
  ASSERT_TRUE(per_key.try_acquire(std::string("a")));
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  result a, b;
  admit::asio::async_wait(per_key, std::string("a"), 1, record(ctx, a));
  admit::asio::async_wait(per_key, "b", 1, record(ctx, b));  // another key: at once
  ctx.poll();
  EXPECT_EQ(b.calls, 1);
  EXPECT_EQ(a.calls, 0);
  clock_type::advance(100ms);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(a.calls, 1);
  EXPECT_FALSE(a.ec) << a.ec.message();
  EXPECT_EQ(per_key.metrics().admitted, 3U);
  EXPECT_EQ(per_key.metrics().waited, 1U);
}

}  // namespace
