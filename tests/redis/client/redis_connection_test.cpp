// admit::redis::connection against a real redis-server: round trips, reply types, AUTH, SELECT, unix sockets,
// connection errors, the async interface.
#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <string>

#include "admit/redis/client/connection.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::connection;
using admit::redis::reply;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;

TEST(RedisConnection, RoundTripsEveryReplyType) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());

  auto set = conn.execute("SET", "k", "v");
  ASSERT_FALSE(set.error) << set.error.message();
  EXPECT_EQ(set.value, reply::status("OK"));
  EXPECT_EQ(conn.execute("GET", "k").value, reply::string("v"));
  EXPECT_TRUE(conn.execute("GET", "missing").value.is_nil());
  EXPECT_EQ(conn.execute("INCR", "n").value, reply::integer(1));
  EXPECT_EQ(conn.execute("INCRBY", "n", 41).value, reply::integer(42));

  const std::string binary("a\0b\r\nc", 6);
  EXPECT_TRUE(conn.execute("SET", "bin", binary).ok());
  EXPECT_EQ(conn.execute("GET", "bin").value.str(), binary);

  EXPECT_TRUE(conn.execute("RPUSH", "list", "x", "y", "z").ok());
  const auto range = conn.execute("LRANGE", "list", 0, -1);
  EXPECT_EQ(range.value, reply::array({reply::string("x"), reply::string("y"), reply::string("z")}));
  EXPECT_EQ(conn.execute("LRANGE", "nothing", 0, -1).value, reply::array({}));

  // Error replies are values, told apart by their prefix.
  const auto wrongtype = conn.execute("LPUSH", "k", "x");
  EXPECT_FALSE(wrongtype.error);
  EXPECT_TRUE(wrongtype.value.is_error("WRONGTYPE")) << wrongtype.value;
  EXPECT_FALSE(wrongtype.ok());
  const auto err = conn.execute("INCR", "k");
  EXPECT_EQ(err.value.error_prefix(), "ERR");
  EXPECT_TRUE(conn.execute("EVALSHA", "0000000000000000000000000000000000000000", 0).value.is_error("NOSCRIPT"));

  // A nested array (EVAL returning a table of tables).
  const auto nested = conn.execute("EVAL", "return {1, {'a', 2}}", 0);
  EXPECT_EQ(nested.value, reply::array({reply::integer(1), reply::array({reply::string("a"), reply::integer(2)})}));

  const auto s = conn.statistics();
  EXPECT_EQ(s.connects, 1u);
  EXPECT_EQ(s.connection_losses, 0u);
  EXPECT_TRUE(conn.is_connected());
}

TEST(RedisConnection, CommandObjectAndAsyncInterface) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::command cmd{"SET", "a"};
  cmd.arg(7);
  std::promise<std::pair<boost::system::error_code, reply>> done;
  std::thread::id handler_thread;
  conn.async_execute(cmd, [&](boost::system::error_code ec, reply r) {
    handler_thread = std::this_thread::get_id();
    done.set_value({ec, std::move(r)});
  });
  auto [ec, r] = done.get_future().get();
  EXPECT_FALSE(ec);
  EXPECT_EQ(r, reply::status("OK"));
  EXPECT_NE(handler_thread, std::this_thread::get_id());  // ran on the io thread, not inline
  EXPECT_EQ(conn.execute("GET", "a").value, reply::string("7"));
}

TEST(RedisConnection, EmptyCommandThrows) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  EXPECT_THROW((void)conn.execute(admit::redis::command{}), std::invalid_argument);
}

TEST(RedisConnection, AuthWithPassword) {
  redis_server server({.requirepass = "hunter2"});
  io_thread io;
  connection conn(io.executor(), server.url());
  EXPECT_FALSE(conn.connect());
  EXPECT_EQ(conn.execute("PING").value, reply::status("PONG"));

  // Without a password the server answers NOAUTH: an error reply, as a value.
  connection anonymous(io.executor(), "redis://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_TRUE(anonymous.execute("PING").value.is_error("NOAUTH"));
}

TEST(RedisConnection, WrongPasswordFailsTheConnect) {
  redis_server server({.requirepass = "hunter2"});
  io_thread io;
  connection conn(io.executor(), "redis://:wrong@127.0.0.1:" + std::to_string(server.port()));
  const auto ec = conn.connect();
  EXPECT_EQ(ec, errc::auth_failed) << ec.message();
  EXPECT_NE(conn.last_error().find("WRONGPASS"), std::string::npos) << conn.last_error();
  EXPECT_FALSE(conn.is_connected());
  EXPECT_EQ(conn.last_connect_error(), errc::auth_failed);
}

TEST(RedisConnection, SelectsTheDatabase) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url(3));
  EXPECT_TRUE(conn.execute("SET", "where", "three").ok());
  EXPECT_EQ(server.admin({"GET", "where"}, 3), "three");
  EXPECT_EQ(server.admin({"GET", "where"}, 0), "(nil)");

  EXPECT_TRUE(conn.last_connect_error() == std::error_code()) << conn.last_connect_error().message();  // never failed

  connection out_of_range(io.executor(), server.url(99));
  EXPECT_EQ(out_of_range.connect(), errc::select_failed);
  EXPECT_EQ(out_of_range.last_connect_error(), errc::select_failed);
  EXPECT_NE(out_of_range.last_error().find("DB index is out of range"), std::string::npos) << out_of_range.last_error();
}

TEST(RedisConnection, UnixSocket) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), "unix://" + server.unix_path() + "?db=2");
  EXPECT_TRUE(conn.execute("SET", "u", "1").ok());
  EXPECT_EQ(server.admin({"GET", "u"}, 2), "1");
}

TEST(RedisConnection, RefusedConnectIsAnErrorCode) {
  std::uint16_t port = 0;
  {
    redis_server server;  // a port that was free and is free again
    port = server.port();
  }
  io_thread io;
  admit::redis::connection_options o;
  o.port = port;
  o.command_timeout = 200ms;
  connection conn(io.executor(), o);
  EXPECT_EQ(conn.connect(), errc::connection_refused);
  // A call while the server is away waits for a reconnection, then for its deadline: never sent, so a timeout; the
  // connection keeps why it is down.
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = conn.execute("PING");
  EXPECT_EQ(r.error, errc::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
  EXPECT_EQ(conn.last_connect_error(), errc::connection_refused);
  EXPECT_NE(conn.last_error().find("refused"), std::string::npos) << conn.last_error();
}

TEST(RedisConnection, UnknownHostIsAnErrorCode) {
  io_thread io;
  // The .invalid top-level domain never resolves (RFC 6761), with or without a network.
  connection conn(io.executor(), "redis://no-such-host.invalid:6379");
  EXPECT_EQ(conn.connect(), errc::unknown_host);
  EXPECT_EQ(conn.last_connect_error(), errc::unknown_host);
  EXPECT_NE(conn.last_error().find("no-such-host.invalid"), std::string::npos) << conn.last_error();
}

TEST(RedisConnection, MissingUnixSocketIsRefused) {
  io_thread io;
  std::string path;
  {
    redis_server server;  // a socket path in a directory that is removed with the server
    path = server.unix_path();
  }
  connection conn(io.executor(), "unix://" + path);
  EXPECT_EQ(conn.connect(), errc::connection_refused);
}

TEST(RedisConnection, ALostConnectionIsTheLastConnectError) {
  redis_server server;
  io_thread io;
  auto o = admit::redis::parse_url(server.url());
  o.reconnect_initial = o.reconnect_max = 1h;
  connection conn(io.executor(), o);
  ASSERT_FALSE(conn.connect());
  EXPECT_TRUE(conn.last_connect_error() == std::error_code()) << conn.last_connect_error().message();
  // A call in flight when the server dies; no reconnection attempt within the test (it would overwrite the error).
  auto blocked = std::async(std::launch::async, [&] { return conn.execute_for(1h, "BLPOP", "nothing", "0"); });
  ASSERT_TRUE(admit::redis::testing::eventually([&] {
    return server.admin({"INFO", "clients"}).find("blocked_clients:1") != std::string::npos;
  }));
  server.kill();
  EXPECT_EQ(blocked.get().error, errc::outcome_unknown);
  EXPECT_EQ(conn.last_connect_error(), errc::connection_lost);
}

TEST(RedisConnection, CloseCompletesCallsAndRefusesNewOnes) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  EXPECT_TRUE(conn.execute("PING").ok());
  conn.close();
  EXPECT_EQ(conn.execute("PING").error, errc::closed);
  std::promise<boost::system::error_code> done;
  conn.async_execute("PING", [&](boost::system::error_code ec, reply) { done.set_value(ec); });
  EXPECT_EQ(done.get_future().get(), errc::closed);
}

}  // namespace

namespace {

// A call that Redis does not answer (BLPOP on an empty list blocks the connection) ends at its own deadline, and so
// does each call queued behind it: the connection's one deadline timer is armed for the earliest deadline, also
// when it still waits for the deadline of a call answered since (it then fires for nothing and is armed again), and
// when a later call has an earlier deadline than the one it waits for. (Asynchronous calls: a blocking call also
// waits for its deadline on its own thread.)
TEST(RedisConnection, EveryCallEndsAtItsOwnDeadlineWhateverTheOrderOfTheDeadlines) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_FALSE(conn.connect());
  struct ended {
    std::promise<std::pair<boost::system::error_code, connection::clock::time_point>> promise;
    auto handler() {
      return [this](boost::system::error_code ec, reply) { promise.set_value({ec, connection::clock::now()}); };
    }
  };
  const auto expect_timeout_after = [](ended& e, connection::clock::time_point start, std::chrono::milliseconds d) {
    const auto [ec, at] = e.promise.get_future().get();
    EXPECT_EQ(ec, errc::timeout);
    EXPECT_GE(at - start, d);
    EXPECT_LT(at - start, d + 1500ms);
  };
  // Answered long before its deadline: the timer waits for that deadline still. The blocked call's comes later.
  ASSERT_FALSE(conn.execute_for(1s, "PING").error);
  ended blocked;
  auto start = connection::clock::now();
  conn.async_execute_for(1500ms, "BLPOP", "nothing", "0", blocked.handler());
  expect_timeout_after(blocked, start, 1500ms);
  // Redis still blocks the connection in that BLPOP: nothing is answered any more. A call with a far deadline, then
  // one with an earlier deadline than the one the timer waits for.
  ended far;
  ended near;
  start = connection::clock::now();
  conn.async_execute_for(3s, "PING", far.handler());
  // The connection takes calls in on the io thread: what is posted after the call runs after it is taken in.
  std::promise<void> taken_in;
  boost::asio::post(io.executor(), [&] { taken_in.set_value(); });
  taken_in.get_future().wait();
  conn.async_execute_for(300ms, "PING", near.handler());
  expect_timeout_after(near, start, 300ms);
  expect_timeout_after(far, start, 3s);
}

}  // namespace
