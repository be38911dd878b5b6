// Auto-pipelining on one connection: coroutines and threads share it, each gets its own replies in order, and
// concurrent calls travel in shared writes (connection_statistics counts writes and commands). Explicit pipelines
// (async_execute_pipeline_until, of a list of commands or of a redis::pipeline): one completion with every reply, among
// other calls, past a deadline, and refused when empty.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/client/connection.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::command;
using admit::redis::connection;
using admit::redis::reply;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
namespace asio = boost::asio;

TEST(RedisPipelining, CallsIssuedTogetherShareWrites) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_FALSE(conn.connect());
  const auto before = conn.statistics();

  // 64 calls issued by one handler: the 16th writes the first 16 at once (rather than after the handler returns, so
  // the server starts on them while the handler goes on); the other 48 queue behind that write and go in one more.
  std::promise<void> all_done;
  std::atomic<int> remaining{64};
  std::atomic<int> wrong{0};
  asio::post(io.context(), [&] {
    for (int i = 0; i < 64; ++i) {
      conn.async_execute("ECHO", i, [&, i](boost::system::error_code ec, reply r) {
        if (ec || r != reply::string(std::to_string(i))) wrong.fetch_add(1);
        if (remaining.fetch_sub(1) == 1) all_done.set_value();
      });
    }
  });
  all_done.get_future().get();
  EXPECT_EQ(wrong.load(), 0);
  const auto after = conn.statistics();
  EXPECT_EQ(after.commands_written - before.commands_written, 64u);
  EXPECT_EQ(after.writes - before.writes, 2u);
  EXPECT_EQ(after.replies - before.replies, 64u);
}

asio::awaitable<void> coroutine_caller(connection& conn, int id, int rounds, std::atomic<int>& wrong) {
  const auto token = asio::as_tuple(asio::use_awaitable);
  const std::string key = "co:" + std::to_string(id);
  for (int j = 0; j < rounds; ++j) {
    const std::string value = std::to_string(id) + ":" + std::to_string(j);
    auto [e1, set] = co_await conn.async_execute("SET", key, value, token);
    auto [e2, get] = co_await conn.async_execute("GET", key, token);
    auto [e3, incr] = co_await conn.async_execute("INCR", key + ":n", token);
    if (e1 || e2 || e3 || set != reply::status("OK") || get != reply::string(value) || incr != reply::integer(j + 1)) {
      wrong.fetch_add(1);
    }
  }
}

TEST(RedisPipelining, SixtyFourCoroutinesAndEightThreadsGetTheirOwnReplies) {
  redis_server server;
  io_thread io(2);
  admit::redis::connection_options options = admit::redis::parse_url(server.url());
  options.command_timeout = std::chrono::seconds(30);  // a loaded machine (sanitizers) must not time out
  connection conn(io.executor(), options);
  ASSERT_FALSE(conn.connect());
  const auto before = conn.statistics();

  constexpr int coroutines = 64, threads = 8, rounds = 50;
  std::atomic<int> wrong{0};
  std::atomic<int> finished{0};
  std::promise<void> coroutines_done;
  for (int i = 0; i < coroutines; ++i) {
    asio::co_spawn(io.context(), coroutine_caller(conn, i, rounds, wrong), [&](std::exception_ptr e) {
      if (e) wrong.fetch_add(1000);
      if (finished.fetch_add(1) + 1 == coroutines) coroutines_done.set_value();
    });
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::string key = "th:" + std::to_string(t);
      for (int j = 0; j < rounds; ++j) {
        // (Appended piecewise: "t" + std::to_string(t) trips GCC 12's -Wrestrict false positive at -O3.)
        std::string value = "t";
        value += std::to_string(t);
        value += ':';
        value += std::to_string(j);
        const auto set = conn.execute("SET", key, value);
        const auto get = conn.execute("GET", key);
        const auto incr = conn.execute("INCR", key + ":n");
        if (!set.ok() || get.value != reply::string(value) || incr.value != reply::integer(j + 1)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& w : workers) w.join();
  coroutines_done.get_future().get();
  EXPECT_EQ(wrong.load(), 0);

  const auto after = conn.statistics();
  const auto commands = after.commands_written - before.commands_written;
  const auto writes = after.writes - before.writes;
  EXPECT_EQ(commands, static_cast<std::uint64_t>((coroutines + threads) * rounds * 3));
  EXPECT_EQ(after.replies - before.replies, commands);
  EXPECT_EQ(after.discarded_replies, 0u);
  // Batching: 72 callers with one call each outstanding; a write carries many of them.
  EXPECT_GE(commands, 4 * writes) << "writes " << writes << " for " << commands << " commands";
  RecordProperty("commands_per_write", std::to_string(static_cast<double>(commands) / static_cast<double>(writes)));
  // The server agrees on the count: every INCR ran once.
  EXPECT_EQ(server.admin({"GET", "co:63:n"}), std::to_string(rounds));
  EXPECT_EQ(server.admin({"GET", "th:7:n"}), std::to_string(rounds));
}

// What one pipeline's completion gave.
struct pipeline_result {
  boost::system::error_code ec;
  reply value;
};

std::future<pipeline_result> pipeline(connection& conn, std::optional<connection::clock::time_point> deadline,
                                      const std::vector<command>& commands) {
  auto done = std::make_shared<std::promise<pipeline_result>>();
  auto result = done->get_future();
  conn.async_execute_pipeline_until(deadline, commands, [done](boost::system::error_code ec, reply r) {
    done->set_value({ec, std::move(r)});
  });
  return result;
}

TEST(RedisPipeline, OneCompletionWithEveryReplyInOrderAnErrorOnlyItsOwn) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_FALSE(conn.connect());
  ASSERT_TRUE(conn.execute("SET", "word", "abc").ok());
  const auto r = pipeline(conn, std::nullopt,
                          {command{"SET", "p", "1", "EX", "60", "NX"}, command{"INCRBY", "word", "2"},
                           command{"INCRBY", "p", "4"}, command{"TTL", "p"}})
                     .get();
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(r.value.is_array());
  ASSERT_EQ(r.value.elements().size(), 4u);
  EXPECT_EQ(r.value.elements()[0], reply::status("OK"));
  EXPECT_TRUE(r.value.elements()[1].is_error()) << r.value.elements()[1].str();  // "abc" is not an integer
  EXPECT_EQ(r.value.elements()[2], reply::integer(5));                           // the error stopped nothing
  ASSERT_TRUE(r.value.elements()[3].is_integer());
  EXPECT_GT(r.value.elements()[3].integer(), 0);
  EXPECT_LE(r.value.elements()[3].integer(), 60);
}

TEST(RedisPipeline, PipelinesAmongOtherCallsEachGetTheirOwnReplies) {
  redis_server server;
  io_thread io(2);
  admit::redis::connection_options options = admit::redis::parse_url(server.url());
  options.command_timeout = std::chrono::seconds(30);  // a loaded machine (sanitizers) must not time out
  connection conn(io.executor(), options);
  ASSERT_FALSE(conn.connect());
  constexpr int rounds = 200;
  std::atomic<int> wrong{0};
  std::atomic<int> left{2 * rounds};
  std::promise<void> all_done;
  const auto one_done = [&] {
    if (left.fetch_sub(1) == 1) all_done.set_value();
  };
  // Single calls and pipelines of 1 to 5 ECHOs issued together from both threads: each completion must hold exactly
  // its own values.
  for (int i = 0; i < rounds; ++i) {
    asio::post(io.context(), [&, i] {
      conn.async_execute("ECHO", "single " + std::to_string(i), [&, i](boost::system::error_code ec, reply r) {
        if (ec || r != reply::string("single " + std::to_string(i))) wrong.fetch_add(1);
        one_done();
      });
      std::vector<command> commands;
      for (int k = 0; k <= i % 5; ++k) commands.push_back(command{"ECHO", std::to_string(i) + "." + std::to_string(k)});
      conn.async_execute_pipeline_until(std::nullopt, commands, [&, i](boost::system::error_code ec, reply r) {
        bool right = !ec && r.is_array() && r.elements().size() == static_cast<std::size_t>(i % 5 + 1);
        for (std::size_t k = 0; right && k < r.elements().size(); ++k) {
          right = r.elements()[k] == reply::string(std::to_string(i) + "." + std::to_string(k));
        }
        if (!right) wrong.fetch_add(1);
        one_done();
      });
    });
  }
  all_done.get_future().get();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(RedisPipeline, ADeadlinePassedMidwayDiscardsTheWholePipelineNotTheNextCall) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_FALSE(conn.connect());
  server.pause(800ms);
  const auto deadline = connection::clock::now() + 100ms;
  const auto r = pipeline(conn, deadline, {command{"INCR", "n"}, command{"INCR", "n"}, command{"INCR", "n"}}).get();
  EXPECT_EQ(r.ec, admit::errc::timeout);
  // After the pause: the three INCRs ran (the outcome was unknown, not "not run"), their three replies were read and
  // dropped as one, and the next call gets its own reply.
  EXPECT_EQ(conn.execute_for(10s, "GET", "n").value, reply::string("3"));
  EXPECT_EQ(conn.statistics().discarded_replies, 1u);
}

TEST(RedisPipeline, EmptyPipelineOrCommandThrows) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const auto ignore = [](boost::system::error_code, reply) {};
  EXPECT_THROW(conn.async_execute_pipeline_until(std::nullopt, std::vector<command>{}, ignore), std::invalid_argument);
  EXPECT_THROW(conn.async_execute_pipeline_until(std::nullopt, {command{"PING"}, command{}}, ignore),
               std::invalid_argument);
  EXPECT_THROW(conn.async_execute_pipeline_until(std::nullopt, admit::redis::pipeline{}, ignore),
               std::invalid_argument);
  admit::redis::pipeline p;
  p.add("PING");
  EXPECT_THROW(p.add(command{}), std::invalid_argument);
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(p.payload(), "*1\r\n$4\r\nPING\r\n");  // the empty command left nothing behind
}

// A pipeline encoded as it is built (redis::pipeline) is the commands' list: one completion, every reply in order.
TEST(RedisPipeline, EncodedPipelineIsAnsweredAsTheCommandsList) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  ASSERT_FALSE(conn.connect());
  const std::string key("counter\0with a NUL", 19);
  admit::redis::pipeline p;
  p.add("INCRBY", key, 5).add("EXPIRE", key, 60, "NX").add(command{"INCRBY", key, "-2"}).add("TTL", key);
  EXPECT_EQ(p.size(), 4u);
  std::promise<pipeline_result> done;
  conn.async_execute_pipeline_until(std::nullopt, std::move(p), [&done](boost::system::error_code ec, reply r) {
    done.set_value({ec, std::move(r)});
  });
  const pipeline_result r = done.get_future().get();
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(r.value.is_array());
  ASSERT_EQ(r.value.elements().size(), 4u);
  EXPECT_EQ(r.value.elements()[0], reply::integer(5));
  EXPECT_EQ(r.value.elements()[1], reply::integer(1));
  EXPECT_EQ(r.value.elements()[2], reply::integer(3));
  ASSERT_TRUE(r.value.elements()[3].is_integer());
  EXPECT_GT(r.value.elements()[3].integer(), 0);
  EXPECT_LE(r.value.elements()[3].integer(), 60);
}

}  // namespace
