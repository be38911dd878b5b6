// The waiting forms of redis::gcra and redis::token_bucket (rate_limiter.hpp), against a real redis-server: a wait
// spends the very tokens decide() spends (the limiter's own key, in each one's format), waiters of one key are served
// in arrival order across connections, a deadline the rate cannot meet fails at once and takes nothing, a cancelled
// waiter leaves the queue before its call returns, and the edges (n above the burst, rate inf, n == 0, another
// definition, Redis gone) answer at once; the asynchronous forms do the same without blocking a thread.
#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/errc.hpp"
#include "admit/rate.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/token_bucket.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace rate_limiter_wait_testing {

using namespace std::chrono_literals;
using admit::errc;
using admit::rate;
using admit::redis::connection;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using steady = std::chrono::steady_clock;

// A redis-server of the test's own and a connection to it.
template <class Limiter>
class RedisRateLimiterWait : public ::testing::Test {
 protected:
  redis_server server;
  io_thread io;
  connection conn{io.executor(), server.url()};

  // `count` connections of their own to the server (as `count` processes would have), on the same io thread.
  std::vector<std::unique_ptr<connection>> connections(int count) {
    std::vector<std::unique_ptr<connection>> conns;
    for (int i = 0; i < count; ++i) conns.push_back(std::make_unique<connection>(io.executor(), server.url()));
    return conns;
  }
};
using limiters = ::testing::Types<admit::redis::gcra, admit::redis::token_bucket>;
struct limiter_names {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, admit::redis::gcra> ? "gcra" : "token_bucket";
  }
};
TYPED_TEST_SUITE(RedisRateLimiterWait, limiters, limiter_names);

// The waiters of `key` in Redis now (the queue's expiry set).
long long waiters(const redis_server& server, const std::string& name, const std::string& key) {
  return std::stoll(server.admin({"ZCARD", "{" + name + "}|q:" + key + ":expiry"}));
}

// A wait that finds its tokens takes them from the limiter's own key: decide() then sees exactly that many fewer, in
// both algorithms' formats (a slow rate: nothing refills within the test).
TYPED_TEST(RedisRateLimiterWait, AWaitSpendsTheTokensDecideSees) {
  const TypeParam l(this->conn, "w", rate::every(1h), 5, patient());
  ASSERT_TRUE(l.decide("k", 2).decision.admitted);  // 3 left, in the key's own format
  ASSERT_TRUE(l.try_acquire_for("k", 1s, 2));       // the wait reads it...
  auto r = l.decide("k", 0);
  ASSERT_TRUE(r.consulted) << r.error.message();
  EXPECT_EQ(r.decision.remaining, 1);               // ...and writes it so that decide() reads it
  ASSERT_TRUE(l.decide("k", 1).decision.admitted);  // and decide() spends the rest
  const auto t0 = steady::now();
  const auto w = l.try_acquire_for("k", 1s);  // the next token is an hour away: fails at once
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error(), errc::timeout);
  EXPECT_LT(steady::now() - t0, 900ms);
  EXPECT_EQ(waiters(this->server, "w", "k"), 0);  // took nothing, left nothing
}

// Waits and decisions share one budget over time too: a waiter that arrives at an empty bucket is admitted when its
// token comes, and that token is then gone for decide().
TYPED_TEST(RedisRateLimiterWait, AWaiterIsAdmittedWhenItsTokenComesAndTakesIt) {
  // A token every 2 s: the check after the admission has that long before the bucket could refill.
  const TypeParam l(this->conn, "w", rate::every(2s), 1, patient());
  ASSERT_TRUE(l.decide("k").decision.admitted);  // empty now; the next token in two seconds
  ASSERT_TRUE(l.try_acquire_for("k", 10s));
  const auto after = l.decide("k");
  ASSERT_TRUE(after.consulted);
  EXPECT_FALSE(after.decision.admitted) << "the waiter's token was spent twice";
}

// Waiters on separate connections (as separate processes are) are admitted in the order they joined the queue.
TYPED_TEST(RedisRateLimiterWait, WaitersAreAdmittedInArrivalOrder) {
  // 2/s: half a second between admissions, so that the order of the returns is the order of the grants.
  const TypeParam empty_it(this->conn, "w", rate::per_second(2), 1, patient());
  ASSERT_TRUE(empty_it.decide("k").decision.admitted);
  constexpr int count = 5;
  const auto conns = this->connections(count);
  std::mutex m;
  std::vector<int> order;
  std::vector<std::jthread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      const TypeParam l(*conns[static_cast<std::size_t>(i)], "w", rate::per_second(2), 1, patient());
      const auto r = l.try_acquire_for("k", 20s);
      const std::lock_guard lock(m);
      order.push_back(r ? i : -1 - i);
    });
    // The next joins only once this one is queued (or already admitted).
    ASSERT_TRUE(admit::redis::testing::eventually(
        [&] {
          const std::lock_guard lock(m);
          return waiters(this->server, "w", "k") + static_cast<long long>(order.size()) == i + 1;
        },
        10s));
  }
  threads.clear();
  std::vector<int> expected;
  for (int i = 0; i < count; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
  for (const auto& k : this->server.keys()) {
    EXPECT_TRUE(k.find("wake") == std::string::npos && k != "-") << "a wake list nobody reads: " << k;
  }
}

// A deadline already passed does not wait: admitted when the tokens are there now, else timeout with nothing taken.
TYPED_TEST(RedisRateLimiterWait, AZeroTimeoutAdmitsWhatIsThereAndTakesNothingElse) {
  const TypeParam l(this->conn, "w", rate::every(1h), 2, patient());
  ASSERT_TRUE(l.try_acquire_for("k", 0ms));
  EXPECT_EQ(l.decide("k", 0).decision.remaining, 1);
  ASSERT_TRUE(l.decide("k", 1).decision.admitted);
  const auto r = l.try_acquire_for("k", 0ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::timeout);
  EXPECT_EQ(l.decide("k", 0).decision.remaining, 0);
  EXPECT_EQ(waiters(this->server, "w", "k"), 0);
}

TYPED_TEST(RedisRateLimiterWait, AStoppedWaiterLeavesTheQueueBeforeItReturns) {
  const TypeParam l(this->conn, "w", rate::every(1h), 1, patient());
  ASSERT_TRUE(l.decide("k").decision.admitted);
  std::stop_source stop;
  admit::redis::wait_result r;
  std::jthread waiter([&] { r = l.acquire("k", 1, stop.get_token()); });
  ASSERT_TRUE(admit::redis::testing::eventually([&] { return waiters(this->server, "w", "k") == 1; }, 10s));
  stop.request_stop();
  waiter.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::cancelled);
  EXPECT_EQ(waiters(this->server, "w", "k"), 0);
}

TYPED_TEST(RedisRateLimiterWait, TheEdgesAnswerAtOnce) {
  const TypeParam l(this->conn, "w", rate::every(1h), 2, patient());
  const auto big = l.try_acquire_for("k", 1h, 3);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error(), errc::exceeds_capacity);
  EXPECT_TRUE(l.acquire("k", 0));  // a query: nothing to wait for
  EXPECT_THROW((void)l.acquire("k", -1), std::invalid_argument);
  const TypeParam unlimited(this->conn, "u", rate::inf(), 1, patient());
  EXPECT_TRUE(unlimited.acquire("k", 1));
  EXPECT_EQ(this->server.script_calls(), 0);  // none of these asked Redis

  // Another rate on the same key while someone waits with the first: refused, naming neither silently.
  ASSERT_TRUE(l.decide("k", 2).decision.admitted);
  std::stop_source stop;
  std::jthread waiter([&] { (void)l.acquire("k", 1, stop.get_token()); });
  ASSERT_TRUE(admit::redis::testing::eventually([&] { return waiters(this->server, "w", "k") == 1; }, 10s));
  const TypeParam other(this->conn, "w", rate::every(30min), 2, patient());
  const auto r = other.try_acquire_for("k", 10ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::definition_conflict);
  stop.request_stop();
}

// Redis gone: the wait, blocking or asynchronous, fails (never admitted by the failure policy) once its call times
// out, long before its own deadline, and the connection says why.
TYPED_TEST(RedisRateLimiterWait, AWaitWithRedisGoneFailsWithItsError) {
  admit::redis::limiter_options o;
  o.timeout = 200ms;
  o.on_failure = admit::redis::failure_policy::fail_open;
  const TypeParam l(this->conn, "w", rate::per_second(1), 1, o);
  this->server.kill();
  const auto t0 = steady::now();
  const auto r = l.try_acquire_for("k", 3s);
  ASSERT_FALSE(r) << "admitted with Redis gone";
  EXPECT_LT(steady::now() - t0, 2s) << "waited for its deadline instead of failing with the call";
  EXPECT_TRUE(this->conn.last_connect_error()) << r.error().message();

  // The asynchronous form alike.
  const auto t1 = steady::now();
  std::future<std::error_code> f = l.async_acquire_for("k", 3s, 1, boost::asio::use_future);
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(f.get()) << "admitted with Redis gone";
  EXPECT_LT(steady::now() - t1, 2s) << "waited for its deadline instead of failing with the call";
}

// The asynchronous forms: a wait admitted when its token comes takes it, the handler runs through its own executor
// and never inside the initiating call, and use_future works as a token.
TYPED_TEST(RedisRateLimiterWait, AnAsyncWaiterIsAdmittedWhenItsTokenComesAndTakesIt) {
  // A token every 2 s: the check after the admission has that long before the bucket could refill.
  const TypeParam l(this->conn, "w", rate::every(2s), 1, patient());
  ASSERT_TRUE(l.decide("k").decision.admitted);
  boost::asio::io_context mine;  // run by this thread only: the handler can run nowhere else
  std::optional<std::error_code> got;
  std::thread::id ran_on;
  l.async_acquire_for("k", 10s, 1, boost::asio::bind_executor(mine, [&](std::error_code ec) {
                        got = ec;
                        ran_on = std::this_thread::get_id();
                      }));
  EXPECT_EQ(mine.poll(), 0U);
  EXPECT_FALSE(got) << "ran inside the initiating call";
  mine.run_for(15s);  // until the handler has run: the wait counts as the context's work
  ASSERT_TRUE(got) << "never completed";
  EXPECT_FALSE(*got) << got->message();
  EXPECT_EQ(ran_on, std::this_thread::get_id()) << "not run through the handler's executor";
  const auto after = l.decide("k");
  ASSERT_TRUE(after.consulted);
  EXPECT_FALSE(after.decision.admitted) << "the waiter's token was spent twice";
  EXPECT_TRUE(admit::redis::testing::eventually(
      [&] {
        return this->server.admin({"ZCARD", "{w}|q:k:holders"}) == "0";
      },
      10s))
      << "the admission's queue entry was not given back";

  // The edges complete without Redis, and still through the handler's executor.
  const auto calls = this->server.script_calls();
  std::vector<std::error_code> edges;
  auto record = boost::asio::bind_executor(mine, [&](std::error_code ec) { edges.push_back(ec); });
  l.async_acquire("k", 0, record);
  l.async_acquire_for("k", 1h, 2, record);
  EXPECT_THROW(l.async_acquire("k", -1, record), std::invalid_argument);
  const TypeParam unlimited(this->conn, "u", rate::inf(), 1, patient());
  unlimited.async_acquire("k", 1, record);
  EXPECT_TRUE(edges.empty());
  mine.restart();
  mine.run();
  EXPECT_EQ(edges, (std::vector<std::error_code>{{}, make_error_code(errc::exceeds_capacity), {}}));
  EXPECT_EQ(this->server.script_calls(), calls);

  // A deadline already passed asks once: nothing there now, so errc::timeout, with nothing taken or left queued.
  const TypeParam slow(this->conn, "s", rate::every(1h), 1, patient());
  ASSERT_TRUE(slow.decide("k").decision.admitted);
  std::future<std::error_code> late = slow.async_acquire_until("k", steady::now() - 1ms, 1, boost::asio::use_future);
  ASSERT_EQ(late.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(late.get(), errc::timeout);
  EXPECT_EQ(waiters(this->server, "s", "k"), 0);
}

// Asynchronous and blocking waiters on separate connections share one queue, served in arrival order.
TYPED_TEST(RedisRateLimiterWait, AsyncWaitersAreServedInArrivalOrder) {
  // 2/s: half a second between admissions, so that the order of the completions is the order of the grants.
  const TypeParam empty_it(this->conn, "w", rate::per_second(2), 1, patient());
  ASSERT_TRUE(empty_it.decide("k").decision.admitted);
  constexpr int count = 4;
  const auto conns = this->connections(count);
  struct completions {
    std::mutex m;
    std::vector<int> order;
    std::size_t size() {
      const std::lock_guard lock(m);
      return order.size();
    }
  };
  const auto done = std::make_shared<completions>();  // the handlers' own: they may outlive a failed assertion
  std::jthread blocking;
  for (int i = 0; i < count; ++i) {
    const TypeParam l(*conns[static_cast<std::size_t>(i)], "w", rate::per_second(2), 1, patient());
    const auto record = [done, i](std::error_code ec) {
      const std::lock_guard lock(done->m);
      done->order.push_back(ec ? -1 - i : i);
    };
    if (i == 1) {
      blocking = std::jthread([l, record] { record(l.try_acquire_for("k", 20s) ? std::error_code() : errc::timeout); });
    } else {
      l.async_acquire_for("k", 20s, 1, record);  // the limiter object goes out of scope: the wait does not need it
    }
    ASSERT_TRUE(admit::redis::testing::eventually(
        [&] { return waiters(this->server, "w", "k") + static_cast<long long>(done->size()) == i + 1; }, 10s));
  }
  ASSERT_TRUE(admit::redis::testing::eventually([&] { return done->size() == count; }, 20s));
  const std::lock_guard lock(done->m);
  EXPECT_EQ(done->order, (std::vector<int>{0, 1, 2, 3}));
}

// A terminal cancellation through the handler's slot completes with errc::cancelled and leaves the queue; another
// kind of cancellation is ignored.
TYPED_TEST(RedisRateLimiterWait, ACancelledAsyncWaiterLeavesTheQueue) {
  const TypeParam l(this->conn, "w", rate::every(1h), 1, patient());
  ASSERT_TRUE(l.decide("k").decision.admitted);
  boost::asio::cancellation_signal signal;
  const auto got = std::make_shared<std::promise<std::error_code>>();  // the handler's own
  auto result = got->get_future();
  l.async_acquire(
      "k", 1, boost::asio::bind_cancellation_slot(signal.slot(), [got](std::error_code ec) { got->set_value(ec); }));
  ASSERT_TRUE(admit::redis::testing::eventually([&] { return waiters(this->server, "w", "k") == 1; }, 10s));
  // Emitted from the connection's thread, as Asio requires of a slot's signal.
  boost::asio::post(this->io.executor(), [&] { signal.emit(boost::asio::cancellation_type::partial); });
  EXPECT_EQ(result.wait_for(300ms), std::future_status::timeout) << "a partial cancellation ended the wait";
  boost::asio::post(this->io.executor(), [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(result.get(), errc::cancelled);
  EXPECT_TRUE(admit::redis::testing::eventually([&] { return waiters(this->server, "w", "k") == 0; }, 10s));
}

}  // namespace rate_limiter_wait_testing
