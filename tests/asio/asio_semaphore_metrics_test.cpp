// A semaphore's metrics through admit::asio: async_acquire counts each outcome once (a grant without queueing waited
// 0, a queued one its wait on the manual clock), and the middleware's concurrency layer counts one outcome per
// request, even when the request first finds no free permit and then waits.
// Timers on the manual clock: the select reactor compares its timers with Clock::now() each time it runs, so
// ctx.poll() after manual_clock::advance() fires the due timers.
#define BOOST_ASIO_DISABLE_EPOLL 1

#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/asio/async_acquire.hpp"
#include "admit/asio/middleware.hpp"
#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_semaphore_metrics_test {

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using admit::acquire_outcome;
using boost::system::error_code;
using manual_clock = admit::testing::manual_clock;
using manual_semaphore = admit::basic_semaphore<manual_clock>;

struct completion_record {
  int calls = 0;
  error_code ec;
  admit::permit permit;
};

auto recorder(net::io_context& ctx, completion_record& r) {
  return net::bind_executor(ctx, [&r](error_code ec, admit::permit p) {
    ++r.calls;
    r.ec = ec;
    r.permit = std::move(p);
  });
}

TEST(AsioSemaphoreMetrics, AsyncAcquireCountsEachOutcomeOnce) {
  manual_clock::reset();
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  manual_semaphore sem{1, {.max_waiters = 1}};
  std::vector<admit::limiter_event> events;
  sem.enable_metrics([&](const admit::limiter_event& e) { events.push_back(e); });

  completion_record first, waited, rejected, timed_out, cancelled;
  admit::asio::async_acquire(sem, recorder(ctx, first));
  ctx.poll();
  ASSERT_FALSE(first.ec);
  admit::asio::async_acquire(sem, recorder(ctx, waited));
  admit::asio::async_acquire(sem, recorder(ctx, rejected));
  ctx.poll();
  EXPECT_TRUE(rejected.ec == admit::errc::queue_full);
  manual_clock::advance(30ms);
  first.permit.release();
  ctx.poll();
  ASSERT_FALSE(waited.ec);
  admit::asio::async_acquire_for(sem, 10ms, 1, recorder(ctx, timed_out));
  ctx.poll();
  manual_clock::advance(10ms);
  ctx.poll();
  EXPECT_TRUE(timed_out.ec == admit::errc::timeout);
  net::cancellation_signal signal;
  admit::asio::async_acquire(sem, net::bind_cancellation_slot(signal.slot(), recorder(ctx, cancelled)));
  ctx.poll();
  signal.emit(net::cancellation_type::terminal);
  ctx.poll();
  EXPECT_EQ(cancelled.ec, net::error::operation_aborted);

  const auto s = sem.metrics();
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.waited, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.timed_out, 1u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.wait.max, 30ms);
  EXPECT_EQ(s.in_flight, 1);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].outcome, acquire_outcome::admitted);
  EXPECT_EQ(events[0].wait, 0ns);  // granted without queueing
  EXPECT_EQ(events[1].outcome, acquire_outcome::queue_full);
  EXPECT_EQ(events[2].outcome, acquire_outcome::admitted);
  EXPECT_EQ(events[2].wait, 30ms);
  EXPECT_EQ(events[3].outcome, acquire_outcome::timeout);
  EXPECT_EQ(events[4].outcome, acquire_outcome::cancelled);
}

struct request {};
using response = std::string;
using outcome = admit::asio::outcome<response>;
net::awaitable<response> ok(request&) { co_return "ok"; }

template <class Middleware>
void start(net::io_context& ctx, const Middleware& mw, request& req, std::optional<outcome>& out) {
  net::co_spawn(
      ctx, [&mw, &req, &out]() -> net::awaitable<void> { out.emplace(co_await mw.call(req, ok)); }, net::detached);
}

TEST(AsioSemaphoreMetrics, TheMiddlewareCountsOneOutcomePerRequest) {
  manual_clock::reset();
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);  // keeps poll() working between the phases
  manual_semaphore sem{1, {.max_waiters = 1}};
  sem.enable_metrics();
  const auto mw = admit::asio::middleware<request, response>{}.deadline<manual_clock>(100ms).concurrency_limit(sem);
  request r1, r2, r3, r4;
  std::optional<outcome> o1, o2, o3, o4;
  start(ctx, mw, r1, o1);  // admitted at once
  ctx.poll();
  ASSERT_TRUE(o1 && *o1);
  start(ctx, mw, r2, o2);  // waits, then admitted after 40 ms
  ctx.poll();
  start(ctx, mw, r3, o3);  // queue full
  ctx.poll();
  ASSERT_TRUE(o3);
  ASSERT_FALSE(*o3);
  EXPECT_EQ(o3->rejected().reason, admit::asio::rejection_reason::queue_full);
  manual_clock::advance(40ms);
  o1->release();
  ctx.poll();
  ASSERT_TRUE(o2 && *o2);
  start(ctx, mw, r4, o4);  // waits until the deadline
  ctx.poll();
  manual_clock::advance(100ms);
  ctx.poll();
  ASSERT_TRUE(o4 && !*o4);
  EXPECT_EQ(o4->rejected().reason, admit::asio::rejection_reason::deadline);

  auto s = sem.metrics();
  EXPECT_EQ(s.admitted, 2u);  // not also "unavailable" for the request that tried first and then waited
  EXPECT_EQ(s.unavailable, 0u);
  EXPECT_EQ(s.waited, 1u);
  EXPECT_EQ(s.wait.max, 40ms);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.timed_out, 1u);  // the deadline is a timeout, not a cancellation
  EXPECT_EQ(s.cancelled, 0u);

  const auto shed = admit::asio::middleware<request, response>{}.load_shed().concurrency_limit(sem);
  request r5;
  std::optional<outcome> o5;
  start(ctx, shed, r5, o5);
  ctx.poll();
  ASSERT_TRUE(o5 && !*o5);
  EXPECT_EQ(sem.metrics().unavailable, 1u);  // shed: found no free permit and did not wait
}

// The metrics event hook may throw: the exception leaves io_context::run() with the granted permit given back and
// the operation (and its handler) freed.
TEST(AsioSemaphoreMetrics, AThrowingEventHookLeaksNoPermit) {
  net::io_context ctx;
  admit::semaphore sem{1};
  sem.enable_metrics([](const admit::limiter_event& e) {
    if (e.outcome == acquire_outcome::admitted) throw std::runtime_error("hook");
  });
  int calls = 0;
  admit::asio::async_acquire(sem, net::bind_executor(ctx, [&calls](error_code, admit::permit) { ++calls; }));
  EXPECT_THROW(ctx.run(), std::runtime_error);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(sem.available(), 1);
}

}  // namespace

}  // namespace asio_semaphore_metrics_test
