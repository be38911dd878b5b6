// admit::redis::semaphore's opt-in metrics (semaphore.hpp, "Metrics") against a real redis-server: every acquisition
// — try_acquire, acquire, try_acquire_for, async — counts exactly one outcome (admitted with its wait, unavailable,
// queue_full, timeout, cancelled, closed, exceeds_capacity, failed) and calls the event hook once; the gauges are this
// object's (the capacity it last learned, the permits its leases hold, its acquisitions under way) and need no Redis
// call; leases found lost are counted.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/limiter_options.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::acquire_outcome;
using admit::limiter_snapshot;
using admit::redis::connection;
using admit::redis::failure_policy;
using admit::redis::lease;
using admit::redis::lease_state;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::acquire_async;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::wait_for_waiters;
using steady = std::chrono::steady_clock;

// What the event hook saw.
struct event_log {
  std::mutex m;
  std::vector<admit::limiter_event> events;
  admit::limiter_metrics::event_handler hook() {
    return [this](const admit::limiter_event& e) {
      const std::lock_guard lock(m);
      events.push_back(e);
    };
  }
  std::size_t size() {
    const std::lock_guard lock(m);
    return events.size();
  }
  admit::limiter_event last() {
    const std::lock_guard lock(m);
    return events.back();
  }
  std::map<acquire_outcome, std::size_t> by_outcome() {
    const std::lock_guard lock(m);
    std::map<acquire_outcome, std::size_t> out;
    for (const auto& e : events) ++out[e.outcome];
    return out;
  }
};

std::uint64_t total(const limiter_snapshot& s) {
  return s.admitted + s.unavailable + s.rejected + s.timed_out + s.cancelled + s.closed + s.exceeds_capacity + s.failed;
}

TEST(RedisSemaphoreMetrics, EachAcquisitionCountsOneOutcome) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.max_waiters = 1;
  semaphore s(conn, "outcomes", 2, o);
  event_log log;
  s.enable_metrics(log.hook());
  EXPECT_EQ(s.metrics().limit, 0);  // not learned from Redis yet

  auto a = s.try_acquire();  // admitted
  ASSERT_TRUE(a) << a.error().message();
  auto b = s.acquire();  // admitted without queueing
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(s.try_acquire().error(), admit::errc::would_block);        // unavailable
  EXPECT_EQ(s.try_acquire(3).error(), admit::errc::exceeds_capacity);  // never
  EXPECT_EQ(s.try_acquire_for(100ms).error(), admit::errc::timeout);   // waited, in vain
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_EQ(s.acquire(1, stopped.get_token()).error(), admit::errc::cancelled);  // nothing sent
  wait_for_waiters(s, 0);

  // An async waiter fills the queue (max_waiters 1): the next waiter is rejected; then the waiter is cancelled.
  boost::asio::cancellation_signal signal;
  std::promise<std::error_code> cancelled;
  s.async_acquire(1, boost::asio::bind_cancellation_slot(signal.slot(),
                                                         [&](std::error_code ec, lease) { cancelled.set_value(ec); }));
  wait_for_waiters(s, 1);
  EXPECT_EQ(s.metrics().waiting, 1u);
  EXPECT_EQ(s.try_acquire_for(5s).error(), admit::errc::queue_full);
  boost::asio::post(conn.get_executor(), [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  EXPECT_EQ(cancelled.get_future().get(), admit::errc::cancelled);

  limiter_snapshot m = s.metrics();
  EXPECT_EQ(m.admitted, 2u);
  EXPECT_EQ(m.unavailable, 1u);
  EXPECT_EQ(m.exceeds_capacity, 1u);
  EXPECT_EQ(m.timed_out, 1u);
  EXPECT_EQ(m.rejected, 1u);
  EXPECT_EQ(m.cancelled, 2u);
  EXPECT_EQ(total(m), 8u);
  EXPECT_EQ(m.in_flight, 2);
  EXPECT_EQ(m.waiting, 0u);
  EXPECT_EQ(m.limit, 2);    // learned by inspect (in wait_for_waiters)
  EXPECT_EQ(m.waited, 2u);  // a grant's wait is at least its round trip
  ASSERT_EQ(log.size(), 8u);
  const auto seen = log.by_outcome();
  EXPECT_EQ(seen.at(acquire_outcome::admitted), 2u);
  EXPECT_EQ(seen.at(acquire_outcome::unavailable), 1u);
  EXPECT_EQ(seen.at(acquire_outcome::exceeds_capacity), 1u);
  EXPECT_EQ(seen.at(acquire_outcome::timeout), 1u);
  EXPECT_EQ(seen.at(acquire_outcome::queue_full), 1u);
  EXPECT_EQ(seen.at(acquire_outcome::cancelled), 2u);
  {
    const std::lock_guard lock(log.m);
    EXPECT_EQ(log.events[3].n, 3);         // the one above the capacity
    EXPECT_GE(log.events[4].wait, 100ms);  // the timeout's wait
  }

  // The gauges follow this object's leases and what it learns of the capacity.
  ASSERT_FALSE(s.set_capacity(3));
  EXPECT_EQ(s.metrics().limit, 3);
  ASSERT_EQ(b->release().first, lease::release_status::released);
  EXPECT_EQ(s.metrics().in_flight, 1);
  auto [ec, c] = acquire_async(s, 2).get();  // async, admitted
  ASSERT_FALSE(ec) << ec.message();
  m = s.metrics();
  EXPECT_EQ(m.in_flight, 3);
  EXPECT_EQ(m.admitted, 3u);
  EXPECT_EQ(log.last().outcome, acquire_outcome::admitted);
  EXPECT_EQ(log.last().n, 2);
  { const lease gone = std::move(*a); }  // released by its destructor
  EXPECT_EQ(s.metrics().in_flight, 2);
  EXPECT_EQ(s.inspect().first.capacity, 3);
  EXPECT_EQ(s.metrics().limit, 3);
  EXPECT_EQ(log.size(), 9u);  // set_capacity, release and inspect are not acquisitions
}

TEST(RedisSemaphoreMetrics, AnAdmissionsWaitRunsFromTheCallToTheGrant) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "waits", 1);
  event_log log;
  s.enable_metrics(log.hook());
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  const auto start = steady::now();
  auto blocked = std::async(std::launch::async, [&] { return s.try_acquire_for(20s); });
  wait_for_waiters(s, 1);
  const auto first_queued = steady::now();  // after the blocking waiter's call, before the async one's
  auto queued = acquire_async(s, 1, 20s);
  wait_for_waiters(s, 2);
  const auto second_queued = steady::now();
  EXPECT_EQ(s.metrics().waiting, 2u);
  ASSERT_EQ(held->release().first, lease::release_status::released);
  const auto released = steady::now();
  auto first = blocked.get();  // queued first
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_EQ(first->release().first, lease::release_status::released);
  auto [ec, second] = queued.get();
  ASSERT_FALSE(ec) << ec.message();
  const auto end = steady::now();
  const limiter_snapshot m = s.metrics();
  EXPECT_EQ(m.admitted, 3u);
  EXPECT_EQ(m.waited, 3u);
  EXPECT_EQ(m.waiting, 0u);
  EXPECT_EQ(m.in_flight, 1);
  EXPECT_EQ(s.wait_times().count(), 3u);
  ASSERT_EQ(log.size(), 3u);
  const std::lock_guard lock(log.m);
  // Each waiter's wait spans its time in the queue: from its call (between the bounds known here) to its grant.
  EXPECT_GE(log.events[1].wait, released - first_queued);
  EXPECT_LE(log.events[1].wait, end - start);
  EXPECT_GE(log.events[2].wait, released - second_queued);
  EXPECT_LE(log.events[2].wait, end - first_queued);
}

TEST(RedisSemaphoreMetrics, RedisFailuresAreFailedOrTimeoutAndFailOpenLocalLeasesAreFailedToo) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.timeout = 200ms;
  o.poll_interval = 50ms;
  o.breaker = {.failure_threshold = 2, .open_for = 1h};
  semaphore closed_policy(conn, "fail-closed", 1, o);
  o.on_failure = failure_policy::fail_open;
  o.local_cap = 1;
  semaphore open_policy(conn, "fail-open", 1, o);
  event_log closed_log;
  closed_policy.enable_metrics(closed_log.hook());
  open_policy.enable_metrics();
  server.kill();

  // Fail-closed: the calls' errors (a timeout, or a lost or refused connection: failed), then the open breaker.
  for (int i = 0; i < 2; ++i) {
    auto r = closed_policy.try_acquire();
    ASSERT_FALSE(r);
    EXPECT_EQ(closed_log.last().outcome,
              r.error() == admit::errc::timeout ? acquire_outcome::timeout : acquire_outcome::failed)
        << r.error().message();
  }
  EXPECT_EQ(closed_policy.try_acquire_for(5s).error(), admit::errc::circuit_open);
  EXPECT_EQ(closed_log.last().outcome, acquire_outcome::failed);
  limiter_snapshot m = closed_policy.metrics();
  EXPECT_EQ(m.timed_out + m.failed, 3u);
  EXPECT_GE(m.failed, 1u);
  EXPECT_EQ(m.admitted, 0u);
  EXPECT_EQ(closed_log.size(), 3u);

  // Fail-open: a local lease (counted failed: Redis did not answer; held all the same), then beyond local_cap the
  // call's error.
  auto local = open_policy.try_acquire();
  ASSERT_TRUE(local) << local.error().message();
  ASSERT_EQ(local->fencing_token(), 0);
  EXPECT_FALSE(open_policy.try_acquire());
  m = open_policy.metrics();
  EXPECT_EQ(m.admitted, 0u);
  EXPECT_EQ(m.timed_out + m.failed, 2u);
  EXPECT_EQ(m.in_flight, 1);
  ASSERT_EQ(local->release().first, lease::release_status::released);
  EXPECT_EQ(open_policy.metrics().in_flight, 0);
}

TEST(RedisSemaphoreMetrics, AnAcquisitionOnAClosedConnectionCountsAsClosed) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "closed", 1);
  s.enable_metrics();
  conn.close();
  EXPECT_EQ(s.try_acquire().error(), admit::errc::closed);
  EXPECT_EQ(acquire_async(s, 1).get().first, admit::errc::closed);
  const limiter_snapshot m = s.metrics();
  EXPECT_EQ(m.closed, 2u);
  EXPECT_EQ(total(m), 2u);
  EXPECT_EQ(m.waiting, 0u);
}

TEST(RedisSemaphoreMetrics, ALostLeaseIsCountedAndLeavesInFlight) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.lease_ttl = 300ms;
  o.auto_renew = false;
  o.poll_interval = 100ms;
  semaphore s(conn, "lost", 1, o);  // gauges and the lost count without enable_metrics
  auto stale = s.try_acquire();
  ASSERT_TRUE(stale);
  EXPECT_EQ(s.metrics().in_flight, 1);
  auto next = s.try_acquire_for(10s);  // granted once the stale lease expired in Redis
  ASSERT_TRUE(next) << next.error().message();
  EXPECT_EQ(s.metrics().in_flight, 2);  // this process does not know yet
  EXPECT_EQ(s.leases_lost(), 0u);
  EXPECT_EQ(s.metrics().leases_lost, std::optional<std::uint64_t>(0));
  EXPECT_FALSE(stale->renew().first);  // finds it lost
  EXPECT_EQ(stale->state(), lease_state::lost);
  EXPECT_EQ(s.leases_lost(), 1u);
  EXPECT_EQ(s.metrics().leases_lost, std::optional<std::uint64_t>(1));  // what the Prometheus registry writes
  EXPECT_EQ(s.metrics().in_flight, 1);
  EXPECT_EQ(stale->release().first, lease::release_status::not_held);
  EXPECT_EQ(s.metrics().in_flight, 1);  // not taken twice
  EXPECT_EQ(total(s.metrics()), 0u);    // metrics not enabled: no counters
}

TEST(RedisSemaphoreMetrics, EnablingAgainStartsFromZeroWithTheNewHook) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "again", 2);
  event_log first, second;
  s.enable_metrics(first.hook());
  auto a = s.try_acquire();
  ASSERT_TRUE(a);
  s.enable_metrics(second.hook());
  EXPECT_EQ(s.metrics().admitted, 0u);
  EXPECT_EQ(s.metrics().in_flight, 1);  // the gauges are not counters
  auto b = s.try_acquire();
  ASSERT_TRUE(b);
  EXPECT_EQ(s.metrics().admitted, 1u);
  EXPECT_EQ(first.size(), 1u);
  EXPECT_EQ(second.size(), 1u);
}

TEST(RedisSemaphoreMetrics, WhatTheHookThrowsReachesTheCallerAfterTheAcquisitionIsCounted) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "throws", 1);
  s.enable_metrics([](const admit::limiter_event& e) {
    if (e.outcome == acquire_outcome::admitted) throw std::runtime_error("hook");
  });
  EXPECT_THROW((void)s.try_acquire(), std::runtime_error);
  const limiter_snapshot m = s.metrics();
  EXPECT_EQ(m.admitted, 1u);
  EXPECT_EQ(m.in_flight, 0);  // the lease was released on the way out
}

}  // namespace
