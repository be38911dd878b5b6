// The machinery every distributed limiter shares (admit::redis::limiter), against a real redis-server, through the
// GCRA: a reply lost after the script ran is charged once and never retried; the local fallback decides with its
// share while Redis is down; the circuit breaker stops calling a dead Redis and probes its way back; lost state is
// reported after a flush, a restart or a regressed epoch, and not after keys expire; local token leasing spends
// locally and over-admits by at most (lease - 1) per process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/errc.hpp"
#include "admit/redis/gcra.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::breaker_state;
using admit::redis::connection;
using admit::redis::decided_by;
using admit::redis::errc;
using admit::redis::failure_policy;
using admit::redis::limiter_errc;
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

const admit::rate hourly = admit::rate::per(1, std::chrono::hours(1));  // no refill within a test

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

TEST(RedisLimiter, AReplyLostAfterTheScriptRanIsChargedOnceAndNotRetried) {
  redis_server server;
  tcp_proxy proxy(server.port());
  io_thread io;
  connection conn(io.executor(), proxy.url());
  limiter_options o = patient();
  o.timeout = 5s;
  admit::redis::gcra limiter(conn, "lost", hourly, 5, o);
  ASSERT_EQ(limiter.decide("k").decision.remaining, 4);
  const long long before = server.calls("evalsha");

  proxy.drop_replies(true);
  auto pending = decide_async(limiter, "k", 1);
  // The script has run on the server (its reply is being swallowed): now the connection breaks.
  ASSERT_TRUE(eventually([&] { return server.calls("evalsha") == before + 1; }));
  ASSERT_TRUE(eventually([&] { return proxy.dropped() > 0; }));
  proxy.sever();
  const auto [ec, d] = pending.get();
  EXPECT_EQ(ec, errc::outcome_unknown) << ec.message();
  EXPECT_FALSE(d.admitted);  // fail_closed: the caller was told no, although the server charged the request

  proxy.drop_replies(false);
  const limiter_result next = limiter.decide("k");
  ASSERT_TRUE(next.consulted) << next.error.message();
  EXPECT_EQ(next.decision.remaining, 2);           // 5 - 1 - 1 (the lost one, charged once) - 1
  EXPECT_EQ(server.calls("evalsha"), before + 2);  // never retried
}

TEST(RedisLimiter, LocalFallbackDecidesWithItsShareWhileRedisIsDown) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o;
  o.timeout = 50ms;
  o.on_failure = failure_policy::local_fallback;
  o.fallback_share = 0.5;
  o.breaker.failure_threshold = 0;  // every decision tries Redis first
  admit::redis::gcra limiter(conn, "fb", hourly, 10, o);
  ASSERT_TRUE(limiter.decide("k").consulted);
  server.kill();
  int admitted = 0;
  for (int i = 0; i < 8; ++i) {
    const limiter_result r = limiter.decide("k");
    EXPECT_EQ(r.source, decided_by::local_fallback);
    EXPECT_TRUE(r.error == errc::timeout || r.error == errc::outcome_unknown) << r.error.message();
    admitted += r.decision.admitted ? 1 : 0;
    if (i == 7) {
      EXPECT_FALSE(r.decision.admitted);
      EXPECT_GT(r.decision.retry_after, 0ns);
      EXPECT_LE(r.decision.retry_after, 2h);  // the local GCRA's wait, at half the rate
    }
  }
  EXPECT_EQ(admitted, 5);                                  // half of the burst of 10, per process, for this key
  EXPECT_TRUE(limiter.decide("other").decision.admitted);  // keys are separate locally too
  EXPECT_TRUE(limiter.decide("k", 11).decision.exceeds_capacity());
  EXPECT_EQ(limiter.statistics().failures, 10u);
}

TEST(RedisLimiter, TheBreakerStopsCallingADeadRedisAndProbesItsWayBack) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  limiter_options o;
  o.timeout = 100ms;
  o.breaker = {.failure_threshold = 3, .open_for = 200ms};
  o.on_event = log.hook();
  o.detect_lost_state = true;
  admit::redis::gcra limiter(conn, "br", admit::rate::per_second(1000), 100, o);
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
    ASSERT_EQ(r.error, limiter_errc::circuit_open);
    ASSERT_FALSE(r.decision.admitted);
  }
  EXPECT_LT(clock_type::now() - t0, o.timeout);  // 100 decisions in less than one deadline
  EXPECT_EQ(limiter.statistics().circuit_refused, 100u);
  auto [aec, ad] = decide_async(limiter, "k", 1).get();
  EXPECT_EQ(aec, limiter_errc::circuit_open);

  server.start();
  limiter_result back;
  ASSERT_TRUE(eventually([&] { return (back = limiter.decide("k")).consulted; }));
  EXPECT_TRUE(back.decision.admitted);
  EXPECT_EQ(limiter.circuit_state(), breaker_state::closed);
  EXPECT_EQ(log.count(limiter_event_kind::circuit_closed), 1);
  EXPECT_EQ(limiter.statistics().circuit_opened, 1u);
}

TEST(RedisLimiter, LostStateIsReportedAfterAFlushAndARestart) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  limiter_options o = patient();
  o.on_event = log.hook();
  o.detect_lost_state = true;
  admit::redis::gcra limiter(conn, "ls", hourly, 5, o);
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

TEST(RedisLimiter, ARegressedEpochIsLostStateToo) {
  // A failover to a replica that had not received the last admissions: the epoch's count goes back.
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  limiter_options o = patient();
  o.on_event = log.hook();
  o.detect_lost_state = true;
  admit::redis::gcra limiter(conn, "rg", hourly, 10, o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(server.admin({"HGET", limiter.epoch_key(), "seq"}), "3");
  server.admin({"HSET", limiter.epoch_key(), "seq", "1"});  // the replica had only the first admission
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 1);
  ASSERT_TRUE(limiter.decide("k").decision.admitted);
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 1);
}

TEST(RedisLimiter, StateThatExpiredIsNotLostState) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  event_log log;
  limiter_options o = patient();
  o.on_event = log.hook();
  o.detect_lost_state = true;
  // Full again 50 ms after an admission: the state key and the epoch expire with it. (Long enough for the
  // PEXPIRETIME below to find the epoch still there on a loaded machine: at 3 ms it once read -2, gone.)
  admit::redis::gcra limiter(conn, "ex", admit::rate::every(50ms), 1, o);
  for (int round = 0; round < 3; ++round) {
    limiter_result r;
    ASSERT_TRUE(eventually([&] { return (r = limiter.decide("k")).decision.admitted; }));
    const std::string expiry = server.admin({"PEXPIRETIME", limiter.epoch_key()});
    EXPECT_GE(std::stoll(expiry) * 1000,
              std::chrono::duration_cast<std::chrono::microseconds>(r.server_time + r.decision.reset_after).count())
        << "the epoch must outlive the state";
    ASSERT_TRUE(eventually([&] { return server.admin({"EXISTS", limiter.epoch_key()}) == "0"; }));
  }
  EXPECT_EQ(log.count(limiter_event_kind::lost_state), 0);
}

TEST(RedisLimiter, LeasingSpendsTheSurplusLocally) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.lease = 10;
  o.lease_ttl = 1h;
  admit::redis::gcra limiter(conn, "lease", hourly, 100, o);
  ASSERT_TRUE(limiter.decide("warm", 0).consulted);  // loads the script (a query takes no lease)
  const long long before = server.calls("evalsha");
  const limiter_result first = limiter.decide("k");
  EXPECT_EQ(first.source, decided_by::redis);
  EXPECT_EQ(first.granted, 10);
  EXPECT_EQ(first.decision.remaining, 90);
  for (int i = 0; i < 9; ++i) {
    const limiter_result r = limiter.decide("k");
    ASSERT_EQ(r.source, decided_by::lease) << i;
    EXPECT_TRUE(r.decision.admitted);
    EXPECT_EQ(r.decision.remaining, 8 - i);
  }
  auto [ec, d] = decide_async(limiter, "k", 1).get();  // the lease is spent: Redis again, asynchronously
  EXPECT_FALSE(ec);
  EXPECT_EQ(d.remaining, 80);
  EXPECT_EQ(server.calls("evalsha"), before + 2);
  EXPECT_EQ(limiter.statistics().leased, 9u);
  // A request larger than the lease holds goes to Redis, and takes no more than is available.
  admit::redis::gcra small(conn, "lease2", hourly, 4, [] {
    limiter_options s = patient();
    s.lease = 4;
    return s;
  }());
  EXPECT_EQ(small.decide("k", 3).granted, 4);
  EXPECT_EQ(small.decide("k", 1).source, decided_by::lease);
  const limiter_result empty = small.decide("k", 1);
  EXPECT_EQ(empty.source, decided_by::redis);
  EXPECT_FALSE(empty.decision.admitted);
}

TEST(RedisLimiter, LeasingOverAdmitsByAtMostLeaseMinusOnePerProcess) {
  // P processes (limiters on their own connections), each leasing k. Every token is charged in Redis before it is
  // spent, but a leased token can be spent after the limit has refilled: within one refill the fleet can admit the
  // burst plus what the processes hold, (k - 1) each. Refilling is simulated by deleting the state key (a GCRA key
  // that has reached its reset_after is exactly an absent key).
  constexpr int processes = 4;
  constexpr std::int64_t k = 5, burst = 20;
  redis_server server;
  io_thread io;
  std::vector<std::unique_ptr<connection>> conns;
  std::vector<std::unique_ptr<admit::redis::gcra>> fleet;
  limiter_options o = patient();
  o.lease = k;
  o.lease_ttl = 1h;
  for (int p = 0; p < processes; ++p) {
    conns.push_back(std::make_unique<connection>(io.executor(), server.url()));
    fleet.push_back(std::make_unique<admit::redis::gcra>(*conns.back(), "fleet", hourly, burst, o));
  }
  for (auto& l : fleet) ASSERT_TRUE(l->decide("k").decision.admitted);  // each takes k, spends 1, holds k - 1
  EXPECT_FALSE(fleet[0]->decide("k", k).decision.admitted);             // Redis is empty: 4 × 5 = 20 charged
  server.admin({"DEL", fleet[0]->storage_key("k")});                    // the limit refills

  std::int64_t admitted = 0;
  for (bool any = true; any;) {
    any = false;
    for (auto& l : fleet) {
      if (l->decide("k").decision.admitted) {
        ++admitted;
        any = true;
      }
    }
  }
  EXPECT_EQ(admitted, burst + processes * (k - 1));  // the documented bound, reached
}

TEST(RedisLimiter, InvalidOptionsNameTheValue) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const auto message = [&](limiter_options o) -> std::string {
    try {
      admit::redis::gcra g(conn, "x", hourly, 5, std::move(o));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  limiter_options o;
  o.fallback_share = 1.5;
  EXPECT_NE(message(o).find("fallback_share"), std::string::npos) << message(o);
  o = {};
  o.lease = 6;
  EXPECT_NE(message(o).find("lease 6 exceeds the limit 5"), std::string::npos) << message(o);
  o = {};
  o.breaker.open_for = 0ns;
  EXPECT_NE(message(o).find("open_for"), std::string::npos) << message(o);
  o = {};
  o.timeout = 0ns;
  EXPECT_NE(message(o).find("timeout"), std::string::npos) << message(o);
}

}  // namespace
