// The contract every distributed limiter shares, run against a real redis-server for each of the five algorithms
// (gcra, token_bucket, fixed_window, sliding_window, sliding_log), part 1: when Redis does not decide — the deadline
// with the failure policies (fail_closed, fail_open, the local fallback with its share), the circuit breaker, a reply
// lost after the script ran — and lost state (FLUSHALL, a restart, a regressed epoch; not expiry). Part 2, the calls
// themselves (batching, leasing, SCRIPT FLUSH, writes, a hot key, a Redis Cluster, options), is
// redis_limiter_contract_calls_test.cpp. What is specific to one algorithm (its decisions equal the local limiter's,
// its bounds, its stored state) is in that algorithm's own test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/redis/client/connection.hpp"
#include "io_thread.hpp"
#include "limiter_kinds.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::breaker_state;
using admit::redis::connection;
using admit::redis::decided_by;
using admit::redis::failure_policy;
using admit::redis::limiter_event;
using admit::redis::limiter_event_kind;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::testing::decide_async;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using admit::redis::testing::tcp_proxy;
using clock_type = std::chrono::steady_clock;

constexpr auto margin = 150ms;  // scheduling slack on a loaded machine

// Records the events a limiter reports.
struct event_log {
  std::mutex m;
  std::vector<std::pair<limiter_event_kind, std::string>> events;
  std::function<void(const limiter_event&)> hook() {
    return [this](const limiter_event& e) {
      std::lock_guard lock(m);
      events.emplace_back(e.kind, std::string(e.key));
    };
  }
  int count(limiter_event_kind kind) {
    std::lock_guard lock(m);
    int n = 0;
    for (const auto& e : events) n += e.first == kind ? 1 : 0;
    return n;
  }
};

// Patient options with lost-state detection on, reporting to `log`.
limiter_options reporting_to(event_log& log) {
  limiter_options o = patient();
  o.on_event = log.hook();
  o.detect_lost_state = true;
  return o;
}

template <class Kind>
class RedisLimiterContract : public ::testing::Test {};
TYPED_TEST_SUITE(RedisLimiterContract, admit::redis::testing::limiter_kinds, admit::redis::testing::kind_names);

// ---- the deadline and the failure policies ----

TYPED_TEST(RedisLimiterContract, FailClosedWithinTheDeadlineWhenTheServerIsKilled) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o;
  o.timeout = 100ms;
  o.failure_retry_after = 2s;
  const auto limiter = TypeParam::make(conn, "fc", 5, o);
  ASSERT_TRUE(limiter.decide("k").consulted);
  server.kill();
  for (int i = 0; i < 3; ++i) {
    const auto t0 = clock_type::now();
    const limiter_result r = limiter.decide("k");
    const auto waited = clock_type::now() - t0;
    EXPECT_FALSE(r.consulted);
    EXPECT_EQ(r.source, decided_by::failure_policy);
    EXPECT_TRUE(r.error == errc::timeout || r.error == errc::outcome_unknown) << r.error.message();
    EXPECT_EQ(r.decision, (admit::decision{false, 5, 0, 2s, 0ns}));
    EXPECT_LT(waited, o.timeout + margin);
  }
  // Restarted without persistence: the state is gone. A patient limiter on the same key shows it with one call: a
  // call of the 100 ms limiter may be answered by its deadline while Redis still runs it (a reconnect and a script
  // reload on a loaded machine take that long) and so take a token unseen. Then the 100 ms limiter is consulted
  // again by itself.
  server.start();
  const auto fresh = TypeParam::make(conn, "fc", 5, patient());
  const limiter_result first = fresh.decide("k");
  EXPECT_TRUE(first.consulted) << first.error.message();
  EXPECT_TRUE(first.decision.admitted);
  EXPECT_EQ(first.decision.remaining, 4);
  limiter_result back;
  ASSERT_TRUE(eventually([&] { return (back = limiter.decide("k")).consulted; }));
  EXPECT_TRUE(back.decision.admitted);
}

TYPED_TEST(RedisLimiterContract, FailOpenWithinTheDeadlineWhenTheServerStalls) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o;
  o.timeout = 100ms;
  o.on_failure = failure_policy::fail_open;
  const auto limiter = TypeParam::make(conn, "fo", 1, o);
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  ASSERT_FALSE(limiter.decide("k").decision.admitted);  // the limit of 1 is spent
  server.pause(800ms);
  const auto t0 = clock_type::now();
  const limiter_result r = limiter.decide("k");
  const auto waited = clock_type::now() - t0;
  EXPECT_EQ(r.error, errc::timeout);
  EXPECT_FALSE(r.consulted);
  EXPECT_TRUE(r.decision.admitted);
  EXPECT_GE(waited, o.timeout);
  EXPECT_LT(waited, o.timeout + margin);
  // Asynchronously, with the server killed: the error and the policy's decision.
  server.kill();
  const auto t1 = clock_type::now();
  auto [ec, d] = decide_async(limiter, "k", 1).get();
  EXPECT_TRUE(ec == errc::timeout || ec == errc::outcome_unknown) << ec.message();
  EXPECT_TRUE(d.admitted);
  EXPECT_LT(clock_type::now() - t1, o.timeout + margin);
}

TYPED_TEST(RedisLimiterContract, LocalFallbackDecidesWithItsShareWhileRedisIsDown) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o;
  o.timeout = 50ms;
  o.on_failure = failure_policy::local_fallback;
  o.fallback_share = 0.5;
  o.breaker.failure_threshold = 0;  // every decision tries Redis first
  const auto limiter = TypeParam::make(conn, "fb", 10, o);
  ASSERT_TRUE(limiter.decide("k").consulted);
  server.kill();
  int admitted = 0;
  for (int i = 0; i < 8; ++i) {
    const limiter_result r = limiter.decide("k");
    EXPECT_EQ(r.source, decided_by::local_fallback);
    EXPECT_TRUE(r.error == errc::timeout || r.error == errc::outcome_unknown) << r.error.message();
    admitted += r.decision.admitted ? 1 : 0;
    if (i == 7) {
      // "Not yet", from the local limiter at half the rate: at most the time it takes to refill one unit.
      EXPECT_FALSE(r.decision.admitted);
      EXPECT_GT(r.decision.retry_after, 0ns);
      EXPECT_LE(r.decision.retry_after, 2 * TypeParam::refill_interval(10));
      EXPECT_FALSE(r.decision.exceeds_capacity());
    }
  }
  EXPECT_EQ(admitted, 5);                                  // half of the limit of 10, per process, for this key
  EXPECT_TRUE(limiter.decide("other").decision.admitted);  // keys are separate locally too
  EXPECT_TRUE(limiter.decide("k", 11).decision.exceeds_capacity());
  EXPECT_EQ(limiter.statistics().failures, 10u);
}

TYPED_TEST(RedisLimiterContract, TheBreakerStopsCallingADeadRedisAndProbesItsWayBack) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  limiter_options o;
  o.timeout = 100ms;
  o.breaker = {.failure_threshold = 3, .open_for = 200ms};
  o.on_event = log.hook();
  o.detect_lost_state = true;
  const auto limiter = TypeParam::make(conn, "br", 100, o);
  ASSERT_TRUE(limiter.decide("k").consulted);
  server.kill();
  for (int i = 0; i < 3; ++i) {
    const limiter_result r = limiter.decide("k");
    EXPECT_TRUE(r.error == errc::timeout || r.error == errc::outcome_unknown) << r.error.message();
  }
  EXPECT_EQ(log.count(limiter_event_kind::circuit_opened), 1);
  EXPECT_EQ(limiter.circuit_state(), breaker_state::open);
  // Open: answered by the policy without calling Redis, hence without waiting for a deadline.
  const auto t0 = clock_type::now();
  for (int i = 0; i < 100; ++i) {
    const limiter_result r = limiter.decide("k");
    ASSERT_EQ(r.error, errc::circuit_open);
    ASSERT_FALSE(r.decision.admitted);
  }
  EXPECT_LT(clock_type::now() - t0, o.timeout);  // 100 decisions in less than one deadline
  EXPECT_EQ(limiter.statistics().circuit_refused, 100u);
  auto [aec, ad] = decide_async(limiter, "k", 1).get();
  EXPECT_EQ(aec, errc::circuit_open);

  server.start();
  limiter_result back;
  ASSERT_TRUE(eventually([&] { return (back = limiter.decide("k")).consulted; }));
  EXPECT_TRUE(back.decision.admitted);
  EXPECT_EQ(limiter.circuit_state(), breaker_state::closed);
  EXPECT_EQ(log.count(limiter_event_kind::circuit_closed), 1);
  EXPECT_EQ(limiter.statistics().circuit_opened, 1u);
}

TYPED_TEST(RedisLimiterContract, AReplyLostAfterTheScriptRanIsChargedOnceAndNotRetried) {
  redis_server server;
  tcp_proxy proxy(server.port());
  io_thread io;
  connection conn(io.executor(), proxy.url());
  limiter_options o = patient();
  o.timeout = 5s;
  const auto limiter = TypeParam::make(conn, "lost", 5, o);
  ASSERT_EQ(limiter.decide("k").decision.remaining, 4);
  const long long before = server.script_calls();

  proxy.drop_replies(true);
  auto pending = decide_async(limiter, "k", 1);
  // The script has run on the server (its reply is being swallowed): now the connection breaks.
  ASSERT_TRUE(eventually([&] { return server.script_calls() == before + 1; }));
  ASSERT_TRUE(eventually([&] { return proxy.dropped() > 0; }));
  proxy.sever();
  const auto [ec, d] = pending.get();
  EXPECT_EQ(ec, errc::outcome_unknown) << ec.message();
  EXPECT_FALSE(d.admitted);  // fail_closed: the caller was told no, although the server charged the request

  proxy.drop_replies(false);
  const limiter_result next = limiter.decide("k");
  ASSERT_TRUE(next.consulted) << next.error.message();
  EXPECT_EQ(next.decision.remaining, 2);         // 5 - 1 - 1 (the lost one, charged once) - 1
  EXPECT_EQ(server.script_calls(), before + 2);  // never retried
}

// ---- lost state ----

TYPED_TEST(RedisLimiterContract, LostStateIsReportedAfterAFlushAndARestart) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  const limiter_options o = reporting_to(log);
  const auto limiter = TypeParam::make(conn, "ls", 5, o);
  ASSERT_TRUE(limiter.decide("a").decision.admitted);
  ASSERT_TRUE(limiter.decide("b").decision.admitted);
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 0);

  server.admin({"FLUSHALL"});
  const limiter_result after_flush = limiter.decide("a");
  EXPECT_EQ(after_flush.decision.remaining, 4);  // the state is gone: a full limiter again
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 1);
  {
    std::lock_guard lock(log.m);
    EXPECT_EQ(log.events.back().second, "a");
  }
  ASSERT_TRUE(limiter.decide("a").decision.admitted);  // reported once, not at every decision
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 1);

  server.kill();
  server.start();  // persistence off: everything is gone
  limiter_result back;
  ASSERT_TRUE(eventually([&] { return (back = limiter.decide("b")).consulted; }));
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 2);
  EXPECT_EQ(limiter.statistics().lost_state, 2u);
}

TYPED_TEST(RedisLimiterContract, ARegressedEpochIsLostStateToo) {
  // A failover to a replica that had not received the last admissions: the epoch's count goes back.
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  const limiter_options o = reporting_to(log);
  const auto limiter = TypeParam::make(conn, "rg", 10, o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(server.admin({"HGET", limiter.epoch_key(), "seq"}), "3");
  server.admin({"HSET", limiter.epoch_key(), "seq", "1"});  // the replica had only the first admission
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 1);
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 1);
}

TYPED_TEST(RedisLimiterContract, StateThatExpiredIsNotLostState) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  const limiter_options o = reporting_to(log);
  // Full again 200 ms after an admission (or at the end of a 200 ms window): the state key and the epoch expire with
  // it. An admission near a window's end leaves the epoch little time: a round whose epoch was gone before PEXPIRETIME
  // could read it (-2) is not counted, and another is made.
  const auto limiter = TypeParam::make_refilling(conn, "ex", 1, 200ms, o);
  int checked = 0;
  for (int round = 0; round < 20 && checked < 3; ++round) {
    limiter_result r;
    ASSERT_TRUE(eventually([&] { return (r = limiter.decide("k")).decision.admitted; }));
    const std::string expiry = server.admin({"PEXPIRETIME", limiter.epoch_key()});
    if (expiry != "-2") {
      ++checked;
      EXPECT_GE(std::stoll(expiry) * 1000,
                std::chrono::duration_cast<std::chrono::microseconds>(r.server_time + r.decision.reset_after).count())
          << "the epoch must outlive the state";
    }
    ASSERT_TRUE(eventually([&] { return server.admin({"EXISTS", limiter.epoch_key()}) == "0"; }));
  }
  EXPECT_EQ(checked, 3);
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 0);
}

// ---- metrics (the outcomes of every kind of decision: redis_limiter_metrics_test.cpp) ----

TYPED_TEST(RedisLimiterContract, MetricsCountOneOutcomePerDecisionForEveryCopy) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  auto limiter = TypeParam::make(conn, "metrics", 2, patient());
  std::atomic<int> events{0};
  limiter.enable_metrics([&](const admit::limiter_event&) { ++events; });
  const auto copy = limiter;  // shares the counters
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  ASSERT_TRUE(decide_async(copy, "k", 1).get().second.admitted);
  ASSERT_FALSE(copy.decide("k").decision.admitted);
  ASSERT_TRUE(limiter.decide("k", 3).decision.exceeds_capacity());
  const admit::limiter_snapshot s = limiter.metrics();
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.waited, 2u);  // Redis decided both: their latency
  EXPECT_EQ(s.unavailable, 1u);
  EXPECT_EQ(s.exceeds_capacity, 1u);
  EXPECT_EQ(s.failed + s.timed_out + s.cancelled + s.closed + s.rejected, 0u);
  EXPECT_EQ(copy.metrics().admitted, 2u);
  EXPECT_EQ(events.load(), 4);
}

}  // namespace
