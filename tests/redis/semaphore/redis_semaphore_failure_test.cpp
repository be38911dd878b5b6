// admit::redis::semaphore when Redis cannot answer: fail-closed by default (the call's error), fail-open with a local
// cap per semaphore object (local leases, never in Redis), and the circuit breaker that stops calling a dead Redis.
#include <gtest/gtest.h>

#include <limits>

#include <chrono>
#include <string>
#include <system_error>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/limiter_result.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::failure_policy;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using steady = std::chrono::steady_clock;

semaphore_options quick(failure_policy p) {
  semaphore_options o;
  o.timeout = 200ms;
  o.poll_interval = 50ms;
  o.on_failure = p;
  o.local_cap = 2;
  o.breaker.failure_threshold = 0;  // off unless a test turns it on
  return o;
}

TEST(RedisSemaphoreFailure, FailClosedByDefaultReturnsTheCallsError) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "closed-policy", 1, quick(failure_policy::fail_closed));
  server.kill();
  auto r = s.try_acquire();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().category(), admit::error_category());
  auto w = s.try_acquire_for(300ms);
  ASSERT_FALSE(w);
}

// Fail-open grants local leases while the object holds fewer than local_cap permits in them (the documented
// over-admission bound), and fails as fail-closed beyond; a local lease given back frees its place.
TEST(RedisSemaphoreFailure, FailOpenGrantsLocalLeasesUpToTheLocalCap) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "open-policy", 1, quick(failure_policy::fail_open));
  server.kill();
  auto a = s.try_acquire();
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->fencing_token(), 0);
  EXPECT_EQ(a->id().rfind("local:", 0), 0U);
  auto b = s.try_acquire_for(1s);  // the waiting form too
  ASSERT_TRUE(b) << b.error().message();
  auto c = s.try_acquire();
  ASSERT_FALSE(c);  // local_cap 2 reached: the call's error
  EXPECT_NE(c.error(), std::error_code());
  EXPECT_EQ(a->release().first, lease::release_status::released);
  EXPECT_EQ(a->release().first, lease::release_status::not_held);
  auto d = s.try_acquire();
  EXPECT_TRUE(d) << d.error().message();
  EXPECT_TRUE(d->renew().first);  // nothing in Redis to expire
}

// A request above what the local cap can ever hold gets no local lease, however large (n near INT64_MAX once
// overflowed the cap check); nor does any request after this process closed its own connection: that is not an
// outage, and the error says closed.
TEST(RedisSemaphoreFailure, FailOpenGivesNoLocalLeaseBeyondTheCapOrAfterClose) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "open-limits", 1, quick(failure_policy::fail_open));
  server.kill();
  auto one = s.try_acquire();  // 1 of local_cap 2
  ASSERT_TRUE(one) << one.error().message();
  auto huge = s.try_acquire(std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(huge);
  conn.close();
  auto after = s.try_acquire();
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error(), admit::errc::closed);
}

// After failure_threshold failed acquisitions the breaker opens: the next ones fail with circuit_open at once, without
// a call (and fail-open serves them locally without waiting for a timeout).
TEST(RedisSemaphoreFailure, TheBreakerStopsCallingADeadRedis) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o = quick(failure_policy::fail_closed);
  o.breaker.failure_threshold = 2;
  o.breaker.open_for = 10s;
  semaphore s(conn, "breaker", 1, o);
  server.kill();
  ASSERT_FALSE(s.try_acquire());
  ASSERT_FALSE(s.try_acquire());
  const auto start = steady::now();
  auto r = s.try_acquire_for(5s);
  EXPECT_EQ(r.error(), admit::errc::circuit_open);
  EXPECT_LT(steady::now() - start, o.timeout);  // no call waited for

  o.on_failure = failure_policy::fail_open;
  semaphore open(conn, "breaker-open", 1, o);
  auto first = open.try_acquire();  // failures 1 and 2 are served locally too
  auto second = open.try_acquire();
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  const auto refused_at = steady::now();
  auto third = open.try_acquire_for(5s);
  EXPECT_EQ(third.error(), admit::errc::circuit_open);  // local_cap 2 reached
  EXPECT_LT(steady::now() - refused_at, o.timeout);
}

TEST(RedisSemaphoreFailure, InvalidPolicyNamesTheValue) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.on_failure = failure_policy::local_fallback;
  EXPECT_THROW(semaphore(conn, "p", 1, o), std::invalid_argument);
  o.on_failure = failure_policy::fail_open;
  o.local_cap = -1;
  EXPECT_THROW(semaphore(conn, "p", 1, o), std::invalid_argument);
}

}  // namespace
