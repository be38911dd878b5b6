// admit::asio::middleware: permits held across the handler and until the outcome is released, exact 429 fields, keyed
// limits, composition order, no permit leaked when the handler throws. Queueing, shedding, deadlines and cancellation
// are in asio_middleware_queue_test.cpp.
// Timers on the manual clock: the select reactor compares its timers with Clock::now() each time it runs (epoll's
// would wait for a timerfd armed in real time), so ctx.poll() after manual_clock::advance() fires the due timers.
#define BOOST_ASIO_DISABLE_EPOLL 1

#include "admit/asio/middleware.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/testing/manual_clock.hpp"
#include "middleware_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_middleware_test {

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

auto client_of = [](const request& r) -> std::string_view { return r.client; };

// The handler: answers "ok" at once.
net::awaitable<response> ok(request&) { co_return "ok"; }

// The fields of a rejection as (name, value) pairs, in order.
std::vector<std::pair<std::string, std::string>> fields_of(const admit::asio::rejection& r) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& f : r.fields()) v.emplace_back(f.name(), f.value());
  return v;
}
using field_list = std::vector<std::pair<std::string, std::string>>;

TEST(AsioMiddleware, AnEmptyStackRunsTheHandler) {
  net::io_context ctx;
  const auto mw = admit::asio::middleware<request, response>{};
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.run();
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(out->response(), "ok");
  EXPECT_FALSE(out->rate());
  EXPECT_EQ(out->permits().size(), 0u);
}

TEST(AsioMiddleware, ThePermitIsHeldAcrossTheHandlerAndUntilTheOutcomeIsReleased) {
  net::io_context ctx;
  admit::semaphore sem{3};
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem, 2);
  std::int64_t available_inside = -1;
  auto handler = [&](request&) -> net::awaitable<response> {
    co_await net::post(ctx, net::use_awaitable);  // suspend: the handler's response is not immediate
    available_inside = sem.available();
    co_return "done";
  };
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, handler, out);
  ctx.run();
  EXPECT_EQ(available_inside, 1);
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(out->permits().count(), 2);
  EXPECT_EQ(sem.available(), 1);  // the handler returned, the response is not written yet: still held
  outcome moved = std::move(*out);
  out.reset();
  EXPECT_EQ(sem.available(), 1);  // moving the outcome moves the permits
  moved.release();
  EXPECT_EQ(sem.available(), 3);
  moved.release();  // idempotent
  EXPECT_EQ(sem.available(), 3);
}

TEST(AsioMiddleware, TheOutcomeReleasesItsPermitsWhenItDies) {
  net::io_context ctx;
  admit::semaphore sem{1};
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.run();
  EXPECT_EQ(sem.available(), 0);
  out.reset();
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioMiddleware, RateLimitedRequestsGet429WithExactFields) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_gcra<manual_clock> limiter{admit::rate::per_second(2), 3};  // T = 500 ms, burst 3
  const auto mw = admit::asio::middleware<request, response>{}.rate_limit(limiter);
  request req;
  for (int i = 0; i < 3; ++i) {
    std::optional<outcome> out;
    start(ctx, mw, req, ok, out);
    ctx.restart();
    ctx.run();
    ASSERT_TRUE(out && *out) << i;
    ASSERT_TRUE(out->rate());
    EXPECT_EQ(out->rate()->remaining, 2 - i);
  }
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.restart();
  ctx.run();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().reason, rejection_reason::rate_limited);
  EXPECT_EQ(out->rejected().status(), 429u);
  // retry_after 500 ms rounds up to 1 s; reset_after = TAT - now = 1.5 s rounds up to 2 s.
  EXPECT_EQ(
      fields_of(out->rejected()),
      (field_list{
          {"Retry-After", "1"}, {"RateLimit-Limit", "3"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "2"}}));
  manual_clock::advance(499ms);  // 1 ms short of the next token
  out.reset();
  start(ctx, mw, req, ok, out);
  ctx.restart();
  ctx.run();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().rate.retry_after, 1ms);
  EXPECT_EQ(fields_of(out->rejected()), (field_list{{"Retry-After", "1"},
                                                    {"RateLimit-Limit", "3"},
                                                    {"RateLimit-Remaining", "0"},
                                                    {"RateLimit-Reset", "2"}}));  // 1.001 s rounds up
  manual_clock::advance(1ms);
  out.reset();
  start(ctx, mw, req, ok, out);
  ctx.restart();
  ctx.run();
  EXPECT_TRUE(out && *out);
}

TEST(AsioMiddleware, WholeSecondsAreNotRoundedUpFurther) {
  manual_clock::reset();
  admit::basic_gcra<manual_clock> limiter{admit::rate::every(2s), 1};
  ASSERT_TRUE(limiter.decide());
  const admit::asio::rejection r{rejection_reason::rate_limited, limiter.decide()};
  EXPECT_EQ(r.retry_after(), 2s);
  EXPECT_EQ(
      fields_of(r),
      (field_list{
          {"Retry-After", "2"}, {"RateLimit-Limit", "1"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "2"}}));
  EXPECT_EQ(admit::asio::ceil_seconds(std::chrono::nanoseconds::max()), 9'223'372'037);
  EXPECT_EQ(admit::asio::ceil_seconds(-5ns), 0);
  EXPECT_EQ(admit::asio::ceil_seconds(1ns), 1);
}

TEST(AsioMiddleware, ARequestLargerThanTheBurstGets429WithoutRetryAfter) {
  manual_clock::reset();
  admit::basic_gcra<manual_clock> limiter{admit::rate::per_second(10), 2};
  net::io_context ctx;
  const auto mw = admit::asio::middleware<request, response>{}.rate_limit(limiter, 3);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.run();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->rejected().status(), 429u);
  EXPECT_FALSE(out->rejected().retry_after());
  EXPECT_FALSE(out->rejected().fields().find("Retry-After"));
  EXPECT_EQ(out->rejected().fields().find("RateLimit-Limit"), "2");
}

TEST(AsioMiddleware, KeyedRateLimitsEachClientSeparately) {
  manual_clock::reset();
  net::io_context ctx;
  admit::keyed<admit::basic_gcra<manual_clock>> per_client{admit::rate::per_second(1), 1};
  const auto mw = admit::asio::middleware<request, response>{}.keyed_rate_limit(per_client, client_of);
  request a{"a"}, b{"b"};
  std::optional<outcome> a1, a2, b1;
  start(ctx, mw, a, ok, a1);
  start(ctx, mw, a, ok, a2);
  start(ctx, mw, b, ok, b1);
  ctx.run();
  ASSERT_TRUE(a1 && a2 && b1);
  EXPECT_TRUE(*a1);
  ASSERT_FALSE(*a2);
  EXPECT_TRUE(*b1);
  EXPECT_EQ(
      fields_of(a2->rejected()),
      (field_list{
          {"Retry-After", "1"}, {"RateLimit-Limit", "1"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "1"}}));
}

TEST(AsioMiddleware, AKeyedLimiterAtItsKeyCapAnswers503WithRetryAfter) {
  manual_clock::reset();
  net::io_context ctx;
  admit::keyed<admit::basic_gcra<manual_clock>> per_client{admit::rate::per_second(1), 2, {.max_keys = 1, .shards = 1}};
  const auto mw = admit::asio::middleware<request, response>{}.keyed_rate_limit(per_client, client_of);
  request a{"a"}, b{"b"};
  std::optional<outcome> a1, b1;
  start(ctx, mw, a, ok, a1);
  ctx.run();
  start(ctx, mw, b, ok, b1);
  ctx.restart();
  ctx.run();
  ASSERT_TRUE(a1 && *a1);
  ASSERT_TRUE(b1 && !*b1);
  EXPECT_EQ(b1->rejected().reason, rejection_reason::key_limit);
  EXPECT_EQ(b1->rejected().status(), 503u);
  EXPECT_EQ(fields_of(b1->rejected()), (field_list{{"Retry-After", "1"}}));  // "a" is idle again 1 s from now
}

TEST(AsioMiddleware, OrderDecidesWhichBudgetARefusedRequestSpends) {
  manual_clock::reset();
  // Rate outside the concurrency limit: the shed request has spent the only token.
  {
    net::io_context ctx;
    admit::basic_gcra<manual_clock> limiter{admit::rate::per_second(1), 1};
    admit::semaphore sem{1};
    auto held = *sem.try_acquire();
    const auto mw = admit::asio::middleware<request, response>{}.rate_limit(limiter).load_shed().concurrency_limit(sem);
    request req;
    std::optional<outcome> first, second;
    start(ctx, mw, req, ok, first);
    ctx.run();
    held.release();
    start(ctx, mw, req, ok, second);
    ctx.restart();
    ctx.run();
    ASSERT_TRUE(first && second);
    EXPECT_EQ(first->rejected().reason, rejection_reason::shed);
    EXPECT_EQ(second->rejected().reason, rejection_reason::rate_limited);
  }
  // Rate inside: the shed request never reached the rate limit, whose token serves the next one.
  {
    net::io_context ctx;
    admit::basic_gcra<manual_clock> limiter{admit::rate::per_second(1), 1};
    admit::semaphore sem{1};
    auto held = *sem.try_acquire();
    const auto mw = admit::asio::middleware<request, response>{}.load_shed().concurrency_limit(sem).rate_limit(limiter);
    request req;
    std::optional<outcome> first, second;
    start(ctx, mw, req, ok, first);
    ctx.run();
    held.release();
    start(ctx, mw, req, ok, second);
    ctx.restart();
    ctx.run();
    ASSERT_TRUE(first && second);
    EXPECT_EQ(first->rejected().reason, rejection_reason::shed);
    EXPECT_TRUE(*second);
  }
  // Shedding stacked inside the concurrency limit applies to nothing: the request queues.
  {
    net::io_context ctx;
    admit::semaphore sem{1};
    auto held = *sem.try_acquire();
    const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem).load_shed();
    request req;
    std::optional<outcome> out;
    start(ctx, mw, req, ok, out);
    ctx.poll();
    EXPECT_FALSE(out);
    EXPECT_EQ(sem.waiting(), 1u);
    held.release();
    ctx.run();
    EXPECT_TRUE(out && *out);
  }
}

TEST(AsioMiddleware, ARefusalByAnInnerLayerReleasesThePermitsOfOuterOnes) {
  manual_clock::reset();
  net::io_context ctx;
  admit::semaphore sem{1};
  admit::basic_gcra<manual_clock> limiter{admit::rate::per_second(1), 1};
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem).rate_limit(limiter, 2);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.run();
  ASSERT_TRUE(out && !*out);
  EXPECT_EQ(out->permits().size(), 0u);
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioMiddleware, TwoConcurrencyLimitsBothHoldUntilRelease) {
  net::io_context ctx;
  admit::semaphore global{4}, route{1};
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(global).concurrency_limit(route);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.run();
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(out->permits().size(), 2u);
  EXPECT_EQ(global.available(), 3);
  EXPECT_EQ(route.available(), 0);
  out->release();
  EXPECT_EQ(global.available(), 4);
  EXPECT_EQ(route.available(), 1);
}

TEST(AsioMiddleware, NoPermitLeaksWhenTheHandlerThrows) {
  net::io_context ctx;
  admit::semaphore outer{2}, inner{1};
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(outer).concurrency_limit(inner);
  auto throwing = [&](request&) -> net::awaitable<response> {
    EXPECT_EQ(outer.available(), 1);
    EXPECT_EQ(inner.available(), 0);
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
  EXPECT_EQ(outer.available(), 2);
  EXPECT_EQ(inner.available(), 1);
}

TEST(AsioMiddleware, TheTightestRateDecisionIsReported) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_gcra<manual_clock> wide{admit::rate::per_second(100), 100};
  admit::keyed<admit::basic_gcra<manual_clock>> narrow{admit::rate::per_second(1), 5};
  const auto mw = admit::asio::middleware<request, response>{}.rate_limit(wide).keyed_rate_limit(narrow, client_of);
  request req;
  std::optional<outcome> out;
  start(ctx, mw, req, ok, out);
  ctx.run();
  ASSERT_TRUE(out && *out && out->rate());
  EXPECT_EQ(out->rate()->limit, 5);
  EXPECT_EQ(out->rate()->remaining, 4);
  const auto fields = admit::asio::rate_limit_fields(*out->rate());
  EXPECT_EQ(fields.find("RateLimit-Remaining"), "4");
  EXPECT_EQ(fields.find("RateLimit-Reset"), "1");
}

TEST(AsioMiddleware, ABoundServiceCallsItsHandler) {
  net::io_context ctx;
  admit::semaphore sem{1};
  const auto svc = admit::asio::middleware<request, response>{}.concurrency_limit(sem).bind(ok);
  request req;
  std::optional<outcome> out;
  net::co_spawn(
      ctx, [&]() -> net::awaitable<void> { out.emplace(co_await svc(req)); }, net::detached);
  ctx.run();
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(out->response(), "ok");
}

TEST(AsioMiddleware, InvalidConfigurationThrows) {
  admit::semaphore sem{1};
  admit::gcra limiter{admit::rate::per_second(1), 1};
  const auto mw = admit::asio::middleware<request, response>{};
  EXPECT_THROW((void)mw.concurrency_limit(sem, 0), std::invalid_argument);
  EXPECT_THROW((void)mw.rate_limit(limiter, -1), std::invalid_argument);
  EXPECT_THROW((void)mw.deadline(-1ms), std::invalid_argument);
  EXPECT_NO_THROW((void)mw.deadline(std::chrono::hours::max()));
}

// held_permits keeps its permits in raw slots; moving and destroying must touch exactly the ones it holds.
TEST(HeldPermits, MovesAndReleaseReturnEveryPermitExactlyOnce) {
  for (std::size_t held = 0; held <= admit::asio::held_permits::max_size; ++held) {
    std::vector<std::unique_ptr<admit::semaphore>> sems;
    admit::asio::held_permits a;
    for (std::size_t i = 0; i < held; ++i) {
      sems.push_back(std::make_unique<admit::semaphore>(2));
      a.add(*sems.back()->try_acquire(static_cast<std::int64_t>(i % 2) + 1));
    }
    admit::asio::held_permits b(std::move(a));
    EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(b.size(), held);
    admit::semaphore other{1};
    admit::asio::held_permits c;
    c.add(*other.try_acquire());
    c = std::move(b);  // releases what c held before
    EXPECT_EQ(other.available(), 1);
    EXPECT_EQ(c.size(), held);
    std::int64_t expected = 0;
    for (std::size_t i = 0; i < held; ++i) expected += static_cast<std::int64_t>(i % 2) + 1;
    EXPECT_EQ(c.count(), expected);
    for (auto& s : sems) EXPECT_LT(s->available(), 2);
    c.release();
    EXPECT_EQ(c.size(), 0u);
    for (auto& s : sems) EXPECT_EQ(s->available(), 2);
  }
}

}  // namespace

}  // namespace asio_middleware_test
