// admit::redis::semaphore when Redis cannot answer: fail-closed by default (the call's error), fail-open with a local
// cap per semaphore object (local leases, never in Redis), and the circuit breaker that stops calling a dead Redis.
#include <gtest/gtest.h>

#include <limits>

#include <chrono>
#include <future>
#include <string>
#include <system_error>
#include <thread>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/limiter_result.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
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

namespace {

// A waiter whose polls Redis answers "not now" (BUSY: a script running past busy-reply-threshold; CLUSTERDOWN, LOADING
// and the others alike) keeps waiting and is granted once Redis answers again. Its first BUSY poll ended the wait with
// unexpected_reply — on a Redis Cluster, `admit run` gave up with exit 69 while a node rejoined.
TEST(RedisSemaphoreFailure, AWaiterAnsweredNotNowKeepsWaitingAndIsGrantedAfterwards) {
  redis_server::config busy_after_20ms;
  busy_after_20ms.extra_arguments = {"--busy-reply-threshold", "20"};
  redis_server server(busy_after_20ms);
  std::promise<admit::redis::reply> ended;  // (before the connections: their completions may outlive a failed ASSERT)
  io_thread io;
  connection holder_side(io.executor(), server.url()), waiter_side(io.executor(), server.url()),
      busy(io.executor(), server.url()), direct(io.executor(), server.url());
  semaphore_options o = quick(failure_policy::fail_closed);
  o.poll_interval = 20ms;
  semaphore holder(holder_side, "not-now", 1, o), waiter(waiter_side, "not-now", 1, o);
  auto held = holder.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  auto waiting = std::async(std::launch::async, [&] { return waiter.try_acquire_for(20s); });
  ASSERT_TRUE(admit::redis::testing::eventually([&] {
    const auto [snap, ec] = holder.inspect();
    return !ec && snap.waiter_count == 1;
  }));
  // A script that runs until killed: every other command is answered BUSY meanwhile.
  busy.async_execute_command(std::nullopt, {"EVAL", "local i = 0 while true do i = i + 1 end", "0"},
                             [&](boost::system::error_code, admit::redis::reply r) { ended.set_value(r); });
  // Ten of this test's own PINGs answered BUSY, 20 ms apart: the waiter has polled about as often.
  int busy_answers = 0;
  ASSERT_TRUE(admit::redis::testing::eventually([&] {
    if (direct.execute("PING").value.is_error("BUSY")) ++busy_answers;
    std::this_thread::sleep_for(20ms);  // (not time made to pass: the polls' pace)
    return busy_answers >= 10;
  }));
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout) << "the wait ended while Redis was busy";
  EXPECT_TRUE(direct.execute("SCRIPT", "KILL").value.is_status());
  EXPECT_TRUE(ended.get_future().get().is_error());
  // The waiter was answered BUSY too (Redis counts every BUSY reply), and is still waiting.
  const std::string stats = direct.execute("INFO", "errorstats").value.str();
  const auto at = stats.find("errorstat_BUSY:count=");
  ASSERT_NE(at, std::string::npos) << stats;
  EXPECT_GT(std::stoll(stats.substr(at + 21)), busy_answers) << stats;
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(held->release().first, lease::release_status::released);
  auto granted = waiting.get();
  ASSERT_TRUE(granted) << granted.error().message();
  EXPECT_GT(granted->fencing_token(), held->fencing_token());
}

}  // namespace
