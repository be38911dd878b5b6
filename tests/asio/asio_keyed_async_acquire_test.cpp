// admit::asio::async_acquire of admit::keyed_concurrency_limiter: a key's permit granted on release, FIFO with the
// key's other waiters, refusals (key cap, n above the limit) completed through a post, cancellation, the default
// timeout on the manual clock, and the key's entry freed when the last permit or waiter is gone (shutdown included).
#define BOOST_ASIO_DISABLE_EPOLL 1

#include "admit/asio/keyed_async_acquire.hpp"

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_keyed_async_acquire_test {

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using admit::errc;
using manual_clock = admit::testing::manual_clock;
using limiter = admit::basic_keyed_concurrency_limiter<std::string, manual_clock>;

struct result {
  boost::system::error_code ec;
  limiter::permit p;
};

// Starts an acquisition of `key`; its completion lands in `out`.
void start(net::io_context& ctx, limiter& l, const std::string& key, std::optional<result>& out,
           net::cancellation_slot slot = {}) {
  admit::asio::async_acquire(l, key, 1,
                             net::bind_cancellation_slot(
                                 slot, net::bind_executor(ctx, [&out](boost::system::error_code ec, limiter::permit p) {
                                   out.emplace(result{ec, std::move(p)});
                                 })));
}

TEST(AsioKeyedAsyncAcquire, AFreePermitIsGrantedThroughThePostedHandler) {
  net::io_context ctx;
  limiter l{{.limit = 1}};
  std::optional<result> out;
  start(ctx, l, "a", out);
  EXPECT_FALSE(out);  // never inside the initiating call
  ctx.run();
  ASSERT_TRUE(out);
  EXPECT_FALSE(out->ec);
  EXPECT_EQ(out->p.count(), 1);
  EXPECT_EQ(l.in_flight("a"), 1);
  out.reset();
  EXPECT_FALSE(l.contains("a"));
}

TEST(AsioKeyedAsyncAcquire, WaitersOfAKeyAreServedInOrderOnRelease) {
  net::io_context ctx;
  limiter l{{.limit = 1}};
  auto held = l.try_acquire("a");
  std::optional<result> first, second, other;
  start(ctx, l, "a", first);
  start(ctx, l, "a", second);
  start(ctx, l, "b", other);
  ctx.poll();
  EXPECT_FALSE(first || second);
  ASSERT_TRUE(other);  // another key is not held back
  EXPECT_EQ(l.waiting("a"), 2u);
  held.reset();
  ctx.poll();
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->ec);
  EXPECT_FALSE(second);
  first.reset();  // released: handed to the second
  ctx.poll();
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->ec);
  second.reset();
  other.reset();
  EXPECT_EQ(l.size(), 0u);
}

TEST(AsioKeyedAsyncAcquire, RefusalsCompleteThroughAPost) {
  net::io_context ctx;
  limiter l{{.limit = 1, .max_keys = 1, .shards = 1}};
  auto held = l.try_acquire("a");
  std::optional<result> capped, oversized;
  start(ctx, l, "b", capped);
  admit::asio::async_acquire(l, "a", 2, net::bind_executor(ctx, [&](boost::system::error_code ec, limiter::permit p) {
                               oversized.emplace(result{ec, std::move(p)});
                             }));
  EXPECT_FALSE(capped || oversized);
  ctx.run();
  ASSERT_TRUE(capped && oversized);
  EXPECT_EQ(capped->ec, boost::system::error_code(std::error_code(errc::queue_full)));
  EXPECT_EQ(oversized->ec, boost::system::error_code(std::error_code(errc::exceeds_capacity)));
  EXPECT_FALSE(capped->p);
  EXPECT_EQ(l.stats().refused_keys, 1u);
}

TEST(AsioKeyedAsyncAcquire, CancellingAWaitLeavesTheQueueAndFreesTheEntryWithTheLastReference) {
  net::io_context ctx;
  limiter l{{.limit = 1}};
  l.enable_metrics();
  auto held = l.try_acquire("a");
  net::cancellation_signal signal;
  std::optional<result> out;
  start(ctx, l, "a", out, signal.slot());
  ctx.poll();
  EXPECT_EQ(l.waiting("a"), 1u);
  signal.emit(net::cancellation_type::terminal);
  ctx.poll();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->ec, net::error::operation_aborted);
  EXPECT_EQ(l.waiting("a"), 0u);
  held.reset();
  EXPECT_FALSE(l.contains("a"));
  EXPECT_EQ(l.metrics().cancelled, 1u);
  EXPECT_EQ(l.metrics().admitted, 1u);  // the try_acquire
}

TEST(AsioKeyedAsyncAcquire, TheDefaultTimeoutEndsTheWaitOnTheClock) {
  manual_clock::reset();
  net::io_context ctx;
  limiter l{{.limit = 1, .timeout = 100ms}};
  auto held = l.try_acquire("a");
  std::optional<result> out;
  start(ctx, l, "a", out);
  ctx.poll();
  manual_clock::advance(99ms);
  ctx.poll();
  EXPECT_FALSE(out);
  manual_clock::advance(1ms);
  ctx.run();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->ec, boost::system::error_code(std::error_code(errc::timeout)));
  held.reset();
  EXPECT_EQ(l.size(), 0u);
}

TEST(AsioKeyedAsyncAcquire, AnOperationDestroyedUnrunDropsItsReference) {
  limiter l{{.limit = 1}};
  auto held = l.try_acquire("a");
  {
    net::io_context ctx;
    std::optional<result> out;
    start(ctx, l, "a", out);
    ctx.poll();
    EXPECT_EQ(l.waiting("a"), 1u);
  }  // the context shuts down with the operation queued
  EXPECT_EQ(l.waiting("a"), 0u);
  held.reset();
  EXPECT_FALSE(l.contains("a"));
}

TEST(AsioKeyedAsyncAcquire, AGrantDestroyedUnrunReturnsItsPermitAndFreesTheEntry) {
  limiter l{{.limit = 1}};
  auto held = l.try_acquire("a");
  {
    net::io_context ctx;
    std::optional<result> out;
    start(ctx, l, "a", out);
    ctx.poll();
    held.reset();  // granted: the completion is posted, never run
    EXPECT_EQ(l.in_flight("a"), 1);
    EXPECT_FALSE(out);
  }
  EXPECT_FALSE(l.contains("a"));
  EXPECT_TRUE(l.try_acquire("a"));
}

TEST(AsioKeyedAsyncAcquire, WorksWithAwaitables) {
  net::io_context ctx;
  limiter l{{.limit = 2}};
  std::int64_t got = 0;
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        auto [ec, p] = co_await admit::asio::async_acquire(l, "k", 2, net::as_tuple(net::use_awaitable));
        got = ec ? -1 : p.count();
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ctx.run();
  EXPECT_EQ(got, 2);
  EXPECT_EQ(l.size(), 0u);
}

// The metrics event hook may throw: the exception leaves io_context::run() with the key's permit given back and the
// entry's reference dropped (the entry is freed), whether granted at once or after waiting.
TEST(AsioKeyedAsyncAcquire, AThrowingEventHookLeaksNoPermitNorEntry) {
  net::io_context ctx;
  limiter l{{.limit = 1}};
  bool armed = false;
  l.enable_metrics([&armed](const admit::limiter_event& e) {
    if (armed && e.outcome == admit::acquire_outcome::admitted) throw std::runtime_error("hook");
  });
  std::optional<result> out;
  armed = true;
  start(ctx, l, "a", out);
  EXPECT_THROW(ctx.poll(), std::runtime_error);
  EXPECT_FALSE(out);
  EXPECT_EQ(l.in_flight("a"), 0);
  EXPECT_EQ(l.size(), 0u);

  armed = false;
  auto held = l.try_acquire("a");
  armed = true;
  ctx.restart();
  start(ctx, l, "a", out);
  ctx.poll();
  EXPECT_EQ(l.waiting("a"), 1u);
  held.reset();  // granted to the waiter: its completion records
  EXPECT_THROW(ctx.poll(), std::runtime_error);
  EXPECT_FALSE(out);
  EXPECT_EQ(l.in_flight("a"), 0);
  EXPECT_EQ(l.size(), 0u);
}

}  // namespace

}  // namespace asio_keyed_async_acquire_test
