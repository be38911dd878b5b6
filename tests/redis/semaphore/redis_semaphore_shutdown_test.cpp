// admit::redis::semaphore at exit: nothing a process gives back is lost when it ends right after. Real processes (this
// test binary run again with --sem-child, through posix_spawn) acquire and release, or wait and are cancelled, then
// end at once with _Exit (no destructor, no flush); the test then reads Redis. In-process: shutdown() and
// async_shutdown() wait for the background work of leases destroyed on the executor's thread and of cancelled async
// waits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "child_process.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "self_exec.hpp"
#include "tcp_proxy.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::lease_state;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::child_process;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::tcp_proxy;
using steady = std::chrono::steady_clock;

child_process spawn_child(const std::vector<std::string>& role) {
  return admit::redis::testing::spawn_role("RedisSemaphoreChild.Role", role);
}

// The child's part. Roles:
//   cycle URL NAME          acquire 1 of capacity 1 (within 5 s), release it at scope end, _Exit(0) at once
//   cancel URL NAME HOW     capacity 1, held by the test: queue, then end the wait by HOW (stop: a stop token, once
//                           the test's own waiter has queued behind this one; deadline: try_acquire_for(1 s)); _Exit
//                           at once after the call returns: 0 when it failed as it should
[[noreturn]] void run_child(const std::vector<std::string>& args) {
  io_thread io;
  connection conn(io.executor(), args.at(1));
  semaphore s(conn, args.at(2), 1);
  if (args[0] == "cycle") {
    {
      auto r = s.try_acquire_for(5s);
      if (!r) std::_Exit(2);
    }  // released here, by the destructor
    std::_Exit(0);
  }
  if (args[0] == "cancel") {
    const auto before = s.inspect().first.waiter_count;
    if (args.at(3) == "stop") {
      std::stop_source stop;
      std::thread watcher([&] {
        while (s.inspect().first.waiter_count < before + 2) std::this_thread::sleep_for(1ms);
        stop.request_stop();
      });
      auto r = s.acquire(1, stop.get_token());
      watcher.join();
      std::_Exit(r.error() == admit::errc::cancelled ? 0 : 3);
    }
    auto r = s.try_acquire_for(1s);
    // After its deadline a wait waits at most 40 ms for its leave: what Redis has not answered by then, shutdown()
    // waits for.
    (void)s.shutdown();
    std::_Exit(r.error() == admit::errc::timeout ? 0 : 3);
  }
  std::_Exit(4);
}

ADMIT_CHILD_ROLE_TEST(RedisSemaphoreChild, run_child)

semaphore_options quiet_options() {
  semaphore_options o;
  o.lease_ttl = 10s;  // a lost release would hold the permit for 10 s: far beyond what the tests allow
  o.poll_interval = 1s;
  return o;
}

// 100 processes in turn acquire, release at scope end and exit at once: after each exit, Redis has no holder.
TEST(RedisSemaphoreShutdown, AReleaseAtScopeEndIsInRedisBeforeTheProcessExits) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore observer(conn, "exit-cycle", 1, quiet_options());
  for (int run = 0; run < 100; ++run) {
    child_process child = spawn_child({"cycle", server.url(), "exit-cycle"});
    ASSERT_EQ(child.wait(), 0) << "run " << run << ": " << child.err();
    const auto snap = observer.inspect().first;
    ASSERT_EQ(snap.holder_count, 0) << "run " << run << ": the release was lost at exit";
    ASSERT_EQ(snap.available, 1) << "run " << run;
  }
}

// A waiter in another process that gives up (stop token, or deadline) is out of the queue when its call returns (after
// a deadline, when shutdown() returns), even though the process exits right after: the next waiter gets the permit
// from the next release. Without the
// leave-queue call, the release would go to the dead waiter (its place expires only after waiter_ttl, 4 s here) and
// the next waiter would wait for that grant's lease_ttl (10 s).
void expect_cancelled_waiter_leaves(const std::string& how) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  connection other_conn(io.executor(), server.url());
  const semaphore_options o = quiet_options();
  semaphore holder(conn, "exit-cancel", 1, o);
  semaphore next(other_conn, "exit-cancel", 1, o);
  auto held = holder.try_acquire();
  ASSERT_TRUE(held);

  child_process child = spawn_child({"cancel", server.url(), "exit-cancel", how});
  ASSERT_TRUE(eventually([&] { return holder.inspect().first.waiter_count == 1; }));
  auto second = std::async(std::launch::async, [&] { return next.try_acquire_for(20s); });
  // The stopped child waits for this second waiter to queue behind it; the timed one gives up after 1 s.
  ASSERT_EQ(child.wait(), 0) << child.err();
  EXPECT_EQ(holder.inspect().first.waiter_count, 1) << "the child's request is still queued after it exited";

  const auto released = steady::now();
  const auto before_release = holder.inspect().first.server_time;  // Redis's clock
  ASSERT_EQ(held->release().first, lease::release_status::released);
  const auto snap = holder.inspect().first;
  EXPECT_EQ(snap.waiter_count, 0);
  EXPECT_EQ(snap.holder_count, 1);  // granted inside the release, to the live waiter
  ASSERT_EQ(second.wait_for(1s), std::future_status::ready) << "the permit went to the dead waiter";
  auto r = second.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(steady::now() - released, 1s);
  // On Redis's clock, the grant (its expiry minus lease_ttl) came within the release's call: after the moment before
  // it, and before the inspect right after it — not at a poll, nor at the dead waiter's lease expiry. (It said "within
  // 10 ms of the moment before the release": a bound on the machine's speed.)
  const auto granted_at = r->expires_at() - std::chrono::duration_cast<std::chrono::microseconds>(o.lease_ttl);
  EXPECT_GE(granted_at, before_release);
  EXPECT_LE(granted_at, snap.server_time);
}

TEST(RedisSemaphoreShutdown, AWaiterStoppedRightBeforeExitLeavesTheQueue) { expect_cancelled_waiter_leaves("stop"); }

TEST(RedisSemaphoreShutdown, AWaiterTimedOutRightBeforeExitLeavesTheQueue) {
  expect_cancelled_waiter_leaves("deadline");
}

// A lease destroyed on the connection's executor thread (in a completion handler) cannot wait there: its release is
// background work, and shutdown() waits for it, as for the leave-queue call of a cancelled async_acquire.
TEST(RedisSemaphoreShutdown, ShutdownWaitsForReleasesAndLeavesSentInTheBackground) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  connection observer_conn(io.executor(), server.url());
  semaphore s(conn, "background", 1, quiet_options());
  semaphore observer(observer_conn, "background", 1, quiet_options());

  std::promise<std::error_code> got;
  steady::duration destroying{};
  s.async_acquire(1, [&](std::error_code ec, lease l) {
    const auto start = steady::now();
    l = lease();  // destroyed on the executor's thread: released in the background, without waiting
    destroying = steady::now() - start;
    got.set_value(ec);
  });
  ASSERT_EQ(got.get_future().get(), std::error_code());
  EXPECT_LT(destroying, s.options().timeout / 2) << "the destructor waited on the executor's thread";

  auto held = observer.try_acquire_for(5s);  // after the background release
  ASSERT_TRUE(held);
  boost::asio::cancellation_signal signal;
  std::promise<std::error_code> cancelled;
  s.async_acquire(1, boost::asio::bind_cancellation_slot(signal.slot(),
                                                         [&](std::error_code ec, lease) { cancelled.set_value(ec); }));
  ASSERT_TRUE(eventually([&] { return observer.inspect().first.waiter_count == 1; }));
  boost::asio::post(conn.get_executor(), [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  ASSERT_EQ(cancelled.get_future().get(), admit::errc::cancelled);
  const auto [undelivered, ec] = s.shutdown();
  EXPECT_EQ(undelivered, 0U);
  EXPECT_EQ(ec, std::error_code());
  EXPECT_EQ(observer.inspect().first.waiter_count, 0);  // right after shutdown(), no eventually
}

// What cannot be delivered is reported: Redis paused past the deadline leaves the leave-queue call in flight.
TEST(RedisSemaphoreShutdown, ShutdownReportsWhatWasNotDeliveredByItsDeadline) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o = quiet_options();
  o.timeout = 3s;
  semaphore s(conn, "undelivered", 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  boost::asio::cancellation_signal signal;
  std::promise<std::error_code> cancelled;
  s.async_acquire(1, boost::asio::bind_cancellation_slot(signal.slot(),
                                                         [&](std::error_code ec, lease) { cancelled.set_value(ec); }));
  ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == 1; }));
  server.pause(1000ms);
  boost::asio::post(conn.get_executor(), [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  ASSERT_EQ(cancelled.get_future().get(), admit::errc::cancelled);
  const auto [undelivered, ec] = s.shutdown(steady::now() + 100ms);
  EXPECT_EQ(undelivered, 1U);
  EXPECT_EQ(ec, admit::errc::timeout);
  // After the pause it is delivered; async_shutdown reports nothing left.
  std::promise<std::pair<std::error_code, std::size_t>> drained;
  s.async_shutdown([&](std::error_code e, std::size_t n) { drained.set_value({e, n}); });
  auto f = drained.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get(), (std::pair<std::error_code, std::size_t>{}));
  EXPECT_EQ(s.inspect().first.waiter_count, 0);
}

// A lease this process gave up as lost — its renewals got no answer until it would have expired — may still be held
// in Redis: the renewals ran, only their answers were lost. Its destructor releases it all the same.
TEST(RedisSemaphoreShutdown, ALeaseGivenUpAsLostIsStillReleasedByItsDestructor) {
  redis_server server;
  tcp_proxy proxy(server.port());
  io_thread io;
  connection conn(io.executor(), proxy.url());
  connection observer_conn(io.executor(), server.url());
  semaphore_options o = quiet_options();
  o.lease_ttl = 3s;  // renewed every second; lost 3 s after the last answered renewal
  semaphore s(conn, "given-up", 1, o);
  semaphore observer(observer_conn, "given-up", 1, quiet_options());
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  proxy.drop_replies(true);  // the renewals reach Redis and run; their answers never come back
  ASSERT_TRUE(eventually([&] { return held->state() == lease_state::lost; }));
  ASSERT_EQ(observer.inspect().first.holder_count, 1) << "Redis no longer held it: the test proves nothing";
  proxy.drop_replies(false);
  proxy.sever();  // the answers the client missed would be out of step: it reconnects
  { lease gone = std::move(*held); }
  EXPECT_EQ(observer.inspect().first.holder_count, 0);  // right after the destructor, no eventually
}

}  // namespace
