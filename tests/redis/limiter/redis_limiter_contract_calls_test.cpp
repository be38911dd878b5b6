// The contract every distributed limiter shares, run against a real redis-server for each of the five algorithms
// (gcra, token_bucket, fixed_window, sliding_window, sliding_log), part 2: the calls themselves — batching (shared
// calls that count exactly, max_batch 1, a corrupt key failing alone, a cancelled decision never sent), leasing and
// its over-admission bound, SCRIPT FLUSH, refusals and queries that write nothing, a hot key under 64 callers, a Redis
// Cluster, the keys' hash tag and the options' checks. Part 1 (failure policies, breaker, lost state) is
// redis_limiter_contract_test.cpp.
#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "io_thread.hpp"
#include "limiter_kinds.hpp"
#include "limiter_testing.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::cluster;
using admit::redis::connection;
using admit::redis::decided_by;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::testing::decide_async;
using admit::redis::testing::decide_concurrently;
using admit::redis::testing::detailed;
using admit::redis::testing::dirty;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_cluster;
using admit::redis::testing::redis_server;
using admit::redis::testing::server_now;
using admit::redis::testing::traced;
namespace asio = boost::asio;

template <class Kind>
class RedisLimiterContractCalls : public ::testing::Test {};
TYPED_TEST_SUITE(RedisLimiterContractCalls, admit::redis::testing::limiter_kinds, admit::redis::testing::kind_names);

// ---- batching ----

TYPED_TEST(RedisLimiterContractCalls, ConcurrentDecisionsShareScriptCallsAndCountExactly) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  constexpr std::int64_t limit = 300;
  const auto limiter = TypeParam::make(conn, "batched", limit, patient());
  constexpr int callers = 64, per_caller = 20;
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, callers, per_caller);
  std::int64_t admitted = 0;
  for (const traced& t : results) {
    ASSERT_TRUE(t.result.consulted) << t.result.error.message() << " " << t.result.message;
    admitted += t.result.decision.admitted ? 1 : 0;
  }
  EXPECT_EQ(admitted, limit);
  // The completions of one read are handled together, and so are their callers' next decisions.
  const long long calls = server.script_calls();
  EXPECT_LE(calls, callers * per_caller / 4) << calls << " calls for " << callers * per_caller << " decisions";
  EXPECT_EQ(limiter.statistics().redis, static_cast<std::uint64_t>(callers * per_caller));
}

TYPED_TEST(RedisLimiterContractCalls, MaxBatchOneIsOneCallPerDecision) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.max_batch = 1;
  const auto limiter = TypeParam::make(conn, "single", 50, o);
  ASSERT_TRUE(limiter.decide("warm").consulted);  // the script loaded: no NOSCRIPT retries below
  const long long before = server.script_calls();
  constexpr int callers = 16, per_caller = 10;
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, callers, per_caller);
  std::int64_t admitted = 0;
  for (const traced& t : results) admitted += t.result.decision.admitted ? 1 : 0;
  EXPECT_EQ(admitted, 50);
  EXPECT_EQ(server.script_calls(), before + callers * per_caller);
}

TYPED_TEST(RedisLimiterContractCalls, ACorruptKeyFailsItsOwnDecisionNotTheBatch) {
  redis_server server;
  io_thread io;  // one thread: the flush runs after the handler below returns
  connection conn(io.executor(), server.url());
  const auto limiter = TypeParam::make(conn, "mixed", 10, patient());
  server.admin({"SET", limiter.storage_key("bad"), "not a number"});
  server.admin({"HSET", limiter.storage_key("hash"), "f", "v"});  // the script's reads raise WRONGTYPE
  ASSERT_TRUE(limiter.decide("warm").consulted);                  // connected, script loaded
  const long long before = server.script_calls();

  // Asked for in one handler on the client's executor: they leave together, as one call.
  std::future<limiter_result> good, bad, wrong_type, good_again;
  std::promise<void> asked;
  asio::post(conn.get_executor(), [&] {
    good = detailed(limiter, "good");
    bad = detailed(limiter, "bad");
    wrong_type = detailed(limiter, "hash");
    good_again = detailed(limiter, "good");
    asked.set_value();
  });
  asked.get_future().wait();
  const limiter_result g = good.get(), b = bad.get(), w = wrong_type.get(), g2 = good_again.get();
  EXPECT_EQ(server.script_calls(), before + 1);
  ASSERT_TRUE(g.consulted) << g.error.message() << " " << g.message;
  EXPECT_EQ(g.decision.remaining, 9);
  ASSERT_TRUE(g2.consulted) << g2.error.message() << " " << g2.message;
  EXPECT_EQ(g2.decision.remaining, 8);  // after `good` in the same call, at the same instant
  EXPECT_EQ(g2.server_time, g.server_time);
  EXPECT_FALSE(b.consulted);
  EXPECT_EQ(b.error, admit::make_error_code(admit::errc::error_reply));
  EXPECT_FALSE(b.message.empty());
  EXPECT_FALSE(b.decision.admitted);  // fail_closed
  EXPECT_FALSE(w.consulted);          // an error raised by Redis inside one decision is that decision's alone
  EXPECT_EQ(w.error, admit::make_error_code(admit::errc::error_reply));
  // (Redis's WRONGTYPE names no key: the script says which, and the likely cause.)
  EXPECT_NE(w.message.find("key " + limiter.storage_key("hash") + " does not hold"), std::string::npos) << w.message;
  EXPECT_NE(w.message.find("another algorithm's state"), std::string::npos) << w.message;
  EXPECT_FALSE(w.decision.admitted);  // fail_closed
}

TYPED_TEST(RedisLimiterContractCalls, ADecisionCancelledWhileItWaitsForItsBatchIsNeverSent) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const auto limiter = TypeParam::make(conn, "cancelled", 10, patient());
  ASSERT_TRUE(limiter.decide("warm").consulted);
  const long long before = server.script_calls();

  std::future<limiter_result> first, second;
  std::promise<limiter_result> third_done;
  asio::cancellation_signal signal;
  std::promise<void> asked;
  asio::post(conn.get_executor(), [&] {
    first = detailed(limiter, "k");
    second = detailed(limiter, "k");
    limiter.async_decide_detailed("k", 1, asio::bind_cancellation_slot(signal.slot(), [&](limiter_result r) {
                                    third_done.set_value(std::move(r));
                                  }));
    signal.emit(asio::cancellation_type::terminal);  // before the flush: the third is dropped from the batch
    asked.set_value();
  });
  asked.get_future().wait();
  const limiter_result t = third_done.get_future().get();
  EXPECT_EQ(t.error, admit::errc::cancelled);
  EXPECT_FALSE(t.consulted);

  EXPECT_EQ(first.get().decision.remaining, 9);
  EXPECT_EQ(second.get().decision.remaining, 8);
  EXPECT_EQ(server.script_calls(), before + 1);          // the first two, in one call
  EXPECT_EQ(limiter.decide("k").decision.remaining, 7);  // the cancelled one charged nothing
}

// ---- leasing ----

TYPED_TEST(RedisLimiterContractCalls, LeasingSpendsTheSurplusLocally) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.lease = 10;
  o.lease_ttl = 1h;
  const auto limiter = TypeParam::make(conn, "lease", 100, o);
  ASSERT_TRUE(limiter.decide("warm", 0).consulted);  // loads the script (a query takes no lease)
  const long long before = server.script_calls();
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
  EXPECT_EQ(server.script_calls(), before + 2);
  EXPECT_EQ(limiter.statistics().leased, 9u);
  // A request larger than the lease holds goes to Redis, and takes no more than is available.
  limiter_options s = patient();
  s.lease = 4;
  const auto small = TypeParam::make(conn, "lease2", 4, s);
  EXPECT_EQ(small.decide("k", 3).granted, 4);
  EXPECT_EQ(small.decide("k", 1).source, decided_by::lease);
  const limiter_result empty = small.decide("k", 1);
  EXPECT_EQ(empty.source, decided_by::redis);
  EXPECT_FALSE(empty.decision.admitted);
}

TYPED_TEST(RedisLimiterContractCalls, LeasingOverAdmitsByAtMostLeaseMinusOnePerProcess) {
  // P processes (limiters on their own connections), each leasing k. Every token is charged in Redis before it is
  // spent, but a leased token can be spent after the limit has refilled: within one refill the fleet can admit the
  // limit plus what the processes hold, (k - 1) each. Refilling is simulated by deleting the state key (an absent key
  // is a full limiter, for every algorithm).
  constexpr int processes = 4;
  constexpr std::int64_t k = 5, limit = 20;
  redis_server server;
  io_thread io;
  std::vector<std::unique_ptr<connection>> conns;
  std::vector<std::unique_ptr<typename TypeParam::type>> fleet;
  limiter_options o = patient();
  o.lease = k;
  o.lease_ttl = 1h;
  for (int p = 0; p < processes; ++p) {
    conns.push_back(std::make_unique<connection>(io.executor(), server.url()));
    fleet.push_back(std::make_unique<typename TypeParam::type>(TypeParam::make(*conns.back(), "fleet", limit, o)));
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
  EXPECT_EQ(admitted, limit + processes * (k - 1));  // the documented bound, reached
}

// ---- the script and the state ----

TYPED_TEST(RedisLimiterContractCalls, FunctionFlushBetweenDecisionsIsTransparent) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // Each flush costs one FUNCTION LOAD, nothing counts twice.
  const auto limiter = TypeParam::make(conn, "flush", 100, patient());
  for (int i = 0; i < 60; ++i) {
    if (i % 20 == 10) server.admin({"FUNCTION", "FLUSH"});
    const limiter_result r = limiter.decide("k");
    ASSERT_TRUE(r.consulted) << i << ": " << r.error.message() << " " << r.message;
    EXPECT_EQ(r.decision.remaining, 99 - i);
  }
  EXPECT_EQ(server.calls("function|load"), 4);  // the first call, then after each of the three flushes
}

TYPED_TEST(RedisLimiterContractCalls, FunctionFlushUnderConcurrentCallersChargesEachAdmissionOnce) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  // Callers in flight get "Function not found", load the library and retry once. The flush comes when a quarter of the
  // 768 decisions are in, right after the chains held back until then issue their next calls: at most 192 + 64 + 64
  // admissions before it, so the limit of 500 is not spent, admissions are retried too, and one retried after it had
  // been charged would leave fewer than 500 admitted. (sliding_window takes limits up to 868 with
  // its 30-day window: limiter_kinds.hpp.)
  constexpr std::int64_t limit = 500;
  const auto limiter = TypeParam::make(conn, "flush", limit, patient());
  std::int64_t flushed_at = 0;
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, 64, 12, [&] {
    server.admin({"FUNCTION", "FLUSH"});
    flushed_at = server_now(server);
  });
  std::int64_t admitted = 0, admitted_after_flush = 0;
  std::set<std::int64_t> remaining;
  for (const traced& t : results) {
    ASSERT_TRUE(t.result.consulted) << t.result.error.message() << " " << t.result.message;
    if (!t.result.decision.admitted) continue;
    ++admitted;
    admitted_after_flush += t.result.server_time.count() > flushed_at ? 1 : 0;
    remaining.insert(t.result.decision.remaining);
  }
  EXPECT_EQ(admitted, limit);
  ASSERT_EQ(remaining.size(), static_cast<std::size_t>(limit));  // limit - 1, ..., 0: each exactly once
  EXPECT_EQ(*remaining.begin(), 0);
  EXPECT_GT(admitted_after_flush, 0) << "the flush came after the limit was spent: the test proved nothing";
  EXPECT_GE(server.calls("function|load"), 2);  // the first call, then after the flush
}

TYPED_TEST(RedisLimiterContractCalls, AHotKeyUnder64ConcurrentCallersAdmitsExactlyTheLimit) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  // Nothing refills during the test, so exactly `limit` admissions are correct, each leaving a different remaining.
  constexpr std::int64_t limit = 100;
  const auto limiter = TypeParam::make(conn, "hot", limit, patient());
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, 64, 12);
  std::int64_t admitted = 0;
  std::set<std::int64_t> remaining;
  for (const traced& t : results) {
    ASSERT_TRUE(t.result.consulted) << t.result.error.message() << " " << t.result.message;
    if (!t.result.decision.admitted) continue;
    ++admitted;
    remaining.insert(t.result.decision.remaining);
  }
  EXPECT_EQ(admitted, limit);
  ASSERT_EQ(remaining.size(), static_cast<std::size_t>(limit));  // 99, 98, ..., 0: each exactly once
  EXPECT_EQ(*remaining.begin(), 0);
}

TYPED_TEST(RedisLimiterContractCalls, RefusalsAndQueriesWriteNothing) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.detect_lost_state = true;  // even with the epoch, a refusal or a query writes nothing
  const auto limiter = TypeParam::make(conn, "ro", 3, o);
  (void)limiter.decide("warm-up", 0);  // loads the function library (a write of its own)
  // n == 0 and n > limit on a fresh key: answered, nothing stored.
  const long long before = dirty(server);
  const limiter_result q = limiter.decide("fresh", 0);
  ASSERT_TRUE(q.consulted);
  EXPECT_TRUE(q.decision.admitted);
  EXPECT_EQ(q.decision.remaining, 3);
  EXPECT_EQ(q.decision.reset_after, 0ns);
  EXPECT_TRUE(limiter.decide("fresh", 4).decision.exceeds_capacity());
  EXPECT_EQ(server.admin({"EXISTS", limiter.storage_key("fresh")}), "0");
  EXPECT_EQ(server.admin({"EXISTS", limiter.epoch_key()}), "0");
  EXPECT_EQ(dirty(server), before);

  ASSERT_TRUE(limiter.decide("k", 3).decision.admitted);
  const long long written = dirty(server);
  const std::string expiry = server.admin({"PEXPIRETIME", limiter.storage_key("k")});
  const std::string epoch_expiry = server.admin({"PEXPIRETIME", limiter.epoch_key()});
  for (int i = 0; i < 20; ++i) {
    const limiter_result r = limiter.decide("k", i % 4);  // queries (n == 0) and refusals
    ASSERT_TRUE(r.consulted);
    EXPECT_EQ(r.decision.admitted, i % 4 == 0);
    if (i % 4 != 0) {
      EXPECT_GT(r.decision.retry_after, 0ns);
    }
  }
  EXPECT_EQ(dirty(server), written);
  EXPECT_EQ(server.admin({"PEXPIRETIME", limiter.storage_key("k")}), expiry);
  EXPECT_EQ(server.admin({"PEXPIRETIME", limiter.epoch_key()}), epoch_expiry);
}

TYPED_TEST(RedisLimiterContractCalls, KeysShareTheLimitersHashTag) {
  io_thread io;
  connection conn(io.executor(), "redis://127.0.0.1:1/0");  // nothing listens there: no call is made
  const auto limiter = TypeParam::make(conn, "api:v1", 5);
  EXPECT_EQ(limiter.storage_key("user:42"), "{api:v1}:user:42");
  EXPECT_EQ(limiter.storage_key(""), "{api:v1}:");
  EXPECT_EQ(limiter.epoch_key(), "{api:v1}");
  EXPECT_EQ(limiter.name(), "api:v1");
  EXPECT_EQ(limiter.limit(), 5);
}

// ---- a Redis Cluster ----

TYPED_TEST(RedisLimiterContractCalls, DecidesExactlyOnAClusterMasterThatIsNotTheSeed) {
  redis_cluster rc;
  io_thread io(2);
  cluster c(io.executor(), rc.url(0));
  std::string name;
  for (int i = 0; name.empty(); ++i) {
    const std::string candidate = "lim" + std::to_string(i);
    if (rc.owner_of("{" + candidate + "}") != 0) name = candidate;
  }
  limiter_options o = patient();
  o.detect_lost_state = true;  // the epoch key "{name}" lives in the same slot
  const auto limiter = TypeParam::make(c, name, 10, o);
  int admitted = 0;
  for (int i = 0; i < 15; ++i) {
    const limiter_result r = limiter.decide("k");
    ASSERT_TRUE(r.consulted) << name << ": " << r.error.message() << " " << r.message;
    admitted += r.decision.admitted ? 1 : 0;
  }
  EXPECT_EQ(admitted, 10);
  // Concurrent asynchronous decisions on another key (batched into shared calls).
  std::vector<std::future<limiter_result>> futures;
  for (int i = 0; i < 30; ++i) futures.push_back(limiter.async_decide_detailed("a", 1, asio::use_future));
  admitted = 0;
  for (auto& f : futures) {
    const limiter_result r = f.get();
    ASSERT_TRUE(r.consulted) << name << ": " << r.error.message() << " " << r.message;
    admitted += r.decision.admitted ? 1 : 0;
  }
  EXPECT_EQ(admitted, 10);
  const std::size_t owner = rc.owner_of("{" + name + "}");
  EXPECT_EQ(rc.admin(owner, {"EXISTS", limiter.storage_key("k"), limiter.storage_key("a"), limiter.epoch_key()}), "3");
}

// ---- configuration ----

TYPED_TEST(RedisLimiterContractCalls, InvalidOptionsNameTheValue) {
  io_thread io;
  connection conn(io.executor(), "redis://127.0.0.1:1/0");
  const auto message = [&](limiter_options o) -> std::string {
    try {
      (void)TypeParam::make(conn, "x", 5, std::move(o));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  const auto expect_names = [&](limiter_options o, const std::string& what) {
    const std::string m = message(std::move(o));
    EXPECT_NE(m.find(what), std::string::npos) << m;
    EXPECT_EQ(m.rfind("admit::redis::", 0), 0u) << m;  // "admit::redis::<algorithm>: ..."
  };
  limiter_options o;
  o.fallback_share = 1.5;
  expect_names(o, "fallback_share must be in (0, 1], got 1.5");
  o = {};
  o.lease = 6;
  expect_names(o, "lease 6 exceeds the limit 5");
  o = {};
  o.lease = -1;
  expect_names(o, "lease must not be negative, got -1");
  o = {};
  o.breaker.open_for = 0ns;
  expect_names(o, "open_for");
  o = {};
  o.timeout = 0ns;
  expect_names(o, "timeout must be positive and finite, got 0ns");
  o.timeout = std::chrono::nanoseconds::max();
  expect_names(o, "timeout");
  o = {};
  o.failure_retry_after = -1ms;
  expect_names(o, "failure_retry_after must not be negative, got -1000000ns");
  o = {};
  o.max_batch = 0;
  expect_names(o, "max_batch must be at least 1, got 0");
  o = {};
  o.lease = 2;
  o.lease_ttl = 0ns;
  expect_names(o, "lease_ttl must be positive");
  o = {};
  o.fallback_max_keys = 0;
  expect_names(o, "fallback_max_keys must be at least 1, got 0");
  o = {};
  o.lease_max_keys = 0;
  expect_names(o, "lease_max_keys must be at least 1, got 0");
  EXPECT_NE(message({}).find("no exception"), std::string::npos);
}

}  // namespace
