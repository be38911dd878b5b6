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
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/redis/connection.hpp"
#include "admit/redis/errc.hpp"
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

// Pauses every client of `server` for `ms` milliseconds: the calls written meanwhile stay in flight until it ends.
void pause(const redis_server& server, int ms) { server.admin({"CLIENT", "PAUSE", std::to_string(ms), "ALL"}); }

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
  // At most two calls are in flight: everything asked for meanwhile waits and leaves together.
  const long long calls = server.calls("evalsha");
  std::printf("%lld calls for %d decisions\n", calls, callers * per_caller);
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
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "mixed", hourly, 10, patient());
  server.admin({"SET", limiter.storage_key("bad"), "not a number"});
  ASSERT_TRUE(limiter.decide("warm").consulted);  // connected, script loaded
  const long long before = server.calls("evalsha");
  const auto written = conn.statistics().commands_written;

  // Two calls held in flight by the pause; the next three wait for them and leave as one call.
  pause(server, 500);
  auto first = detailed(limiter, "a");
  auto second = detailed(limiter, "b");
  ASSERT_TRUE(eventually([&] { return conn.statistics().commands_written >= written + 2; }));
  auto good = detailed(limiter, "good");
  auto bad = detailed(limiter, "bad");
  auto good_again = detailed(limiter, "good");

  EXPECT_TRUE(first.get().decision.admitted);
  EXPECT_TRUE(second.get().decision.admitted);
  const limiter_result g = good.get(), b = bad.get(), g2 = good_again.get();
  EXPECT_EQ(server.calls("evalsha"), before + 3);
  ASSERT_TRUE(g.consulted) << g.error.message() << " " << g.message;
  EXPECT_EQ(g.decision.remaining, 9);
  ASSERT_TRUE(g2.consulted) << g2.error.message() << " " << g2.message;
  EXPECT_EQ(g2.decision.remaining, 8);  // after `good` in the same call, at the same instant
  EXPECT_EQ(g2.server_time, g.server_time);
  EXPECT_FALSE(b.consulted);
  EXPECT_EQ(b.error, admit::redis::make_error_code(limiter_errc::error_reply));
  EXPECT_NE(b.message.find("does not hold an integer TAT"), std::string::npos) << b.message;
}

TEST(RedisBatching, ADecisionCancelledWhileItWaitsForItsBatchIsNeverSent) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "cancelled", hourly, 10, patient());
  ASSERT_TRUE(limiter.decide("warm").consulted);
  const long long before = server.calls("evalsha");
  const auto written = conn.statistics().commands_written;

  pause(server, 500);
  auto first = detailed(limiter, "k");
  auto second = detailed(limiter, "k");
  ASSERT_TRUE(eventually([&] { return conn.statistics().commands_written >= written + 2; }));
  boost::asio::cancellation_signal signal;
  std::promise<limiter_result> third_done;
  limiter.async_decide_detailed("k", 1, boost::asio::bind_cancellation_slot(signal.slot(), [&](limiter_result r) {
                                  third_done.set_value(std::move(r));
                                }));
  // Emitted on the connection's executor, where the handler's slot may be used.
  boost::asio::post(conn.get_executor(), [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  auto third = third_done.get_future();
  ASSERT_EQ(third.wait_for(5s), std::future_status::ready);  // at once, not after the pause
  const limiter_result t = third.get();
  EXPECT_EQ(t.error, boost::asio::error::operation_aborted);
  EXPECT_FALSE(t.consulted);

  EXPECT_EQ(first.get().decision.remaining, 9);
  EXPECT_EQ(second.get().decision.remaining, 8);
  EXPECT_EQ(server.calls("evalsha"), before + 2);
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
