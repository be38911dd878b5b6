// close() delivers what was asked before it: fire-and-forget calls made just before close() (or the destructor) are
// written and answered; against a paused server close() returns at its deadline and counts what it could not deliver;
// the same for a cluster.
#include <gtest/gtest.h>

#include <boost/asio/prefer.hpp>

#include <boost/asio/execution/outstanding_work.hpp>

#include <atomic>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <string>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::close_result;
using admit::redis::connection;
using admit::redis::reply;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t calls = 2000;
constexpr auto margin = 500ms;  // scheduling slack on a loaded machine

// Counts the completions of fire-and-forget calls by their error.
struct outcomes {
  std::atomic<std::size_t> ok{0}, closed{0}, other{0};
  auto handler() {
    return [this](boost::system::error_code ec, const reply&) {
      if (!ec) {
        ++ok;
      } else if (ec == errc::closed) {
        ++closed;
      } else {
        ++other;
      }
    };
  }
};

TEST(RedisClose, DeliversFireAndForgetCallsMadeJustBefore) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_FALSE(conn.connect());
  for (std::size_t i = 0; i < calls; ++i) conn.async_execute("INCR", "n", boost::asio::detached);
  const close_result r = conn.close();
  EXPECT_TRUE(r.waited);
  EXPECT_TRUE(r.delivered()) << r.unsent << " unsent, " << r.unanswered << " unanswered";
  EXPECT_EQ(server.admin({"GET", "n"}), std::to_string(calls));
  // Idempotent: the second close returns the first one's outcome.
  const close_result again = conn.close();
  EXPECT_TRUE(again.delivered());
  EXPECT_EQ(conn.execute("PING").error, errc::closed);
}

TEST(RedisClose, TheDestructorDeliversToo) {
  redis_server server;
  io_thread io;
  outcomes seen;
  {
    connection conn(io.executor(), server.url());  // not connected yet: the first call starts connecting
    for (std::size_t i = 0; i < calls; ++i) conn.async_execute("INCR", "n", seen.handler());
  }
  EXPECT_EQ(server.admin({"GET", "n"}), std::to_string(calls));
  // Every handler runs (posted to the io thread before the destructor returned), each with its reply.
  ASSERT_TRUE(eventually([&] { return seen.ok.load() == calls; })) << seen.ok.load();
  EXPECT_EQ(seen.closed.load(), 0u);
}

TEST(RedisClose, APausedServerHoldsCloseUntilItsDeadline) {
  redis_server server;
  io_thread io;
  auto o = admit::redis::parse_url(server.url());
  o.close_timeout = 300ms;
  o.command_timeout = std::chrono::nanoseconds::max();  // the calls wait for close, not for their own deadlines
  connection conn(io.executor(), o);
  ASSERT_FALSE(conn.connect());
  server.pause(5000ms);
  outcomes seen;
  for (std::size_t i = 0; i < calls; ++i) conn.async_execute("INCR", "n", seen.handler());
  const auto t0 = clock_type::now();
  const close_result r = conn.close();
  const auto waited = clock_type::now() - t0;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 300ms + margin);
  EXPECT_FALSE(r.delivered());
  EXPECT_EQ(r.unsent + r.unanswered, calls);  // written (the server reads while paused) but unanswered
  ASSERT_TRUE(eventually([&] { return seen.closed.load() == calls; }));
  EXPECT_EQ(seen.ok.load(), 0u);
  EXPECT_EQ(seen.other.load(), 0u);
}

TEST(RedisClose, CallsToAServerThatIsDownAreCountedUnsent) {
  std::uint16_t port = 0;
  {
    redis_server server;  // a port that was free and is free again
    port = server.port();
  }
  io_thread io;
  admit::redis::connection_options o;
  o.port = port;
  o.command_timeout = std::chrono::nanoseconds::max();
  o.close_timeout = 200ms;
  connection conn(io.executor(), o);
  outcomes seen;
  for (int i = 0; i < 10; ++i) conn.async_execute("INCR", "n", seen.handler());
  const auto t0 = clock_type::now();
  const close_result r = conn.close();
  EXPECT_GE(clock_type::now() - t0, 200ms);
  EXPECT_EQ(r.unsent, 10u);
  EXPECT_EQ(r.unanswered, 0u);
  ASSERT_TRUE(eventually([&] { return seen.closed.load() == 10; }));
}

TEST(RedisClose, ZeroTimeoutDropsAtOnce) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_FALSE(conn.connect());
  server.pause(5000ms);
  outcomes seen;
  for (int i = 0; i < 10; ++i) conn.async_execute("INCR", "n", seen.handler());
  const auto t0 = clock_type::now();
  const close_result r = conn.close_for(0s);
  EXPECT_LT(clock_type::now() - t0, margin);
  EXPECT_EQ(r.unsent + r.unanswered, 10u);
  ASSERT_TRUE(eventually([&] { return seen.closed.load() == 10; }));
}

// close() on a thread that runs the connection's executor, given as `ex` (plain or with tracked work: both are that
// thread's): it would wait for itself, so it returns at once, and the delivery goes on in the background.
template <class Executor>
void expect_close_on_its_own_thread_does_not_wait(io_thread& io, const Executor& ex, redis_server& server) {
  auto conn = std::make_shared<connection>(ex, server.url());
  ASSERT_FALSE(conn->connect());
  std::promise<close_result> closed;
  boost::asio::post(io.executor(), [&] {
    for (std::size_t i = 0; i < calls; ++i) conn->async_execute("INCR", "n", boost::asio::detached);
    closed.set_value(conn->close());
  });
  auto f = closed.get_future();
  ASSERT_EQ(f.wait_for(500ms), std::future_status::ready) << "close() waited on the executor's own thread";
  EXPECT_FALSE(f.get().waited);
  ASSERT_TRUE(eventually([&] { return server.admin({"GET", "n"}) == std::to_string(calls); }));
}

TEST(RedisClose, OnTheExecutorsThreadCloseDoesNotWaitButStillDelivers) {
  redis_server server;
  io_thread io;
  expect_close_on_its_own_thread_does_not_wait(io, io.executor(), server);
}

TEST(RedisClose, OnTheThreadOfAnExecutorWithTrackedWorkCloseDoesNotWaitEither) {
  redis_server server;
  io_thread io;
  expect_close_on_its_own_thread_does_not_wait(
      io, boost::asio::prefer(io.executor(), boost::asio::execution::outstanding_work.tracked), server);
}

TEST(RedisClose, AnExecutorThatDoesNotRunCannotHoldCloseBeyondItsDeadline) {
  redis_server server;
  boost::asio::io_context never_run;
  auto o = admit::redis::parse_url(server.url());
  o.command_timeout = std::chrono::nanoseconds::max();
  connection conn(never_run.get_executor(), o);
  for (int i = 0; i < 10; ++i) conn.async_execute("INCR", "n", boost::asio::detached);
  auto blocked = std::async(std::launch::async, [&] { return conn.execute("PING"); });
  const auto t0 = clock_type::now();
  const close_result r = conn.close_for(200ms);
  EXPECT_GE(clock_type::now() - t0, 200ms);
  EXPECT_LT(clock_type::now() - t0, 200ms + margin);
  EXPECT_TRUE(r.waited);
  EXPECT_EQ(r.unanswered, 0u);
  // The blocked call may be counted or not, depending on whether it was queued before close().
  EXPECT_GE(r.unsent, 10u);
  EXPECT_EQ(blocked.get().error, errc::closed);
  EXPECT_EQ(server.admin({"GET", "n"}), "(nil)");
}

TEST(RedisClose, AClusterDeliversFireAndForgetCallsMadeJustBefore) {
  admit::redis::testing::redis_cluster nodes;
  io_thread io;
  admit::redis::cluster c(io.executor(), nodes.url(0));
  // Keys on every master, the slot map known first (so that no call is redirected after close()).
  ASSERT_TRUE(c.execute("SET", "{a}", 0).ok());
  ASSERT_TRUE(eventually([&] { return c.statistics().refreshes > 0; }));
  const std::string keys[] = {"{a}:n", "{b}:n", "{c}:n", "{d}:n"};
  for (std::size_t i = 0; i < calls; ++i) {
    c.async_execute_command(std::nullopt, {"INCR", keys[i % 4]}, boost::asio::detached);
  }
  const close_result r = c.close();
  EXPECT_TRUE(r.delivered()) << r.unsent << " unsent, " << r.unanswered << " unanswered";
  for (const auto& k : keys) EXPECT_EQ(nodes.admin(nodes.owner_of(k), {"GET", k}), std::to_string(calls / 4)) << k;
  EXPECT_EQ(c.execute("GET", "{a}:n").error, errc::closed);
}

}  // namespace
