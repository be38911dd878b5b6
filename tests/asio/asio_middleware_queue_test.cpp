// admit::asio::middleware's concurrency layers, waiting: 503 when shed, when the queue is full, at the deadline or
// when closed; a grant served before the deadline; cancellation of a queued request; and a threaded run that asserts
// the concurrency bound.
// Timers on the manual clock: the select reactor compares its timers with Clock::now() each time it runs (epoll's
// would wait for a timerfd armed in real time), so ctx.poll() after manual_clock::advance() fires the due timers.
#define BOOST_ASIO_DISABLE_EPOLL 1

#include "admit/asio/middleware.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admit/testing/manual_clock.hpp"
#include "middleware_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_middleware_queue_test {

namespace {

namespace net = boost::asio;
using admit::asio::testing::start;
using namespace std::chrono_literals;
using admit::asio::rejection_reason;
using manual_clock = admit::testing::manual_clock;

struct request {
  std::string client = "10.0.0.1";
};
using response = std::string;
using outcome = admit::asio::outcome<response>;

// The handler: answers "ok" at once.
net::awaitable<response> ok(request&) { co_return "ok"; }

TEST(AsioMiddleware, LoadSheddingAnswers503AtOnceInsteadOfQueueing) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.load_shed().concurrency_limit(sem);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.run();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::shed);
  EXPECT_EQ(out->rejected().status(), 503u);
  EXPECT_TRUE(out->rejected().fields().empty());
  EXPECT_EQ(sem.waiting(), 0u);
}

TEST(AsioMiddleware, WithoutSheddingARequestQueuesAndIsServedOnRelease) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.poll();
  EXPECT_FALSE(out);
  EXPECT_EQ(sem.waiting(), 1u);
  held.release();
  ctx.run();
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(sem.available(), 0);
}

TEST(AsioMiddleware, AFullQueueAnswers503) {
  net::io_context ctx;
  admit::semaphore sem{1, {.max_waiters = 1}};
  auto held = *sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem);
  request req;
  std::optional<outcome> first, second;
  start(ctx, mw, req, ok, first);
  ctx.poll();
  start(ctx, mw, req, ok, second);
  ctx.poll();
  EXPECT_FALSE(first);
  ASSERT_TRUE(second && !*second);
  EXPECT_EQ(second->rejected().reason, rejection_reason::queue_full);
  EXPECT_EQ(second->rejected().status(), 503u);
  held.release();
  ctx.run();
  EXPECT_TRUE(first && *first);
}

TEST(AsioMiddleware, AClosedSemaphoreAnswers503Closed) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem);
  request req;
  std::optional<outcome> queued, late;
  start(ctx, mw, req, ok, queued);
  ctx.poll();
  sem.close();
  start(ctx, mw, req, ok, late);
  ctx.run();
  ASSERT_TRUE(queued && late);
  EXPECT_EQ(queued->rejected().reason, rejection_reason::closed);
  EXPECT_EQ(late->rejected().reason, rejection_reason::closed);
}

TEST(AsioMiddleware, TheDeadlineCancelsTheWaitAndAnswers503) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_semaphore<manual_clock> sem{1};
  auto held = *sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.deadline<manual_clock>(100ms).concurrency_limit(sem);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.poll();
  EXPECT_EQ(sem.waiting(), 1u);
  manual_clock::advance(99ms);
  ctx.poll();
  EXPECT_FALSE(out);
  manual_clock::advance(1ms);
  ctx.run();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::deadline);
  EXPECT_EQ(out->rejected().status(), 503u);
  EXPECT_EQ(sem.waiting(), 0u);
  held.release();
  EXPECT_EQ(sem.available(), 1);  // nothing leaked to the timed-out waiter
}

TEST(AsioMiddleware, AGrantBeforeTheDeadlineIsServed) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_semaphore<manual_clock> sem{1};
  auto held = *sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.deadline<manual_clock>(100ms).concurrency_limit(sem);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.poll();
  manual_clock::advance(60ms);
  held.release();
  ctx.run();  // the deadline timer is cancelled; run() returns without the clock reaching it
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(sem.available(), 0);
  out.reset();
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioMiddleware, AZeroDeadlineRefusesAtOnceWhenNoPermitIsFree) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_semaphore<manual_clock> sem{1};
  const auto mw = admit::asio::middleware<request, response>{}.deadline<manual_clock>(0ms).concurrency_limit(sem);
  request req;
  std::optional<outcome> first, second;
  start(ctx, mw, req, ok, first);
  start(ctx, mw, req, ok, second);
  ctx.run();
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(*first);
  ASSERT_FALSE(*second);
  EXPECT_EQ(second->rejected().reason, rejection_reason::deadline);
  EXPECT_EQ(sem.waiting(), 0u);
}

TEST(AsioMiddleware, CancellingAQueuedRequestTakesItOutOfTheQueue) {
  using net::cancellation_type;
  for (auto type : {cancellation_type::terminal, cancellation_type::partial, cancellation_type::total}) {
    net::io_context ctx;
    admit::semaphore sem{1};
    auto held = *sem.try_acquire();
    const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem);
    request req;
    std::optional<outcome> cancelled, next;
    net::cancellation_signal signal;
    net::co_spawn(
        ctx,
        [&]() -> net::awaitable<void> {
          // A coroutine passes only terminal cancellation to what it awaits unless it says otherwise.
          co_await net::this_coro::reset_cancellation_state(net::enable_total_cancellation());
          auto out = co_await mw.call(req, ok);
          cancelled.emplace(std::move(out));
        },
        net::bind_cancellation_slot(signal.slot(), net::detached));
    start(ctx, mw, req, ok, next);
    ctx.poll();
    EXPECT_EQ(sem.waiting(), 2u);
    signal.emit(type);
    ctx.poll();
    ASSERT_TRUE(cancelled) << static_cast<int>(type);
    ASSERT_FALSE(*cancelled);
    EXPECT_EQ(cancelled->rejected().reason, rejection_reason::cancelled);
    EXPECT_EQ(sem.waiting(), 1u);
    held.release();  // goes to the next request, not to the cancelled one
    ctx.run();
    ASSERT_TRUE(next && *next);
    next.reset();
    EXPECT_EQ(sem.available(), 1);
  }
}

TEST(AsioMiddleware, CancellingARequestWaitingUnderADeadline) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_semaphore<manual_clock> sem{1};
  auto held = *sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.deadline<manual_clock>(1s).concurrency_limit(sem);
  request req;
  std::optional<outcome> out;
  std::exception_ptr error;
  net::cancellation_signal signal;
  net::co_spawn(
      ctx, [&]() -> net::awaitable<void> { out.emplace(co_await mw.call(req, ok)); },
      net::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e) { error = e; }));
  ctx.poll();
  EXPECT_EQ(sem.waiting(), 1u);
  signal.emit(net::cancellation_type::terminal);
  ctx.poll();
  EXPECT_EQ(sem.waiting(), 0u);
  // The race against the deadline passes the cancellation on to the acquisition, which reports it: the request ends
  // now, without waiting for the deadline, and nothing is held.
  EXPECT_FALSE(error);
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::cancelled);
  held.release();
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioMiddleware, ThreadedRequestsNeverExceedTheConcurrencyLimit) {
  constexpr int threads = 4;
  constexpr int requests = 2000;
  constexpr std::int64_t limit = 3;
  net::io_context ctx;
  admit::semaphore sem{limit, {.max_waiters = 8}};
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem);
  std::atomic<std::int64_t> in_flight{0}, peak{0};
  std::atomic<int> admitted{0}, refused{0};
  auto handler = [&](request&) -> net::awaitable<response> {
    const std::int64_t now = in_flight.fetch_add(1) + 1;
    std::int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    co_await net::post(co_await net::this_coro::executor, net::use_awaitable);
    in_flight.fetch_sub(1);
    co_return "ok";
  };
  for (int i = 0; i < requests; ++i) {
    net::co_spawn(
        ctx,
        [&]() -> net::awaitable<void> {
          request req;
          auto out = co_await mw.call(req, handler);
          if (out) {
            ++admitted;
          } else {
            EXPECT_EQ(out.rejected().reason, rejection_reason::queue_full);
            ++refused;
          }
        },
        net::detached);
  }
  std::vector<std::jthread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&] { ctx.run(); });
  pool.clear();
  EXPECT_EQ(admitted + refused, requests);
  EXPECT_GE(admitted.load(), limit);
  EXPECT_LE(peak.load(), limit);
  EXPECT_EQ(sem.available(), limit);
  EXPECT_EQ(sem.waiting(), 0u);
}

}  // namespace

}  // namespace asio_middleware_queue_test
