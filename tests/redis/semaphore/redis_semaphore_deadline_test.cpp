// admit::redis::semaphore's deadlines and stop tokens against a real redis-server: a wait ends at its deadline or its
// stop and leaves the queue, also while Redis is paused, with its call in flight, or when nothing runs the
// connection's executor; a timeout beyond the clock's range means no deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <stop_token>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::wait_for_waiters;
using steady = std::chrono::steady_clock;

TEST(RedisSemaphore, DeadlineAndStopTokenEndAWaitAndLeaveTheQueue) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "deadline", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);

  const auto start = steady::now();
  EXPECT_EQ(s.try_acquire_for(200ms).error(), admit::errc::timeout);
  const auto took = steady::now() - start;
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 1s);
  wait_for_waiters(s, 0);  // the cancel left the queue

  std::stop_source stop;
  auto pending = std::async(std::launch::async, [&] { return s.acquire(1, stop.get_token()).error(); });
  wait_for_waiters(s, 1);
  stop.request_stop();
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(pending.get(), admit::errc::cancelled);
  wait_for_waiters(s, 0);
}

// A timeout beyond the clock's range is "no deadline", not an overflowed one in the past (that would time out at once,
// and is undefined behaviour besides).
TEST(RedisSemaphore, ATimeoutBeyondTheClocksRangeWaitsWithoutEnd) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "forever", 1);
  auto held = s.try_acquire_for(std::chrono::hours::max());
  ASSERT_TRUE(held) << held.error().message();

  std::stop_source stop;
  auto pending = std::async(std::launch::async,
                            [&] { return s.try_acquire_for(std::chrono::hours::max(), 1, stop.get_token()).error(); });
  wait_for_waiters(s, 1);
  stop.request_stop();
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(pending.get(), admit::errc::cancelled);

  auto granted = std::make_shared<std::promise<std::error_code>>();
  auto result = granted->get_future();
  s.async_acquire_for(std::chrono::hours::max(), 1, [granted](std::error_code ec, lease) { granted->set_value(ec); });
  (void)held->release();
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(result.get());
}

// A deadline is kept while Redis does not answer: the wait then waits for its leave-queue call at most 40 ms more,
// not for the pause (2 s).
TEST(RedisSemaphore, DeadlineHonoredWhileRedisIsPaused) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.poll_interval = 50ms;
  o.timeout = 300ms;
  semaphore s(conn, "paused", 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  const auto start = steady::now();
  auto pending = std::async(std::launch::async, [&] { return s.try_acquire_for(300ms); });
  wait_for_waiters(s, 1);
  server.admin({"CLIENT", "PAUSE", "2000", "ALL"});
  auto r = pending.get();
  EXPECT_EQ(r.error(), admit::errc::timeout);
  EXPECT_LT(steady::now() - start, 300ms + 40ms + 300ms);  // the deadline, the leave's 40 ms and slack; not the pause
}

// A stop ends a wait whose call is in flight (Redis paused): the wait returns once its leave-queue call is answered
// (when the pause ends, well within options().timeout), and at that point the request has left the queue, or the
// grant that came first has been released — no eventually.
TEST(RedisSemaphore, AStopEndsAWaitWhoseCallIsInFlight) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.timeout = 10s;  // the acquire call would hang until the pause ends
  semaphore s(conn, "stopped-in-flight", 1, o);
  server.pause(1000ms);
  std::stop_source stop;
  const auto written = conn.statistics().commands_written;
  auto pending = std::async(std::launch::async, [&] { return s.acquire(1, stop.get_token()).error(); });
  ASSERT_TRUE(eventually([&] { return conn.statistics().commands_written > written; }));  // the acquire call is out
  const auto start = steady::now();
  stop.request_stop();
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready) << "the stop waited for the call's timeout";
  EXPECT_EQ(pending.get(), admit::errc::cancelled);
  EXPECT_LT(steady::now() - start, 5s);
  const auto snap = s.inspect().first;
  EXPECT_EQ(snap.waiter_count, 0);
  EXPECT_EQ(snap.available, 1);
}

// The waiting thread ends a blocking wait itself: at its deadline and at its stop, even when nothing runs the
// connection's executor (stopped, or blocked by a caller on its only thread); a token already stopped sends nothing.
TEST(RedisSemaphore, ABlockingWaitEndsOnTimeWhenTheExecutorDoesNotRun) {
  redis_server server;
  boost::asio::io_context never_run;
  connection conn(never_run.get_executor(), server.url());
  semaphore s(conn, "not-run", 1);

  auto start = steady::now();
  EXPECT_EQ(s.try_acquire_for(200ms).error(), admit::errc::timeout);
  EXPECT_GE(steady::now() - start, 200ms);
  EXPECT_LT(steady::now() - start, 2s);

  std::stop_source stop;
  auto pending = std::async(std::launch::async, [&] { return s.acquire(1, stop.get_token()).error(); });
  stop.request_stop();
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(pending.get(), admit::errc::cancelled);

  const auto written = conn.statistics().commands_written;
  EXPECT_EQ(s.acquire(1, stop.get_token()).error(), admit::errc::cancelled);
  EXPECT_EQ(conn.statistics().commands_written, written);
}

}  // namespace

// A deadline already passed does not wait: one call decides, as every local primitive's and the Redis rate limiters'
// — admitted when the permits are free now, else errc::timeout at once, nothing left queued. (It timed out without
// asking Redis, also when every permit was free.)
TEST(RedisSemaphore, ADeadlineAlreadyPassedAdmitsWhatIsFreeNow) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "passed", 1);
  const auto past = steady::now() - 1s;

  auto first = s.try_acquire_until(past);
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(s.try_acquire_for(0s).error(), admit::errc::timeout);
  EXPECT_EQ(s.try_acquire_for(-1s).error(), admit::errc::timeout);
  wait_for_waiters(s, 0);  // never queued
  ASSERT_EQ(first->release().first, lease::release_status::released);

  const auto async_outcome = [&](steady::time_point deadline) {
    auto done = std::make_shared<std::promise<std::pair<std::error_code, lease>>>();
    auto f = done->get_future();
    s.async_acquire_until(deadline, 1, [done](std::error_code ec, lease l) { done->set_value({ec, std::move(l)}); });
    EXPECT_EQ(f.wait_for(5s), std::future_status::ready);
    return f.get();
  };
  auto [ec, held] = async_outcome(past);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_TRUE(held);
  EXPECT_EQ(async_outcome(past).first, admit::errc::timeout);
  wait_for_waiters(s, 0);
}

// A deadline already passed, with Redis not answering: its one call is given up within the 40 ms every wait has past
// its deadline (not the call's timeout), blocking or asynchronous, and the asynchronous form's cancellation still
// completes it at once.
TEST(RedisSemaphore, ADeadlineAlreadyPassedIsKeptWhenRedisDoesNotAnswer) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.timeout = 5s;
  semaphore s(conn, "passed-paused", 1, o);
  ASSERT_TRUE(s.try_acquire());  // the function library loaded, the connection made
  server.admin({"CLIENT", "PAUSE", "3000", "ALL"});
  auto start = steady::now();
  EXPECT_EQ(s.try_acquire_for(0s).error(), admit::errc::timeout);
  EXPECT_LT(steady::now() - start, 1s);  // 40 ms and slack; not the 5 s call timeout, nor the 3 s pause

  auto done = std::make_shared<std::promise<std::error_code>>();
  auto f = done->get_future();
  start = steady::now();
  s.async_acquire_until(steady::now() - 1s, 1, [done](std::error_code ec, lease) { done->set_value(ec); });
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get(), admit::errc::timeout);
  EXPECT_LT(steady::now() - start, 1s);
}
