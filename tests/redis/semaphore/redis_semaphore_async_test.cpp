// admit::redis::semaphore's asynchronous waiters against a real redis-server: they share the FIFO queue with blocking
// ones; their deadlines (armed at once, or once queued when no call can outlast them) and cancellations leave the
// queue; the background work they leave (queue-leaves, releases of grants that raced with a cancel) is safe when the
// semaphore and its connection are destroyed at any step; a wait whose connection goes, or whose semaphore object is
// destroyed, ends with errc::closed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::acquire_async;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::wait_for_waiters;
using steady = std::chrono::steady_clock;

TEST(RedisSemaphore, AsyncWaitersShareTheFifoQueueWithBlockingOnes) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "async", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  auto first = acquire_async(s, 1);  // queued first, without a thread
  wait_for_waiters(s, 1);
  auto second = std::async(std::launch::async, [&] { return s.try_acquire_for(20s); });
  wait_for_waiters(s, 2);

  ASSERT_EQ(held->release().first, lease::release_status::released);
  ASSERT_EQ(first.wait_for(5s), std::future_status::ready);  // woken: not after the 1 s poll
  auto [ec, got] = first.get();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_GT(got.fencing_token(), held->fencing_token());
  const auto between = s.inspect().first;  // the blocking waiter is still behind
  EXPECT_EQ(between.waiter_count, 1);
  EXPECT_EQ(between.holder_count, 1);
  ASSERT_EQ(got.release().first, lease::release_status::released);
  auto r = second.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_GT(r->fencing_token(), got.fencing_token());
}

TEST(RedisSemaphore, AsyncDeadlineAndCancellationLeaveTheQueue) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "async-cancel", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);

  const auto start = steady::now();
  auto timed = acquire_async(s, 1, 200ms);
  ASSERT_EQ(timed.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(timed.get().first, admit::errc::timeout);
  EXPECT_GE(steady::now() - start, 200ms);
  wait_for_waiters(s, 0);

  boost::asio::cancellation_signal signal;
  std::promise<std::error_code> cancelled;
  s.async_acquire(1, boost::asio::bind_cancellation_slot(signal.slot(),
                                                         [&](std::error_code ec, lease) { cancelled.set_value(ec); }));
  wait_for_waiters(s, 1);
  boost::asio::post(conn.get_executor(), [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  auto f = cancelled.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get(), admit::errc::cancelled);
  wait_for_waiters(s, 0);
  EXPECT_EQ(s.inspect().first.available, 0);  // nothing leaked, nothing granted twice
  ASSERT_EQ(held->release().first, lease::release_status::released);
  EXPECT_EQ(s.inspect().first.available, 1);
}

// A deadline later than any call of the wait can last (two call timeouts) arms its timer only once the acquire call
// says the request is queued (a request granted at once never needs it): it still ends the wait on time, and the
// request leaves the queue.
TEST(RedisSemaphore, AnAsyncDeadlineBeyondTheCallsBoundIsKeptOnceQueued) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // The permit held by another object with the default call timeout: the first call on a server loads admit's
  // function library, which took more than the 50 ms this test's call timeout was in a sanitized build on a busy
  // machine (its acquire failed).
  semaphore holder(conn, "async-late-deadline", 1);
  auto held = holder.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  semaphore_options o;
  o.timeout = 100ms;  // calls end within 2 x 100 ms + 100 ms: a 600 ms deadline is beyond that
  semaphore s(conn, "async-late-deadline", 1, o);
  const auto start = steady::now();
  auto timed = acquire_async(s, 1, 600ms);
  ASSERT_EQ(timed.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(timed.get().first, admit::errc::timeout);
  EXPECT_GE(steady::now() - start, 600ms);
  wait_for_waiters(s, 0);
  // Granted at once: the same wait succeeds, and its lease is whole.
  ASSERT_EQ(held->release().first, lease::release_status::released);
  auto granted = acquire_async(s, 1, 600ms);
  ASSERT_EQ(granted.wait_for(5s), std::future_status::ready);
  auto [ec, l] = granted.get();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(l.release().first, lease::release_status::released);
}

// The semaphore's background calls (leaving the queue, releasing a grant that raced with a cancellation) are made by
// handlers that may run after the semaphore and its connection are gone. Destroying both at every step of that work
// never reaches the destroyed connection (it did: a test's end crashed with "pure virtual method called"), and a grant
// that could not be released any more expires by itself. The connection runs on an io_context this test steps one
// handler at a time.
TEST(RedisSemaphore, DestroyingTheConnectionAtAnyStepOfBackgroundWorkIsSafe) {
  redis_server server;
  io_thread io;
  connection observer_conn(io.executor(), server.url());
  semaphore_options o;
  o.lease_ttl = 100ms;  // a grant nobody could release is free again soon
  o.poll_interval = 30ms;
  semaphore observer(observer_conn, "teardown", 1, o);
  for (int steps = 0; steps < 30; ++steps) {
    auto held = observer.try_acquire_for(5s);
    ASSERT_TRUE(held) << "before step " << steps << ": " << held.error().message();
    boost::asio::io_context ctx;
    auto conn = std::make_unique<connection>(ctx.get_executor(), server.url());
    auto s = std::make_unique<semaphore>(*conn, "teardown", 1, o);
    boost::asio::cancellation_signal signal;
    s->async_acquire(1, boost::asio::bind_cancellation_slot(signal.slot(), [](std::error_code, lease) {}));
    for (int i = 0; i < 5000 && observer.inspect().first.waiter_count != 1; ++i) ctx.run_for(1ms);
    ASSERT_EQ(observer.inspect().first.waiter_count, 1);
    ASSERT_EQ(held->release().first, lease::release_status::released);  // grants the waiter in Redis...
    signal.emit(boost::asio::cancellation_type::terminal);              // ...which gives up: its cancel finds the grant
    for (int i = 0; i < steps; ++i) ctx.run_one_for(20ms);
    s.reset();
    conn.reset();
    ctx.run_for(50ms);  // what was left: it must not touch the connection
  }
  ASSERT_TRUE(eventually([&] {
    const auto snap = observer.inspect().first;
    return snap.available == 1 && snap.waiter_count == 0;
  }));
}

// A wait whose connection is closed (here: destroyed) ends with errc::closed instead of polling a closed connection
// until its deadline, or for ever without one.
TEST(RedisSemaphore, AWaitEndsWithClosedWhenItsConnectionGoes) {
  redis_server server;
  io_thread io;
  auto conn = std::make_unique<connection>(io.executor(), server.url());
  semaphore_options o;
  o.poll_interval = 50ms;
  semaphore s(*conn, "closed", 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  auto waiting = acquire_async(s, 1);
  wait_for_waiters(s, 1);
  conn.reset();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "the wait kept polling a closed connection";
  EXPECT_EQ(waiting.get().first, admit::errc::closed);
}

// Destroying the semaphore object ends its waits in progress, as destroying an I/O object ends its operations: each
// handler gets errc::closed at once, never a lease after the object is gone (they waited on, and were granted when the
// permit came back, the leases then released in the background and left in Redis when the program ended), and each
// request leaves the queue.
TEST(RedisSemaphore, DestroyingTheSemaphoreEndsItsWaitsWithClosed) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.poll_interval = 30s;  // nothing of this comes from a poll
  semaphore other(conn, "destroyed", 1, o);
  auto held = other.try_acquire();
  ASSERT_TRUE(held);
  std::vector<std::future<std::pair<std::error_code, lease>>> waits;
  {
    semaphore s(conn, "destroyed", 1, o);
    for (int i = 0; i < 3; ++i) waits.push_back(acquire_async(s, 1));
    wait_for_waiters(s, 3);
  }
  for (auto& w : waits) {
    ASSERT_EQ(w.wait_for(5s), std::future_status::ready) << "a wait outlived its semaphore object";
    const auto [ec, l] = w.get();
    EXPECT_EQ(ec, admit::errc::closed) << ec.message();
    EXPECT_FALSE(l);
  }
  wait_for_waiters(other, 0);  // they left the queue
  ASSERT_EQ(held->release().first, lease::release_status::released);
  EXPECT_EQ(other.inspect().first.holder_count, 0);  // nobody was granted the permit given back
}

}  // namespace
