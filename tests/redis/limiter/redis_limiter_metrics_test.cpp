// The distributed limiters' opt-in metrics (limiter.hpp, "Metrics"), against a real redis-server: each decision —
// blocking or asynchronous, by Redis, from a lease, for rate inf, by the failure policy — counts exactly one outcome,
// the event hook sees it once, copies count together, and metrics() before enable_metrics reads zero. Shown with the
// GCRA (the machinery is the same for every algorithm; the typed contract suite has one metrics case for each).
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
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/rate.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::acquire_outcome;
using admit::errc;
using admit::limiter_snapshot;
using admit::rate;
using admit::redis::connection;
using admit::redis::decided_by;
using admit::redis::failure_policy;
using admit::redis::gcra;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::testing::decide_async;
using admit::redis::testing::decide_concurrently;
using admit::redis::testing::detailed;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
namespace asio = boost::asio;

// One token an hour: nothing refills within a test.
const rate hourly = rate::per(1, std::chrono::hours(1));

// What the event hook saw.
struct limiter_event_log {
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
  std::map<acquire_outcome, std::size_t> by_outcome() {
    const std::lock_guard lock(m);
    std::map<acquire_outcome, std::size_t> out;
    for (const auto& e : events) ++out[e.outcome];
    return out;
  }
  admit::limiter_event last() {
    const std::lock_guard lock(m);
    return events.back();
  }
};

std::uint64_t total(const limiter_snapshot& s) {
  return s.admitted + s.unavailable + s.rejected + s.timed_out + s.cancelled + s.closed + s.exceeds_capacity + s.failed;
}

// The outcome limiter.hpp documents for a result (independent of the implementation's own mapping).
acquire_outcome expected_outcome(const limiter_result& r) {
  if (r.error == errc::timeout) return acquire_outcome::timeout;
  if (r.error == errc::cancelled) return acquire_outcome::cancelled;
  if (r.error == errc::closed) return acquire_outcome::closed;
  if (r.error) return acquire_outcome::failed;
  if (r.decision.admitted) return acquire_outcome::admitted;
  return r.decision.exceeds_capacity() ? acquire_outcome::exceeds_capacity : acquire_outcome::unavailable;
}

TEST(RedisLimiterMetrics, EachDecisionCountsOneOutcomeAndItsLatency) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  gcra limiter(conn, "m", hourly, 3, patient());
  limiter_event_log log;
  limiter.enable_metrics(log.hook());

  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.decide("k").decision.admitted);
  ASSERT_FALSE(limiter.decide("k").decision.admitted);              // the burst of 3 is spent
  ASSERT_TRUE(limiter.decide("k", 4).decision.exceeds_capacity());  // never
  auto [ec, d] = decide_async(limiter, "other", 2).get();           // async_decide, admitted
  ASSERT_FALSE(ec);
  ASSERT_TRUE(d.admitted);
  ASSERT_FALSE(detailed(limiter, "other", 2).get().decision.admitted);  // async_decide_detailed, refused
  ASSERT_TRUE(limiter.decide("k", 0).decision.admitted);                // a query is a decision too

  const limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.admitted, 5u);
  EXPECT_EQ(s.unavailable, 2u);
  EXPECT_EQ(s.exceeds_capacity, 1u);
  EXPECT_EQ(total(s), 8u);
  EXPECT_EQ(s.limit, 0);  // a rate limiter's gauges
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.waiting, 0u);
  // Every admission went to Redis: its wait is the decision's latency, a round trip (> 0).
  EXPECT_EQ(s.waited, 5u);
  EXPECT_EQ(s.wait.count, 5u);
  EXPECT_GT(s.wait.max, 0ns);
  EXPECT_LT(s.wait.max, 10s);
  EXPECT_EQ(limiter.wait_times().count(), 5u);
  EXPECT_EQ(limiter.statistics().decisions, 8u);

  // The hook saw each decision once, with its outcome and n.
  ASSERT_EQ(log.size(), 8u);
  const auto seen = log.by_outcome();
  EXPECT_EQ(seen.at(acquire_outcome::admitted), 5u);
  EXPECT_EQ(seen.at(acquire_outcome::unavailable), 2u);
  EXPECT_EQ(seen.at(acquire_outcome::exceeds_capacity), 1u);
  {
    const std::lock_guard lock(log.m);
    EXPECT_EQ(log.events[4].n, 4);  // the one over the limit
    EXPECT_EQ(log.events[4].outcome, acquire_outcome::exceeds_capacity);
    EXPECT_EQ(log.events[5].n, 2);
    EXPECT_GT(log.events[5].wait, 0ns);
  }
}

TEST(RedisLimiterMetrics, NothingIsCountedBeforeEnableMetricsAndCopiesCountTogether) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  gcra limiter(conn, "copies", hourly, 10, patient());
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(total(limiter.metrics()), 0u);
  EXPECT_EQ(limiter.wait_times().count(), 0u);

  gcra copy = limiter;
  copy.enable_metrics();  // for the original too: they share their state
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  ASSERT_TRUE(copy.decide("k").decision.admitted);
  const admit::redis::limiter& slice = copy;
  ASSERT_TRUE(slice.decide("k").decision.admitted);
  EXPECT_EQ(limiter.metrics().admitted, 3u);
  EXPECT_EQ(copy.metrics().admitted, 3u);
  EXPECT_EQ(slice.metrics().admitted, 3u);
  EXPECT_EQ(limiter.wait_times().count(), 3u);

  // Enabled again: from zero, with the new hook (the old one is called no more).
  limiter_event_log first, second;
  limiter.enable_metrics(first.hook());
  ASSERT_TRUE(copy.decide("k").decision.admitted);
  limiter.enable_metrics(second.hook());
  ASSERT_TRUE(copy.decide("k").decision.admitted);
  EXPECT_EQ(copy.metrics().admitted, 1u);
  EXPECT_EQ(first.size(), 1u);
  EXPECT_EQ(second.size(), 1u);
}

TEST(RedisLimiterMetrics, EnableMetricsWhileDecisionsRunLosesNothingAfterIt) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  gcra limiter(conn, "racing", hourly, 1000, patient());
  limiter.enable_metrics();
  std::atomic<bool> stop{false};
  std::thread enabler([&] {  // at most 200 times (each keeps ~16 KB until the limiter is gone)
    for (int i = 0; i < 200 && !stop.load(); ++i) {
      limiter.enable_metrics();
      std::this_thread::yield();
    }
  });
  const auto results = decide_concurrently(limiter, "k", 1, 8, 50);
  stop = true;
  enabler.join();
  for (const auto& t : results) ASSERT_TRUE(t.result.decision.admitted);
  limiter.enable_metrics();
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(limiter.metrics().admitted, 1u);
}

TEST(RedisLimiterMetrics, ConcurrentDecisionsAreEachCountedOnce) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  gcra limiter(conn, "busy", hourly, 150, patient());
  limiter_event_log log;
  limiter.enable_metrics(log.hook());
  const auto results = decide_concurrently(limiter, "k", 1, 8, 25);  // 200 decisions for 150 tokens
  std::uint64_t admitted = 0;
  for (const auto& t : results) admitted += t.result.decision.admitted ? 1 : 0;
  ASSERT_EQ(admitted, 150u);
  const limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.admitted, 150u);
  EXPECT_EQ(s.unavailable, 50u);
  EXPECT_EQ(total(s), 200u);
  EXPECT_EQ(log.size(), 200u);
}

TEST(RedisLimiterMetrics, LeasesAndRateInfAreAdmissionsThatDidNotWait) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.lease = 5;
  o.lease_ttl = 1h;
  gcra limiter(conn, "lease", hourly, 100, o);
  limiter.enable_metrics();
  ASSERT_EQ(limiter.decide("k").source, decided_by::redis);  // takes 5: 1 now, 4 leased
  for (int i = 0; i < 4; ++i) ASSERT_EQ(limiter.decide("k").source, decided_by::lease);
  limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.admitted, 5u);
  EXPECT_EQ(s.waited, 1u);  // only the one Redis decided
  EXPECT_EQ(limiter.statistics().leased, 4u);

  gcra unlimited(conn, "inf", rate::inf(), 1, patient());
  limiter_event_log log;
  unlimited.enable_metrics(log.hook());
  ASSERT_EQ(unlimited.decide("k").source, decided_by::unlimited);
  ASSERT_FALSE(decide_async(unlimited, "k", 7).get().first);
  s = unlimited.metrics();
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.waited, 0u);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log.last().n, 7);
  EXPECT_EQ(log.last().wait, 0ns);
}

TEST(RedisLimiterMetrics, FailClosedCountsTimeoutsAndFailuresNotAdmissions) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o;
  o.timeout = 100ms;
  o.breaker = {.failure_threshold = 3, .open_for = 1h};
  gcra limiter(conn, "fc", hourly, 10, o);
  limiter_event_log log;
  limiter.enable_metrics(log.hook());
  ASSERT_TRUE(limiter.decide("k").consulted);

  // An error reply (WRONGTYPE): Redis answered but did not decide.
  server.admin({"HSET", limiter.storage_key("hash"), "f", "v"});
  const limiter_result wrong = limiter.decide("hash");
  ASSERT_EQ(wrong.error, errc::error_reply);
  EXPECT_EQ(log.last().outcome, acquire_outcome::failed);

  // A stalled server: the deadline passes (errc::timeout), blocking and asynchronous.
  server.pause(1500ms);
  const limiter_result slow = limiter.decide("k");
  ASSERT_EQ(slow.error, errc::timeout);
  EXPECT_FALSE(slow.decision.admitted);
  EXPECT_EQ(log.last().outcome, acquire_outcome::timeout);
  EXPECT_GE(log.last().wait, o.timeout);
  const limiter_result slow_async = detailed(limiter, "k").get();
  ASSERT_EQ(slow_async.error, errc::timeout);
  EXPECT_EQ(log.last().outcome, acquire_outcome::timeout);

  // A killed server: timeout or outcome_unknown (failed), each counted as its error says; the third failure in a row
  // opens the breaker, whose refusals (circuit_open) are failures too.
  server.kill();
  const limiter_result dead = limiter.decide("k");
  ASSERT_TRUE(dead.error) << "decided without a server";
  EXPECT_EQ(log.last().outcome, expected_outcome(dead));
  for (int i = 0; i < 3; ++i) {
    const limiter_result r = limiter.decide("k");
    ASSERT_EQ(r.error, errc::circuit_open);
    EXPECT_EQ(log.last().outcome, acquire_outcome::failed);
  }
  const limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.admitted, 1u);
  EXPECT_EQ(s.timed_out, 2u + (dead.error == errc::timeout ? 1u : 0u));
  EXPECT_EQ(s.failed, 4u + (dead.error == errc::timeout ? 0u : 1u));
  EXPECT_EQ(total(s), 8u);
  EXPECT_EQ(log.size(), 8u);
  EXPECT_EQ(limiter.statistics().failures, 7u);
}

TEST(RedisLimiterMetrics, FailOpenAdmissionsDuringAnOutageCountAsTheOutageNotAsAdmitted) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o;
  o.timeout = 100ms;
  o.on_failure = failure_policy::fail_open;
  o.breaker = {.failure_threshold = 1, .open_for = 1h};
  gcra limiter(conn, "fo", hourly, 10, o);
  limiter.enable_metrics();
  ASSERT_TRUE(limiter.decide("k").consulted);
  server.pause(1500ms);
  const limiter_result slow = limiter.decide("k");  // opens the breaker
  ASSERT_EQ(slow.error, errc::timeout);
  ASSERT_TRUE(slow.decision.admitted);  // by the policy
  const limiter_result open = limiter.decide("k");
  ASSERT_EQ(open.error, errc::circuit_open);
  ASSERT_TRUE(open.decision.admitted);  // by the policy
  const limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.admitted, 1u);  // Redis's admission only
  EXPECT_EQ(s.timed_out, 1u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(limiter.statistics().failures, 2u);  // how many the policy answered
}

TEST(RedisLimiterMetrics, ACancelledDecisionCountsAsCancelled) {
  redis_server server;
  io_thread io;  // one thread: the flush runs after the handler below returns
  connection conn(io.executor(), server.url());
  gcra limiter(conn, "cancel", hourly, 10, patient());
  limiter_event_log log;
  limiter.enable_metrics(log.hook());
  ASSERT_TRUE(limiter.decide("warm").consulted);
  asio::cancellation_signal signal;
  std::promise<limiter_result> done;
  asio::post(conn.get_executor(), [&] {
    limiter.async_decide_detailed(
        "k", 1, asio::bind_cancellation_slot(signal.slot(), [&](limiter_result r) { done.set_value(std::move(r)); }));
    signal.emit(asio::cancellation_type::terminal);  // before its batch leaves
  });
  const limiter_result r = done.get_future().get();
  ASSERT_EQ(r.error, errc::cancelled);
  const limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.admitted, 1u);
  EXPECT_EQ(total(s), 2u);
  EXPECT_EQ(log.last().outcome, acquire_outcome::cancelled);
}

TEST(RedisLimiterMetrics, ADecisionOnAClosedConnectionCountsAsClosed) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  gcra limiter(conn, "closed", hourly, 10, patient());
  limiter.enable_metrics();
  ASSERT_TRUE(limiter.decide("k").consulted);
  (void)conn.close_for(1s);
  const limiter_result r = limiter.decide("k");
  ASSERT_EQ(r.error, errc::closed) << r.error.message();
  const limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.closed, 1u);
  EXPECT_EQ(total(s), 2u);
}

TEST(RedisLimiterMetrics, WhatTheHookThrowsReachesTheCallerOfDecideAfterTheDecisionIsCounted) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  gcra limiter(conn, "throws", hourly, 10, patient());
  limiter.enable_metrics([](const admit::limiter_event&) { throw std::runtime_error("hook"); });
  EXPECT_THROW((void)limiter.decide("k"), std::runtime_error);
  EXPECT_EQ(limiter.metrics().admitted, 1u);
}

}  // namespace
