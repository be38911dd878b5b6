// Faults: per-call deadlines against a paused server (late replies discarded in order), a server killed with calls
// in flight (outcome unknown, never retried) and restarted (reconnection with backoff), cancellation.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::connection;
using admit::redis::reply;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;

constexpr auto fault_margin = 150ms;  // scheduling slack on a loaded machine

TEST(RedisFaults, BlockingDeadlineHonoredAndLateReplyDiscarded) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_TRUE(conn.execute("SET", "k", "v").ok());
  server.pause(800ms);
  const auto t0 = clock_type::now();
  const auto r = conn.execute_for(100ms, "GET", "k");
  const auto waited = clock_type::now() - t0;
  EXPECT_EQ(r.error, errc::timeout);
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 100ms + fault_margin);
  // After the pause, the next call gets its own reply, not the GET's.
  const auto echo = conn.execute_for(10s, "ECHO", "after");
  EXPECT_EQ(echo.value, reply::string("after"));
  EXPECT_EQ(conn.statistics().discarded_replies, 1u);
}

TEST(RedisFaults, AsyncDeadlineHonoredAndLateReplyDiscarded) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_TRUE(conn.execute("PING").ok());
  server.pause(800ms);
  std::promise<std::pair<boost::system::error_code, clock_type::duration>> done;
  const auto t0 = clock_type::now();
  conn.async_execute_for(100ms, "INCR", "n", [&](boost::system::error_code ec, reply) {
    done.set_value({ec, clock_type::now() - t0});
  });
  const auto [ec, waited] = done.get_future().get();
  EXPECT_EQ(ec, errc::timeout);
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 100ms + fault_margin);
  EXPECT_EQ(conn.execute_for(10s, "GET", "n").value, reply::string("1"));  // INCR ran later; its reply was dropped
  EXPECT_EQ(conn.statistics().discarded_replies, 1u);
}

TEST(RedisFaults, ExpiredDeadlineSendsNothing) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_TRUE(conn.execute("PING").ok());
  const auto written = conn.statistics().commands_written;
  EXPECT_EQ(conn.execute_for(0ms, "INCR", "x").error, errc::timeout);
  EXPECT_EQ(conn.execute_until(clock_type::now() - 1s, "INCR", "x").error, errc::timeout);
  EXPECT_EQ(conn.statistics().commands_written, written);
  EXPECT_EQ(server.admin({"GET", "x"}), "(nil)");
}

TEST(RedisFaults, CancellationCompletesWithOperationAborted) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_TRUE(conn.execute("PING").ok());
  server.pause(500ms);
  asio::cancellation_signal signal;
  std::promise<boost::system::error_code> done;
  asio::post(io.context(), [&] {
    conn.async_execute("PING", asio::bind_cancellation_slot(
                                   signal.slot(), [&](boost::system::error_code ec, reply) { done.set_value(ec); }));
  });
  ASSERT_TRUE(eventually([&] { return conn.statistics().commands_written >= 2; }));
  asio::post(io.context(), [&] { signal.emit(asio::cancellation_type::terminal); });
  EXPECT_EQ(done.get_future().get(), asio::error::operation_aborted);
  EXPECT_EQ(conn.execute_for(10s, "ECHO", "next").value, reply::string("next"));
}

TEST(RedisFaults, KilledServerFailsInFlightCallsAsOutcomeUnknownThenReconnects) {
  redis_server server;
  io_thread io;
  admit::redis::connection_options options = admit::redis::parse_url(server.url());
  options.command_timeout = 30s;
  options.reconnect_initial = 10ms;
  options.reconnect_max = 100ms;
  connection conn(io.executor(), options);
  ASSERT_TRUE(conn.execute("PING").ok());
  server.pause(20s);  // the calls below are written but not answered

  constexpr int n = 16;
  std::mutex m;
  std::vector<boost::system::error_code> errors;
  std::promise<void> all;
  for (int i = 0; i < n; ++i) {
    conn.async_execute("INCR", "counter", [&](boost::system::error_code ec, reply) {
      std::lock_guard lock(m);
      errors.push_back(ec);
      if (errors.size() == n) all.set_value();
    });
  }
  ASSERT_TRUE(eventually([&] { return conn.statistics().commands_written == 1 + n; }));
  server.kill();
  all.get_future().get();
  for (const auto& ec : errors) EXPECT_EQ(ec, errc::outcome_unknown) << ec.message();
  EXPECT_EQ(conn.statistics().connection_losses, 1u);

  // A call made while the server is down waits for the reconnection (it was never sent, so it is safe).
  std::promise<std::pair<boost::system::error_code, reply>> later;
  conn.async_execute("ECHO", "back", [&](boost::system::error_code ec, reply r) { later.set_value({ec, r}); });
  server.start();
  const auto [ec, r] = later.get_future().get();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(r, reply::string("back"));
  EXPECT_TRUE(conn.execute("PING").ok());
  EXPECT_EQ(conn.statistics().connects, 2u);
  // Nothing was retried: the restarted server (no persistence) never saw an INCR.
  EXPECT_EQ(server.admin({"GET", "counter"}), "(nil)");
}

TEST(RedisFaults, DownServerTimesOutInsteadOfStalling) {
  redis_server server;
  io_thread io;
  admit::redis::connection_options options = admit::redis::parse_url(server.url());
  options.reconnect_initial = 10ms;
  options.reconnect_max = 50ms;
  connection conn(io.executor(), options);
  ASSERT_TRUE(conn.execute("PING").ok());
  server.kill();
  ASSERT_TRUE(eventually([&] { return !conn.is_connected(); }));
  const auto t0 = clock_type::now();
  EXPECT_EQ(conn.execute_for(100ms, "PING").error, errc::timeout);
  EXPECT_LT(clock_type::now() - t0, 100ms + fault_margin);
  server.start();
  EXPECT_TRUE(conn.execute_for(10s, "PING").ok());
}

}  // namespace
