// Batching of a distributed limiter's decisions (limiter_options::max_batch), against a real redis-server: concurrent
// decisions share script calls and still count exactly; max_batch = 1 is one call per decision; a decision whose
// state key is corrupt fails alone, not its batch; a decision cancelled while it waits for its batch is never sent.
#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/errc.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/limiter_options.hpp"
#include "admit/redis/limiter_result.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::limiter_errc;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::testing::decide_concurrently;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using admit::redis::testing::traced;

const admit::rate hourly = admit::rate::per(1, std::chrono::hours(1));  // no refill within a test

// async_decide_detailed's result as a future.
std::future<limiter_result> detailed(const admit::redis::limiter& l, const std::string& key) {
  auto p = std::make_shared<std::promise<limiter_result>>();
  auto f = p->get_future();
  l.async_decide_detailed(key, 1, [p](limiter_result r) { p->set_value(std::move(r)); });
  return f;
}

TEST(RedisBatching, ConcurrentDecisionsShareScriptCallsAndCountExactly) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  constexpr std::int64_t burst = 300;
  admit::redis::gcra limiter(conn, "batched", hourly, burst, patient());
  constexpr int callers = 64, per_caller = 20;
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, callers, per_caller);

  std::int64_t admitted = 0;
  for (const traced& t : results) {
    ASSERT_TRUE(t.result.consulted) << t.result.error.message() << " " << t.result.message;
    admitted += t.result.decision.admitted ? 1 : 0;
  }
  EXPECT_EQ(admitted, burst);
  // The completions of one read are handled together, and so are their callers' next decisions.
  const long long calls = server.calls("evalsha");
  EXPECT_LE(calls, callers * per_caller / 4) << calls << " calls for " << callers * per_caller << " decisions";
  EXPECT_EQ(limiter.statistics().redis, static_cast<std::uint64_t>(callers * per_caller));
}

TEST(RedisBatching, MaxBatchOneIsOneCallPerDecision) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.max_batch = 1;
  admit::redis::gcra limiter(conn, "single", hourly, 50, o);
  ASSERT_TRUE(limiter.decide("warm").consulted);  // the script loaded: no NOSCRIPT retries below
  const long long before = server.calls("evalsha");
  constexpr int callers = 16, per_caller = 10;
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, callers, per_caller);
  std::int64_t admitted = 0;
  for (const traced& t : results) admitted += t.result.decision.admitted ? 1 : 0;
  EXPECT_EQ(admitted, 50);
  EXPECT_EQ(server.calls("evalsha"), before + callers * per_caller);
}

TEST(RedisBatching, ACorruptKeyFailsItsOwnDecisionNotTheBatch) {
  redis_server server;
  io_thread io;  // one thread: the flush runs after the handler below returns
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "mixed", hourly, 10, patient());
  server.admin({"SET", limiter.storage_key("bad"), "not a number"});
  server.admin({"HSET", limiter.storage_key("hash"), "f", "v"});  // GET raises WRONGTYPE inside the script
  ASSERT_TRUE(limiter.decide("warm").consulted);                  // connected, script loaded
  const long long before = server.calls("evalsha");

  // Asked for in one handler on the client's executor: they leave together, as one call.
  std::future<limiter_result> good, bad, wrong_type, good_again;
  std::promise<void> asked;
  boost::asio::post(conn.get_executor(), [&] {
    good = detailed(limiter, "good");
    bad = detailed(limiter, "bad");
    wrong_type = detailed(limiter, "hash");
    good_again = detailed(limiter, "good");
    asked.set_value();
  });
  asked.get_future().wait();
  const limiter_result g = good.get(), b = bad.get(), w = wrong_type.get(), g2 = good_again.get();
  EXPECT_EQ(server.calls("evalsha"), before + 1);
  ASSERT_TRUE(g.consulted) << g.error.message() << " " << g.message;
  EXPECT_EQ(g.decision.remaining, 9);
  ASSERT_TRUE(g2.consulted) << g2.error.message() << " " << g2.message;
  EXPECT_EQ(g2.decision.remaining, 8);  // after `good` in the same call, at the same instant
  EXPECT_EQ(g2.server_time, g.server_time);
  EXPECT_FALSE(b.consulted);
  EXPECT_EQ(b.error, admit::redis::make_error_code(limiter_errc::error_reply));
  EXPECT_NE(b.message.find("does not hold an integer TAT"), std::string::npos) << b.message;
  EXPECT_FALSE(w.consulted);  // an error raised by Redis inside one decision is that decision's alone
  EXPECT_NE(w.message.find("WRONGTYPE"), std::string::npos) << w.message;
}

TEST(RedisBatching, ADecisionCancelledWhileItWaitsForItsBatchIsNeverSent) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "cancelled", hourly, 10, patient());
  ASSERT_TRUE(limiter.decide("warm").consulted);
  const long long before = server.calls("evalsha");

  std::future<limiter_result> first, second;
  std::promise<limiter_result> third_done;
  boost::asio::cancellation_signal signal;
  std::promise<void> asked;
  boost::asio::post(conn.get_executor(), [&] {
    first = detailed(limiter, "k");
    second = detailed(limiter, "k");
    limiter.async_decide_detailed("k", 1, boost::asio::bind_cancellation_slot(signal.slot(), [&](limiter_result r) {
                                    third_done.set_value(std::move(r));
                                  }));
    signal.emit(boost::asio::cancellation_type::terminal);  // before the flush: the third is dropped from the batch
    asked.set_value();
  });
  asked.get_future().wait();
  const limiter_result t = third_done.get_future().get();
  EXPECT_EQ(t.error, boost::asio::error::operation_aborted);
  EXPECT_FALSE(t.consulted);

  EXPECT_EQ(first.get().decision.remaining, 9);
  EXPECT_EQ(second.get().decision.remaining, 8);
  EXPECT_EQ(server.calls("evalsha"), before + 1);        // the first two, in one call
  EXPECT_EQ(limiter.decide("k").decision.remaining, 7);  // the cancelled one charged nothing
}

TEST(RedisBatching, MaxBatchZeroIsRefused) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o;
  o.max_batch = 0;
  EXPECT_THROW(admit::redis::gcra(conn, "zero", hourly, 10, o), std::invalid_argument);
}

}  // namespace
