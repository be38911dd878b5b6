// admit::asio::async_acquire of admit::basic_adaptive_limiter (completes with the limiter's permit, FIFO, cancellation,
// metrics) and the middleware's adaptive_limit layer: each handler's own latency on the limiter's clock and its outcome
// reported (success for 1xx-4xx, dropped for 503/504 and a handler timeout, ignored for other 5xx, an exception, or a
// request refused inside), waits in the limiter's queue, load shedding and the deadline.
// Timers on the manual clock: the select reactor compares its timers with Clock::now() each time it runs, so
// ctx.poll() after manual_clock::advance() fires the due timers.
#define BOOST_ASIO_DISABLE_EPOLL 1

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/adaptive_limit.hpp"
#include "admit/asio/adaptive_async_acquire.hpp"
#include "admit/asio/middleware.hpp"
#include "admit/semaphore.hpp"
#include "admit/testing/manual_clock.hpp"
#include "middleware_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_middleware_adaptive_test {

namespace {

namespace net = boost::asio;
using admit::asio::testing::start;
using namespace std::chrono_literals;
using admit::limit_sample;
using admit::asio::rejection_reason;
using manual_clock = admit::testing::manual_clock;
using manual_timer = net::basic_waitable_timer<manual_clock>;

// An algorithm that records its samples and keeps the limit it is given.
struct script {
  std::int64_t next = 1;
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
using limiter = admit::basic_adaptive_limiter<scripted_limit, manual_clock>;

struct request {};
// A response with a Beast-style status.
struct response {
  unsigned status = 200;
  unsigned result_int() const noexcept { return status; }
};
using outcome = admit::asio::outcome<response>;

// A handler that takes `d` on the manual clock, then answers `status`.
auto taking(manual_clock::duration d, unsigned status = 200) {
  return [d, status](request&) -> net::awaitable<response> {
    manual_timer t(co_await net::this_coro::executor, d);
    co_await t.async_wait(net::use_awaitable);
    co_return response{status};
  };
}

// ---------------------------------------------------------------------------------------------------------------
// async_acquire

TEST(AsioAdaptiveAsyncAcquire, CompletesWithTheLimitersPermitInOrder) {
  manual_clock::reset();
  auto s = std::make_shared<script>();
  limiter lim{scripted_limit{s}};
  lim.enable_metrics();
  net::io_context ctx;
  auto held = lim.try_acquire();
  std::vector<limiter::permit> got;
  for (int i = 0; i < 2; ++i) {
    admit::asio::async_acquire(lim, net::bind_executor(ctx, [&](boost::system::error_code ec, limiter::permit p) {
                                 EXPECT_FALSE(ec);
                                 got.push_back(std::move(p));
                               }));
  }
  ctx.poll();
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(lim.waiting(), 2u);
  manual_clock::advance(5ms);
  held->record_ignored();
  ctx.poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].acquired_at(), manual_clock::now());  // latency counts from the grant's delivery
  manual_clock::advance(20ms);
  got[0].record_success();
  ASSERT_EQ(s->samples.size(), 1u);
  EXPECT_EQ(s->samples[0].rtt, 20ms);
  ctx.poll();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[1]);
  const auto m = lim.metrics();
  EXPECT_EQ(m.admitted, 3u);
  EXPECT_EQ(m.waited, 2u);
  EXPECT_EQ(m.wait.max, 25ms);
}

TEST(AsioAdaptiveAsyncAcquire, CancellationAndTimeout) {
  manual_clock::reset();
  auto s = std::make_shared<script>();
  limiter lim{scripted_limit{s}};
  lim.enable_metrics();
  net::io_context ctx;
  auto held = lim.try_acquire();
  net::cancellation_signal signal;
  std::optional<boost::system::error_code> cancelled, timed_out;
  admit::asio::async_acquire(
      lim, net::bind_cancellation_slot(signal.slot(),
                                       net::bind_executor(ctx, [&](boost::system::error_code ec, limiter::permit p) {
                                         EXPECT_FALSE(p);
                                         cancelled = ec;
                                       })));
  admit::asio::async_acquire_for(lim, 10ms,
                                 net::bind_executor(ctx, [&](boost::system::error_code ec, limiter::permit p) {
                                   EXPECT_FALSE(p);
                                   timed_out = ec;
                                 }));
  ctx.poll();
  signal.emit(net::cancellation_type::terminal);
  manual_clock::advance(10ms);
  ctx.poll();
  ASSERT_TRUE(cancelled && timed_out);
  EXPECT_EQ(*cancelled, net::error::operation_aborted);
  EXPECT_EQ(*timed_out, boost::system::error_code(std::error_code(admit::errc::timeout)));
  EXPECT_EQ(lim.waiting(), 0u);
  EXPECT_EQ(lim.metrics().cancelled, 1u);
  EXPECT_EQ(lim.metrics().timed_out, 1u);
}

// ---------------------------------------------------------------------------------------------------------------
// The middleware layer

struct fixture {
  std::shared_ptr<script> s = std::make_shared<script>();
  limiter lim{scripted_limit{s}};
  net::io_context ctx;
  request req;
};

TEST(AsioMiddlewareAdaptive, ASuccessfulHandlerIsASampleOfItsLatency) {
  manual_clock::reset();
  fixture f;
  const auto mw = admit::asio::middleware<request, response>{}.adaptive_limit(f.lim);
  std::optional<outcome> out;
  start(f.ctx, mw, f.req, taking(30ms), out);
  f.ctx.poll();
  EXPECT_EQ(f.lim.in_flight(), 1);
  manual_clock::advance(30ms);
  f.ctx.poll();
  ASSERT_TRUE(out && *out);
  ASSERT_EQ(f.s->samples.size(), 1u);
  EXPECT_EQ(f.s->samples[0].rtt, 30ms);
  EXPECT_FALSE(f.s->samples[0].dropped);
  EXPECT_EQ(f.lim.in_flight(), 0);  // the slot goes back when the handler ends
}

TEST(AsioMiddlewareAdaptive, TheStatusDecidesTheOutcome) {
  manual_clock::reset();
  fixture f;
  const auto mw = admit::asio::middleware<request, response>{}.adaptive_limit(f.lim);
  const unsigned statuses[] = {404, 503, 500, 504, 201};
  for (unsigned status : statuses) {
    std::optional<outcome> out;
    start(f.ctx, mw, f.req, taking(1ms, status), out);
    f.ctx.poll();
    manual_clock::advance(1ms);
    f.ctx.poll();
    ASSERT_TRUE(out && *out);
    EXPECT_EQ(f.lim.in_flight(), 0);
  }
  ASSERT_EQ(f.s->samples.size(), 4u);  // 500 is ignored
  EXPECT_FALSE(f.s->samples[0].dropped);
  EXPECT_TRUE(f.s->samples[1].dropped);
  EXPECT_TRUE(f.s->samples[2].dropped);
  EXPECT_FALSE(f.s->samples[3].dropped);
}

TEST(AsioMiddlewareAdaptive, AClassifierOfYourOwn) {
  manual_clock::reset();
  fixture f;
  const auto mw = admit::asio::middleware<request, response>{}.adaptive_limit(f.lim, [](const response& r) {
    return r.status == 429 ? admit::asio::handler_verdict::dropped : admit::asio::handler_verdict::success;
  });
  std::optional<outcome> out;
  start(f.ctx, mw, f.req, taking(1ms, 429), out);
  f.ctx.poll();
  manual_clock::advance(1ms);
  f.ctx.poll();
  ASSERT_EQ(f.s->samples.size(), 1u);
  EXPECT_TRUE(f.s->samples[0].dropped);
}

TEST(AsioMiddlewareAdaptive, TheLatencyIsTheHandlersAloneNotTheWaitInInnerLayers) {
  manual_clock::reset();
  fixture f;
  admit::semaphore sem{1};
  auto busy = sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.adaptive_limit(f.lim).concurrency_limit(sem);
  std::optional<outcome> out;
  start(f.ctx, mw, f.req, taking(10ms), out);
  f.ctx.poll();
  manual_clock::advance(50ms);  // waiting for the semaphore
  busy.reset();
  f.ctx.poll();
  manual_clock::advance(10ms);
  f.ctx.poll();
  ASSERT_TRUE(out && *out);
  ASSERT_EQ(f.s->samples.size(), 1u);
  EXPECT_EQ(f.s->samples[0].rtt, 10ms);
}

TEST(AsioMiddlewareAdaptive, AHandlerTimeoutIsADropAndAnExceptionIsIgnored) {
  manual_clock::reset();
  fixture f;
  const auto mw =
      admit::asio::middleware<request, response>{}.adaptive_limit(f.lim).handler_timeout<manual_clock>(20ms);
  std::optional<outcome> out;
  start(f.ctx, mw, f.req, taking(1h), out);
  f.ctx.poll();
  manual_clock::advance(20ms);
  f.ctx.poll();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::handler_timeout);
  ASSERT_EQ(f.s->samples.size(), 1u);
  EXPECT_TRUE(f.s->samples[0].dropped);
  EXPECT_EQ(f.s->samples[0].rtt, 20ms);
  EXPECT_EQ(f.lim.in_flight(), 0);

  std::optional<outcome> thrown;
  std::exception_ptr error;
  start(
      f.ctx, mw, f.req, [](request&) -> net::awaitable<response> { throw std::runtime_error("boom"); }, thrown, &error);
  f.ctx.poll();
  EXPECT_TRUE(error);
  EXPECT_EQ(f.s->samples.size(), 1u);  // no sample
  EXPECT_EQ(f.lim.in_flight(), 0);
}

TEST(AsioMiddlewareAdaptive, ARequestRefusedInsideFreesItsSlotWithoutASample) {
  manual_clock::reset();
  fixture f;
  admit::semaphore sem{1};
  auto busy = sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.adaptive_limit(f.lim).load_shed().concurrency_limit(sem);
  std::optional<outcome> out;
  start(f.ctx, mw, f.req, taking(1ms), out);
  f.ctx.poll();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::shed);
  EXPECT_EQ(f.lim.in_flight(), 0);
  EXPECT_TRUE(f.s->samples.empty());
}

TEST(AsioMiddlewareAdaptive, AtTheLimitRequestsQueueOrAreShedOrMeetTheDeadline) {
  manual_clock::reset();
  fixture f;  // limit 1
  f.lim.enable_metrics();
  const auto queued = admit::asio::middleware<request, response>{}.adaptive_limit(f.lim);
  const auto shed = admit::asio::middleware<request, response>{}.load_shed().adaptive_limit(f.lim);
  const auto bounded = admit::asio::middleware<request, response>{}.deadline<manual_clock>(5ms).adaptive_limit(f.lim);
  std::optional<outcome> first, second, third, fourth;
  start(f.ctx, queued, f.req, taking(10ms), first);
  start(f.ctx, queued, f.req, taking(10ms), second);
  start(f.ctx, shed, f.req, taking(10ms), third);
  start(f.ctx, bounded, f.req, taking(10ms), fourth);
  f.ctx.poll();
  ASSERT_TRUE(third && !*third);
  EXPECT_EQ(third->rejected().reason, rejection_reason::shed);
  EXPECT_EQ(f.lim.waiting(), 2u);
  manual_clock::advance(5ms);
  f.ctx.poll();
  ASSERT_TRUE(fourth && !*fourth);
  EXPECT_EQ(fourth->rejected().reason, rejection_reason::deadline);
  EXPECT_EQ(f.lim.waiting(), 1u);
  manual_clock::advance(5ms);  // the first ends: its slot goes to the second
  f.ctx.poll();
  ASSERT_TRUE(first && *first);
  EXPECT_FALSE(second);
  manual_clock::advance(10ms);
  f.ctx.poll();
  ASSERT_TRUE(second && *second);
  ASSERT_EQ(f.s->samples.size(), 2u);
  EXPECT_EQ(f.s->samples[1].rtt, 10ms);  // measured from its own handler's start, not from its arrival
  const auto m = f.lim.metrics();        // one outcome per request, though the waiting ones tried first
  EXPECT_EQ(m.admitted, 2u);
  EXPECT_EQ(m.waited, 1u);
  EXPECT_EQ(m.wait.max, 10ms);
  EXPECT_EQ(m.unavailable, 1u);  // shed
  EXPECT_EQ(m.timed_out, 1u);    // the deadline
  EXPECT_EQ(m.rejected + m.cancelled + m.closed, 0u);
}

TEST(AsioMiddlewareAdaptive, AClosedLimiterAnswers503Closed) {
  manual_clock::reset();
  fixture f;
  auto held = f.lim.try_acquire();
  f.lim.close();
  const auto mw = admit::asio::middleware<request, response>{}.adaptive_limit(f.lim);
  std::optional<outcome> out;
  start(f.ctx, mw, f.req, taking(1ms), out);
  f.ctx.poll();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::closed);
}

}  // namespace

}  // namespace asio_middleware_adaptive_test
