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

#include "admit/fixed_window.hpp"
#include "admit/gcra.hpp"
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

}  // namespace
