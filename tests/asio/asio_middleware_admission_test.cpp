// admit::asio::middleware's admission layer: the priority class taken from the request, the permit held until the
// outcome is released (and released when the handler throws), the share rule between queued requests, 503 for
// queue_full / exceeds_capacity / shed / deadline, and one outcome per request in the admission's metrics.
// Timers on the manual clock: ctx.poll() after manual_clock::advance() fires the due timers (the select reactor).
#define BOOST_ASIO_DISABLE_EPOLL 1

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/admission.hpp"
#include "admit/asio/middleware.hpp"
#include "admit/testing/manual_clock.hpp"
#include "middleware_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_middleware_admission_test {

namespace {

namespace net = boost::asio;
using admit::asio::testing::start;
using namespace std::chrono_literals;
using admit::asio::rejection_reason;
using manual_clock = admit::testing::manual_clock;
using manual_admission = admit::basic_admission<manual_clock>;

struct request {
  std::string path = "/";
  std::size_t priority = 0;  // as a server would take it from a header or the route
};
using response = std::string;
using outcome = admit::asio::outcome<response>;

auto priority_of = [](const request& r) -> std::size_t { return r.priority; };

net::awaitable<response> ok(request& r) { co_return "ok " + r.path; }

class AsioMiddlewareAdmission : public ::testing::Test {
 protected:
  void SetUp() override { manual_clock::reset(); }
};

TEST_F(AsioMiddlewareAdmission, ThePriorityComesFromTheRequestAndThePermitIsHeldUntilRelease) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 4, .classes = {{"interactive", 0.5}, {"batch", 0.5}}}};
  const auto mw = admit::asio::middleware<request, response>{}.admission(adm, priority_of, 2);
  std::int64_t batch_inside = -1;
  auto handler = [&](request& r) -> net::awaitable<response> {
    co_await net::post(ctx, net::use_awaitable);
    batch_inside = adm.in_flight(1);
    co_return "ok " + r.path;
  };
  request req{"/report", 1};
  std::optional<outcome> out;
  start(ctx, mw, req, handler, out);
  ctx.run();
  EXPECT_EQ(batch_inside, 2);
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(out->response(), "ok /report");
  EXPECT_EQ(out->permits().count(), 2);
  EXPECT_EQ(adm.in_flight(1), 2);  // the response is not written yet: still held
  EXPECT_EQ(adm.in_flight(0), 0);
  out->release();
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST_F(AsioMiddlewareAdmission, AQueuedRequestIsServedByTheShareRule) {
  // One permit guaranteed per class. Batch borrowed both; an earlier batch request and a later interactive one queue.
  // The first release goes to interactive (below its share), not to the earlier borrower.
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 2, .classes = {{"interactive", 0.5}, {"batch", 0.5}}}};
  auto b1 = adm.try_acquire(1);
  auto b2 = adm.try_acquire(1);
  const auto mw = admit::asio::middleware<request, response>{}.admission(adm, priority_of);
  request batch{"/batch", 1}, interactive{"/page", 0};
  std::optional<outcome> batch_out, interactive_out;
  start(ctx, mw, batch, ok, batch_out);
  ctx.poll();
  start(ctx, mw, interactive, ok, interactive_out);
  ctx.poll();
  EXPECT_EQ(adm.waiting(), 2u);
  b1->release();
  ctx.poll();
  ASSERT_TRUE(interactive_out && *interactive_out);
  EXPECT_FALSE(batch_out);
  b2->release();
  ctx.poll();
  ASSERT_TRUE(batch_out && *batch_out);
  EXPECT_EQ(batch_out->response(), "ok /batch");
}

TEST_F(AsioMiddlewareAdmission, RefusalsAnswer503WithTheirReason) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1, .max_waiters = 1}};
  auto held = adm.try_acquire(0);
  const auto mw = admit::asio::middleware<request, response>{}.admission(adm, priority_of);
  const auto two = admit::asio::middleware<request, response>{}.admission(adm, priority_of, 2);
  const auto shed = admit::asio::middleware<request, response>{}.load_shed().admission(adm, priority_of);
  request req;
  std::optional<outcome> queued, full, huge, shed_out;
  start(ctx, mw, req, ok, queued);
  start(ctx, mw, req, ok, full);
  start(ctx, two, req, ok, huge);
  start(ctx, shed, req, ok, shed_out);
  ctx.poll();
  ASSERT_TRUE(full && huge && shed_out);
  EXPECT_FALSE(queued);
  EXPECT_EQ(full->rejected().reason, rejection_reason::queue_full);
  EXPECT_EQ(huge->rejected().reason, rejection_reason::exceeds_capacity);
  EXPECT_EQ(shed_out->rejected().reason, rejection_reason::shed);
  for (const auto* o : {&*full, &*huge, &*shed_out}) EXPECT_EQ(o->rejected().status(), 503u);
  held->release();
  ctx.run();
  ASSERT_TRUE(queued && *queued);
}

TEST_F(AsioMiddlewareAdmission, TheDeadlineBoundsTheWaitAnd503s) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1}};
  adm.enable_metrics();
  auto held = adm.try_acquire(0);
  const auto mw =
      admit::asio::middleware<request, response>{}.deadline<manual_clock>(100ms).admission(adm, priority_of);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.poll();
  EXPECT_EQ(adm.waiting(), 1u);
  manual_clock::advance(99ms);
  ctx.poll();
  EXPECT_FALSE(out);
  manual_clock::advance(1ms);
  ctx.run();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::deadline);
  EXPECT_EQ(out->rejected().status(), 503u);
  EXPECT_EQ(adm.waiting(), 0u);
  held->release();
  EXPECT_EQ(adm.in_flight(), 0);
  EXPECT_EQ(adm.metrics().timed_out, 1u);
}

TEST_F(AsioMiddlewareAdmission, ADeadlineTheRateCannotMeetIsRefusedAtOnce) {
  net::io_context ctx;
  manual_admission adm{{.rate = admit::rate::every(1s), .burst = 1}};
  const auto mw =
      admit::asio::middleware<request, response>{}.deadline<manual_clock>(100ms).admission(adm, priority_of);
  request req;
  std::optional<outcome> first, second;
  start(ctx, mw, req, ok, first);
  start(ctx, mw, req, ok, second);
  ctx.poll();  // no time passes
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(*first);
  ASSERT_FALSE(*second);
  EXPECT_EQ(second->rejected().reason, rejection_reason::deadline);
}

TEST_F(AsioMiddlewareAdmission, ARequestWaitsForItsTokensOnTheTimer) {
  net::io_context ctx;
  manual_admission adm{{.rate = admit::rate::every(10ms), .burst = 1}};
  const auto mw = admit::asio::middleware<request, response>{}.admission(adm, priority_of);
  request req;
  std::optional<outcome> first, second;
  start(ctx, mw, req, ok, first);
  start(ctx, mw, req, ok, second);
  ctx.poll();
  EXPECT_TRUE(first && *first);
  EXPECT_FALSE(second);
  manual_clock::advance(10ms);
  ctx.run();
  ASSERT_TRUE(second && *second);
}

TEST_F(AsioMiddlewareAdmission, ThePermitIsReleasedWhenTheHandlerThrows) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1}};
  const auto mw = admit::asio::middleware<request, response>{}.admission(adm, priority_of);
  auto throwing = [&](request&) -> net::awaitable<response> {
    EXPECT_EQ(adm.in_flight(), 1);
    co_await net::post(ctx, net::use_awaitable);
    throw std::runtime_error("handler failed");
  };
  request req;
  std::optional<outcome> out;
  std::exception_ptr error;
  start(ctx, mw, req, throwing, out, &error);
  ctx.run();
  EXPECT_FALSE(out);
  ASSERT_TRUE(error);
  EXPECT_THROW(std::rethrow_exception(error), std::runtime_error);
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST_F(AsioMiddlewareAdmission, APriorityOutOfRangeThrowsAndTakesNothing) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1}};
  const auto mw = admit::asio::middleware<request, response>{}.admission(adm, priority_of);
  request req{"/", 3};
  std::optional<outcome> out;
  std::exception_ptr error;
  start(ctx, mw, req, ok, out, &error);
  ctx.run();
  ASSERT_TRUE(error);
  EXPECT_THROW(std::rethrow_exception(error), std::invalid_argument);
  EXPECT_EQ(adm.in_flight(), 0);
  const auto empty = admit::asio::middleware<request, response>{};
  EXPECT_THROW((void)empty.admission(adm, priority_of, 0), std::invalid_argument);
}

TEST_F(AsioMiddlewareAdmission, EveryRequestIsOneOutcomeInTheMetrics) {
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);  // keeps poll() working between the phases
  manual_admission adm{{.max_in_flight = 1}};
  std::vector<admit::acquire_outcome> events;
  adm.enable_metrics([&](const admit::limiter_event& e) { events.push_back(e.outcome); });
  const auto mw = admit::asio::middleware<request, response>{}.admission(adm, priority_of);
  const auto shed = admit::asio::middleware<request, response>{}.load_shed().admission(adm, priority_of);
  request req;
  std::optional<outcome> first, waits, shed_out;
  start(ctx, mw, req, ok, first);
  ctx.poll();
  std::exception_ptr error;
  start(ctx, mw, req, ok, waits, &error);
  start(ctx, shed, req, ok, shed_out);
  ctx.poll();
  manual_clock::advance(5ms);
  first.reset();  // the response is written: the queued request is admitted
  ctx.poll();
  EXPECT_FALSE(error);
  ASSERT_TRUE(waits && *waits);
  ASSERT_TRUE(shed_out && !*shed_out);
  EXPECT_EQ(events,
            (std::vector<admit::acquire_outcome>{admit::acquire_outcome::admitted, admit::acquire_outcome::unavailable,
                                                 admit::acquire_outcome::admitted}));
  const auto s = adm.metrics();
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.waited, 1u);
  EXPECT_EQ(s.wait.max, 5ms);
  EXPECT_EQ(s.unavailable, 1u);
}

}  // namespace

}  // namespace asio_middleware_admission_test
