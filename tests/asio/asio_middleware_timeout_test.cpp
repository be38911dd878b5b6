// admit::asio::middleware's handler_timeout layer: a handler past its limit is cancelled (it observes the
// cancellation and ends; it is not left running), the request is refused 504 (or 503) and every permit it held is
// back at once; a handler within its limit is answered as without the layer; exceptions propagate; bad settings throw.
// Timers on the manual clock: the select reactor compares its timers with Clock::now() each time it runs, so
// ctx.poll() after manual_clock::advance() fires the due timers.
#define BOOST_ASIO_DISABLE_EPOLL 1

#include <gtest/gtest.h>

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include "admit/asio/middleware.hpp"
#include "admit/semaphore.hpp"
#include "admit/testing/manual_clock.hpp"
#include "middleware_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_middleware_timeout_test {

namespace {

namespace net = boost::asio;
using admit::asio::testing::start;
using namespace std::chrono_literals;
using admit::asio::rejection_reason;
using manual_clock = admit::testing::manual_clock;
using manual_timer = net::basic_waitable_timer<manual_clock>;

struct request {};
using response = std::string;
using outcome = admit::asio::outcome<response>;

// What a handler went through.
struct handler_log {
  bool started = false;
  bool finished = false;   // it got past its wait
  bool cancelled = false;  // its wait ended with operation_aborted
  bool ended = false;      // its coroutine ended (either way)
};

// A handler that waits `d` on the manual clock, then answers "done".
auto sleeper(handler_log& log, manual_clock::duration d) {
  return [&log, d](request&) -> net::awaitable<response> {
    log.started = true;
    manual_timer t(co_await net::this_coro::executor, d);
    try {
      co_await t.async_wait(net::use_awaitable);
      log.finished = true;
    } catch (const boost::system::system_error& e) {
      log.cancelled = e.code() == net::error::operation_aborted;
      log.ended = true;
      throw;
    }
    log.ended = true;
    co_return "done";
  };
}

TEST(AsioMiddlewareTimeout, ASlowHandlerIsCancelledAndAnswered504WithItsPermitsBack) {
  manual_clock::reset();
  net::io_context ctx;
  admit::semaphore sem{2};
  const auto mw =
      admit::asio::middleware<request, response>{}.concurrency_limit(sem).handler_timeout<manual_clock>(100ms);
  request req;
  handler_log log;
  std::optional<outcome> out;
  start(ctx, mw, req, sleeper(log, 1h), out);
  ctx.poll();
  EXPECT_TRUE(log.started);
  EXPECT_EQ(sem.available(), 1);  // held while the handler runs
  manual_clock::advance(99ms);
  ctx.poll();
  EXPECT_FALSE(out);
  EXPECT_FALSE(log.ended);
  manual_clock::advance(1ms);
  ctx.poll();
  ASSERT_TRUE(out);
  ASSERT_FALSE(*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::handler_timeout);
  EXPECT_EQ(out->rejected().status(), 504u);
  EXPECT_TRUE(out->rejected().fields().empty());
  EXPECT_EQ(sem.available(), 2);  // released when the answer was produced, not when the outcome dies
  EXPECT_TRUE(log.cancelled);     // the handler observed the cancellation...
  EXPECT_TRUE(log.ended);         // ...and ended before the answer
  EXPECT_FALSE(log.finished);
  EXPECT_EQ(ctx.poll(), 0u);  // nothing left running
  EXPECT_TRUE(ctx.stopped());
}

TEST(AsioMiddlewareTimeout, TheStatusCanBe503) {
  manual_clock::reset();
  net::io_context ctx;
  const auto mw = admit::asio::middleware<request, response>{}.handler_timeout<manual_clock>(10ms, 503);
  request req;
  handler_log log;
  std::optional<outcome> out;
  start(ctx, mw, req, sleeper(log, 1s), out);
  ctx.poll();
  manual_clock::advance(10ms);
  ctx.poll();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().status(), 503u);
  EXPECT_EQ(admit::asio::to_string(out->rejected().reason), "handler_timeout");
}

TEST(AsioMiddlewareTimeout, AHandlerWithinItsLimitIsAnsweredAndKeepsItsPermits) {
  manual_clock::reset();
  net::io_context ctx;
  admit::semaphore sem{1};
  const auto mw =
      admit::asio::middleware<request, response>{}.handler_timeout<manual_clock>(100ms).concurrency_limit(sem);
  request req;
  handler_log log;
  std::optional<outcome> out;
  start(ctx, mw, req, sleeper(log, 99ms), out);
  ctx.poll();
  manual_clock::advance(99ms);
  ctx.poll();
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(out->response(), "done");
  EXPECT_EQ(sem.available(), 0);  // the permit travels with the outcome, as without the layer
  out->release();
  EXPECT_EQ(sem.available(), 1);
  manual_clock::advance(1h);
  EXPECT_EQ(ctx.poll(), 0u);  // the timer was cancelled with the race
}

TEST(AsioMiddlewareTimeout, AHandlerExceptionPropagatesWithThePermitsReleased) {
  manual_clock::reset();
  net::io_context ctx;
  admit::semaphore sem{1};
  const auto mw =
      admit::asio::middleware<request, response>{}.concurrency_limit(sem).handler_timeout<manual_clock>(100ms);
  request req;
  std::optional<outcome> out;
  std::exception_ptr error;
  start(
      ctx, mw, req, [](request&) -> net::awaitable<response> { throw std::runtime_error("boom"); }, out, &error);
  ctx.poll();
  EXPECT_FALSE(out);
  ASSERT_TRUE(error);
  EXPECT_THROW(std::rethrow_exception(error), std::runtime_error);
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioMiddlewareTimeout, InvalidSettingsThrow) {
  const auto mw = admit::asio::middleware<request, response>{};
  EXPECT_THROW((void)mw.handler_timeout(0ms), std::invalid_argument);
  EXPECT_THROW((void)mw.handler_timeout(-1ms), std::invalid_argument);
  EXPECT_THROW((void)mw.handler_timeout(1s, 500), std::invalid_argument);
  EXPECT_NO_THROW((void)mw.handler_timeout(std::chrono::hours::max()));
}

}  // namespace

}  // namespace asio_middleware_timeout_test
