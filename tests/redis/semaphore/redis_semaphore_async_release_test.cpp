// lease::async_release against a real redis-server: it answers as release() does (released, not held, failed with the
// error), hands the permit to the next waiter, marks the lease released at once, completes through the handler's
// executor and never inside the call, and is background work that semaphore::shutdown() waits for. Acquire and release
// chained in completion handlers run entirely on the connection's thread.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::lease_state;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::acquire_async;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::wait_for_waiters;
using steady = std::chrono::steady_clock;
using answer = std::pair<std::error_code, lease::release_status>;

// async_release's answer, waited for (at most 10 s).
answer release_async(lease& l) {
  auto p = std::make_shared<std::promise<answer>>();
  auto f = p->get_future();
  l.async_release([p](std::error_code ec, lease::release_status status) { p->set_value({ec, status}); });
  if (f.wait_for(10s) != std::future_status::ready) return {admit::errc::timeout, lease::release_status::failed};
  return f.get();
}

TEST(RedisSemaphoreAsyncRelease, AnswersAsReleaseDoesAndHandsThePermitOn) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.poll_interval = 30s;  // the waiter can only get the permit from the release's own reply within the test's bound
  semaphore s(conn, "async-release", 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  auto waiting = acquire_async(s, 1);
  wait_for_waiters(s, 1);

  auto p = std::make_shared<std::promise<std::pair<answer, std::thread::id>>>();
  held->async_release([p](std::error_code ec, lease::release_status status) {
    p->set_value({{ec, status}, std::this_thread::get_id()});
  });
  EXPECT_EQ(held->state(), lease_state::released);  // at once, before the answer
  auto f = p->get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const auto [got, thread] = f.get();
  EXPECT_EQ(got, (answer{std::error_code(), lease::release_status::released}));
  EXPECT_NE(thread, std::this_thread::get_id());  // the connection's executor, the handler's default

  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);  // handed on by the release, not by a poll
  auto [ec, next] = waiting.get();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_GT(next.fencing_token(), held->fencing_token());

  // Released already: Redis no longer has it, as release() would say.
  EXPECT_EQ(release_async(*held), (answer{std::error_code(), lease::release_status::not_held}));
  EXPECT_EQ(release_async(next), (answer{std::error_code(), lease::release_status::released}));
  EXPECT_EQ(s.inspect().first.holder_count, 0);
}

TEST(RedisSemaphoreAsyncRelease, CompletesThroughTheHandlersExecutorNeverInsideTheCall) {
  redis_server server;
  boost::asio::io_context mine;  // not run until the calls below have returned; outlives the io thread
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "async-release-executor", 1);
  for (const bool empty : {true, false}) {
    lease l;
    if (!empty) {
      auto r = s.try_acquire();
      ASSERT_TRUE(r);
      l = std::move(*r);
    }
    bool ran = false;
    answer got{};
    std::thread::id thread;
    l.async_release(boost::asio::bind_executor(mine, [&](std::error_code ec, lease::release_status status) {
      got = {ec, status};
      thread = std::this_thread::get_id();
      ran = true;
    }));
    EXPECT_FALSE(ran) << (empty ? "empty lease" : "held lease") << ": ran inside the call";
    mine.restart();
    while (!ran && mine.run_one_for(10s) != 0) {
    }
    ASSERT_TRUE(ran);
    EXPECT_EQ(thread, std::this_thread::get_id());  // through `mine`, which only this thread runs
    EXPECT_EQ(got,
              (answer{std::error_code(), empty ? lease::release_status::not_held : lease::release_status::released}));
  }
}

// With a deferred completion token the release starts when the operation is launched, which may be after the lease
// object has gone (its destructor released it then): the launched release answers "not held", touching nothing freed.
TEST(RedisSemaphoreAsyncRelease, ADeferredReleaseLaunchedAfterItsLeaseWentAnswersNotHeld) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "async-release-deferred", 1);
  auto r = s.try_acquire();
  ASSERT_TRUE(r);
  auto held = std::make_unique<lease>(std::move(*r));
  auto op = held->async_release(boost::asio::deferred);
  EXPECT_EQ(held->state(), lease_state::held);  // not launched yet
  held.reset();                                 // released by the destructor
  EXPECT_EQ(s.inspect().first.holder_count, 0);
  std::promise<answer> p;
  std::move(op)([&p](std::error_code ec, lease::release_status status) { p.set_value({ec, status}); });
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), (answer{std::error_code(), lease::release_status::not_held}));
}

// In flight while Redis is paused: shutdown() waits for it; past the semaphore's timeout it fails and is reported.
TEST(RedisSemaphoreAsyncRelease, IsBackgroundWorkThatShutdownWaitsFor) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.timeout = 3s;
  semaphore s(conn, "async-release-shutdown", 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  server.pause(600ms);
  const auto start = steady::now();
  std::promise<answer> p;
  held->async_release([&p](std::error_code ec, lease::release_status status) { p.set_value({ec, status}); });
  const auto [undelivered, ec] = s.shutdown(steady::now() + 5s);
  EXPECT_GE(steady::now() - start, 400ms) << "shutdown() did not wait for the release";
  EXPECT_EQ(undelivered, 0U);
  EXPECT_EQ(ec, std::error_code());
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), (answer{std::error_code(), lease::release_status::released}));
  EXPECT_EQ(s.inspect().first.holder_count, 0);

  o.timeout = 200ms;
  semaphore impatient(conn, "async-release-failed", 1, o);
  auto lost = impatient.try_acquire();
  ASSERT_TRUE(lost);
  server.pause(1500ms);
  const auto [error, status] = release_async(*lost);
  EXPECT_EQ(status, lease::release_status::failed);
  EXPECT_TRUE(error);
  const auto [failed, why] = impatient.shutdown();
  EXPECT_EQ(failed, 1U);
  EXPECT_EQ(why, error);
}

// A shutdown that waited for the release completes after the release's own completion (both through the connection's
// executor here): whoever reacts to the shutdown finds the release's handler run already.
TEST(RedisSemaphoreAsyncRelease, ItsCompletionComesBeforeTheShutdownThatWaitedForIt) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "async-release-order", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  server.pause(300ms);             // the release is still in flight when the shutdown starts waiting
  std::vector<std::string> order;  // written on the io thread only
  std::promise<void> both;
  held->async_release([&](std::error_code, lease::release_status) { order.push_back("release"); });
  s.async_shutdown([&](std::error_code, std::size_t) {
    order.push_back("shutdown");
    both.set_value();
  });
  auto f = both.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<std::string>{"release", "shutdown"}));
}

// Two chains of acquire → release → acquire… on a semaphore of one, every step started from the previous one's
// completion handler, on the connection's thread: every cycle completes, the grants' fencing tokens rise, and nothing
// is held at the end.
TEST(RedisSemaphoreAsyncRelease, ChainedCyclesRunOnTheConnectionsThread) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "async-release-chain", 1);
  constexpr int cycles = 200;
  struct chain {
    semaphore* s;
    int left;
    std::vector<std::int64_t> tokens;
    std::error_code error;
    std::promise<void> done;
    void next() {
      if (left-- == 0) return done.set_value();
      s->async_acquire(1, [this](std::error_code ec, lease l) {
        if (ec) {
          error = ec;
          return done.set_value();
        }
        tokens.push_back(l.fencing_token());
        auto held = std::make_shared<lease>(std::move(l));
        held->async_release([this, held](std::error_code e, lease::release_status status) {
          if (e || status != lease::release_status::released) {
            error = e ? e : admit::make_error_code(admit::errc::unexpected_reply);
            return done.set_value();
          }
          next();
        });
      });
    }
  };
  chain a{&s, cycles, {}, {}, {}}, b{&s, cycles, {}, {}, {}};
  auto fa = a.done.get_future(), fb = b.done.get_future();
  boost::asio::post(conn.get_executor(), [&] {
    a.next();
    b.next();
  });
  ASSERT_EQ(fa.wait_for(60s), std::future_status::ready);
  ASSERT_EQ(fb.wait_for(60s), std::future_status::ready);
  ASSERT_FALSE(a.error) << a.error.message();
  ASSERT_FALSE(b.error) << b.error.message();
  ASSERT_EQ(a.tokens.size(), static_cast<std::size_t>(cycles));
  ASSERT_EQ(b.tokens.size(), static_cast<std::size_t>(cycles));
  for (const auto* c : {&a, &b}) {
    for (std::size_t i = 1; i < c->tokens.size(); ++i) EXPECT_LT(c->tokens[i - 1], c->tokens[i]);
  }
  const auto snap = s.inspect().first;
  EXPECT_EQ(snap.holder_count, 0);
  EXPECT_EQ(snap.waiter_count, 0);
}

}  // namespace
