// admit::redis::rate_limit in admit's request middleware, against a real redis-server: per-key 429s with the
// limiter's decision, the handler run only for admitted requests, the layers composing with the local ones, and the
// failure policy answering when Redis is gone.
#include "admit/redis/middleware.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using admit::asio::rejection_reason;
using admit::redis::connection;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;

struct request {
  std::string client;
};
using response = std::string;
using outcome = admit::asio::outcome<response>;

net::awaitable<response> ok(request&) { co_return "ok"; }

// Runs one request through `mw` on the io thread and returns its outcome.
template <class Middleware>
outcome call(io_thread& io, const Middleware& mw, std::string client) {
  std::promise<outcome> done;
  net::co_spawn(
      io.context(),
      [&mw, &done, client]() -> net::awaitable<void> {
        request req{client};
        done.set_value(co_await mw.call(req, ok));
      },
      net::detached);
  return done.get_future().get();
}

TEST(RedisMiddleware, RefusesPerKeyWithTheLimitersDecision) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "mw", admit::rate::per(1, std::chrono::hours(1)), 2, patient());
  admit::semaphore sem(4);
  const auto mw = admit::redis::rate_limit(admit::asio::middleware<request, response>{}.concurrency_limit(sem), limiter,
                                           [](const request& r) { return r.client; });
  for (int i = 0; i < 2; ++i) {
    const outcome out = call(io, mw, "10.0.0.1");
    ASSERT_TRUE(out.admitted()) << i;
    EXPECT_EQ(out.response(), "ok");
  }
  const outcome refused = call(io, mw, "10.0.0.1");
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(refused.rejected().reason, rejection_reason::rate_limited);
  EXPECT_EQ(refused.rejected().rate.limit, 2);
  EXPECT_EQ(refused.rejected().rate.remaining, 0);
  EXPECT_GT(refused.rejected().rate.retry_after, 59min);
  EXPECT_EQ(sem.available(), 4);                     // the concurrency layer's permit was released with the refusal
  EXPECT_TRUE(call(io, mw, "10.0.0.2").admitted());  // another key has its own limit
  EXPECT_EQ(server.admin({"EXISTS", limiter.storage_key("10.0.0.2")}), "1");
}

TEST(RedisMiddleware, TheFailurePolicyAnswersWhenRedisIsGone) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::limiter_options o;
  o.timeout = 1s;  // the first call connects and loads the script on a machine that may be loaded
  o.failure_retry_after = 7s;
  admit::redis::gcra limiter(conn, "mwf", admit::rate::per_second(100), 10, o);
  const auto mw = admit::redis::rate_limit(admit::asio::middleware<request, response>{}, limiter,
                                           [](const request& r) { return r.client; });
  ASSERT_TRUE(call(io, mw, "a").admitted());
  server.kill();
  const outcome out = call(io, mw, "a");
  ASSERT_FALSE(out.admitted());
  EXPECT_EQ(out.rejected().reason, rejection_reason::rate_limited);
  EXPECT_EQ(out.rejected().rate.retry_after, 7s);  // fail_closed's Retry-After
}

TEST(RedisMiddleware, NegativeCostThrows) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "neg", admit::rate::per_second(1), 1);
  EXPECT_THROW(
      admit::redis::rate_limit(
          admit::asio::middleware<request, response>{}, limiter, [](const request& r) { return r.client; }, -1),
      std::invalid_argument);
}

}  // namespace
