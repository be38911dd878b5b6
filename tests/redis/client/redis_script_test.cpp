// Lua scripts through EVALSHA: loaded on NOSCRIPT (after SCRIPT FLUSH) and retried once; any other outcome is
// returned as it is (INFO commandstats counts what the server ran).
#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/script.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::connection;
using admit::redis::reply;
using admit::redis::script;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
namespace asio = boost::asio;

const script incr_by("return redis.call('INCRBY', KEYS[1], ARGV[1])");

TEST(RedisScript, LoadsOnNoscriptAndRetriesOnce) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  auto r = admit::redis::evalsha(conn, incr_by, {"c"}, {"5"});
  ASSERT_TRUE(r.ok()) << r.error.message() << " " << r.value;
  EXPECT_EQ(r.value, reply::integer(5));
  EXPECT_EQ(server.calls("evalsha"), 2);  // NOSCRIPT, then the retry
  EXPECT_EQ(server.calls("script|load"), 1);

  EXPECT_EQ(admit::redis::evalsha(conn, incr_by, {"c"}, {"1"}).value, reply::integer(6));
  EXPECT_EQ(server.calls("evalsha"), 3);
  EXPECT_EQ(server.calls("script|load"), 1);

  server.admin({"SCRIPT", "FLUSH"});
  EXPECT_EQ(admit::redis::evalsha(conn, incr_by, {"c"}, {"1"}).value, reply::integer(7));
  EXPECT_EQ(server.calls("evalsha"), 5);
  EXPECT_EQ(server.calls("script|load"), 2);
}

TEST(RedisScript, AsyncLoadsOnNoscript) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const std::vector<std::string> keys{"a"}, args{"2"};
  auto run = [&]() -> asio::awaitable<std::tuple<boost::system::error_code, reply>> {
    co_return co_await admit::redis::async_evalsha(conn, incr_by, keys, args, asio::as_tuple(asio::use_awaitable));
  };
  auto f = asio::co_spawn(io.context(), run(), asio::use_future);
  auto [ec, r] = f.get();
  EXPECT_FALSE(ec);
  EXPECT_EQ(r, reply::integer(2));
  server.admin({"SCRIPT", "FLUSH"});
  auto [ec2, r2] = asio::co_spawn(io.context(), run(), asio::use_future).get();
  EXPECT_FALSE(ec2);
  EXPECT_EQ(r2, reply::integer(4));
  EXPECT_EQ(server.calls("script|load"), 2);
}

TEST(RedisScript, OtherErrorsAreNotRetried) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const script failing("return redis.call('INCR', KEYS[1])");
  ASSERT_TRUE(conn.execute("SET", "s", "not a number").ok());
  const auto first = admit::redis::evalsha(conn, failing, {"s"}, {});  // NOSCRIPT, load, retry: a runtime error
  EXPECT_TRUE(first.value.is_error()) << first.value;
  EXPECT_FALSE(first.value.is_error("NOSCRIPT"));
  const auto evalsha_calls = server.calls("evalsha");
  const auto second = admit::redis::evalsha(conn, failing, {"s"}, {});
  EXPECT_TRUE(second.value.is_error());
  EXPECT_EQ(server.calls("evalsha"), evalsha_calls + 1);
  EXPECT_EQ(server.calls("script|load"), 1);
}

TEST(RedisScript, TimeoutIsNotRetried) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_TRUE(conn.execute("PING").ok());
  server.pause(600ms);
  const auto r = admit::redis::evalsha_until(conn, std::chrono::steady_clock::now() + 100ms, incr_by, {"t"}, {"1"});
  EXPECT_EQ(r.error, errc::timeout);
  // After the pause: the EVALSHA reached the server (NOSCRIPT, discarded) and nothing loaded or retried it.
  EXPECT_EQ(conn.execute_for(10s, "GET", "t").value, reply());
  EXPECT_EQ(server.calls("script|load"), 0);
  EXPECT_EQ(server.calls("evalsha"), 1);
}

}  // namespace

namespace script_libraries_testing {

// Two codes with a top-level local of the same name: each block keeps its own.
std::vector<script> two_functions(const char* second_value) {
  static const std::string first = "local x = 1\nlocal function call(KEYS, ARGV) return x end";
  const std::string second =
      std::string("local x = ") + second_value + "\nlocal function call(KEYS, ARGV) return x end";
  return script::libraries("t", {{"t_one", first}, {"t_two", second}});
}

TEST(RedisScriptLibraries, CodesAreOneLibraryLoadedOnceWithAFunctionEach) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const auto v1 = two_functions("2");
  ASSERT_EQ(v1.size(), 2U);
  const std::string version = v1[0].function_name().substr(6);  // "t_one_<version>"
  EXPECT_EQ(version.size(), 16U);
  EXPECT_EQ(v1[1].function_name(), "t_two_" + version);
  EXPECT_EQ(v1[0].library_source(), v1[1].library_source());
  EXPECT_EQ(v1[0].library_source().rfind("#!lua name=t_" + version + "\n", 0), 0U);
  EXPECT_EQ(admit::redis::evalsha(conn, v1[0], {"k"}, {}).value, reply::integer(1));
  EXPECT_EQ(admit::redis::evalsha(conn, v1[1], {"k"}, {}).value, reply::integer(2));
  EXPECT_EQ(server.calls("function|load"), 1);  // the first call loaded both
  EXPECT_EQ(server.calls("evalsha"), 0);

  // A new version of one part is a new library with every function named anew: it loads beside the old one (a
  // function name already taken would make FUNCTION LOAD fail), and the old one still answers.
  const auto v2 = two_functions("3");
  EXPECT_NE(v2[0].function_name(), v1[0].function_name());
  EXPECT_EQ(admit::redis::evalsha(conn, v2[1], {"k"}, {}).value, reply::integer(3));
  EXPECT_EQ(admit::redis::evalsha(conn, v2[0], {"k"}, {}).value, reply::integer(1));
  EXPECT_EQ(admit::redis::evalsha(conn, v1[1], {"k"}, {}).value, reply::integer(2));
  EXPECT_EQ(server.calls("function|load"), 2);
  // As scripts, the same code.
  EXPECT_EQ(v1[1].source(), "local x = 2\nlocal function call(KEYS, ARGV) return x end\nreturn call(KEYS, ARGV)\n");
}

// A server without functions refuses the first FCALL: every script of the library goes by EVALSHA from then on.
TEST(RedisScriptLibraries, ARefusalOfFunctionsSendsTheWholeLibraryByEvalsha) {
  redis_server::config old;
  old.extra_arguments = {"--rename-command", "FCALL", "", "--rename-command", "FUNCTION", ""};
  redis_server server(old);
  io_thread io;
  connection conn(io.executor(), server.url());
  const auto v = two_functions("2");
  EXPECT_EQ(admit::redis::evalsha(conn, v[0], {"k"}, {}).value, reply::integer(1));
  EXPECT_FALSE(v[1].calls_function());
  EXPECT_EQ(admit::redis::evalsha(conn, v[1], {"k"}, {}).value, reply::integer(2));
  const std::string errors = server.admin({"INFO", "errorstats"});
  EXPECT_NE(errors.find("errorstat_ERR:count=1\r"), std::string::npos) << "FCALL asked more than once: " << errors;
}

}  // namespace script_libraries_testing

namespace script_library_testing {

// One code as its own library (script::library, for a user's code): "<prefix>_<the script's SHA1's first 16 digits>"
// names both the library and its function, loaded once by the first call and called by FCALL.
TEST(RedisScriptLibrary, ACodeIsItsOwnLibraryNamedByItsScriptsSha) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const script s = script::library("mine", "local function call(KEYS, ARGV) return #KEYS end");
  EXPECT_EQ(s.source(), "local function call(KEYS, ARGV) return #KEYS end\nreturn call(KEYS, ARGV)\n");
  EXPECT_EQ(s.function_name(), "mine_" + s.sha1().substr(0, 16));
  EXPECT_EQ(s.library_source().rfind("#!lua name=" + s.function_name() + "\n", 0), 0U);
  EXPECT_EQ(admit::redis::evalsha(conn, s, {"a", "b"}, {}).value, reply::integer(2));
  EXPECT_EQ(admit::redis::evalsha(conn, s, {"a"}, {}).value, reply::integer(1));
  EXPECT_EQ(server.calls("function|load"), 1);
  EXPECT_EQ(server.calls("evalsha"), 0);
  EXPECT_NE(server.admin({"FUNCTION", "LIST"}).find(s.function_name()), std::string::npos);
}

}  // namespace script_library_testing
