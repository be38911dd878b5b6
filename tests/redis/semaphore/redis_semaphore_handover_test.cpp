// A lease handed from one process to another, against a real redis-server: async_try_acquire never waits and
// never queues; lease::detach() leaves the permits taken in Redis, unrenewed, until a semaphore object of the same
// name — in another process — releases the id (semaphore::release, async_release) or the lease expires; ids no lease
// can have are answered without a call.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "child_process.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "self_exec.hpp"
#include "semaphore_testing.hpp"

namespace handover_test {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::failure_policy;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::child_process;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using status = lease::release_status;

// async_try_acquire's outcome and the thread its handler ran on, waited for (at most 10 s).
struct tried {
  std::error_code ec;
  lease held;
  std::thread::id thread;
};
tried try_async(semaphore& s, std::int64_t n) {
  auto p = std::make_shared<std::promise<tried>>();
  auto f = p->get_future();
  s.async_try_acquire(n, [p](std::error_code ec, lease l) {
    p->set_value({ec, std::move(l), std::this_thread::get_id()});
  });
  if (f.wait_for(10s) != std::future_status::ready) return {admit::errc::timeout, lease(), {}};
  return f.get();
}

// async_release(id)'s answer, waited for (at most 10 s).
std::pair<std::error_code, status> release_async(semaphore& s, const std::string& id) {
  auto p = std::make_shared<std::promise<std::pair<std::error_code, status>>>();
  auto f = p->get_future();
  s.async_release(id, [p](std::error_code ec, status st) { p->set_value({ec, st}); });
  if (f.wait_for(10s) != std::future_status::ready) return {admit::errc::timeout, status::failed};
  return f.get();
}

// The child's part: `detach URL NAME` takes the one permit of NAME, detaches it, writes "lease ID" on a line of its own
// on standard output and ends with every object destroyed (a lease object's destructor would release what it still
// held) — exit 0, or 2 when the permit was not granted.
[[noreturn]] void run_child(const std::vector<std::string>& args) {
  {
    io_thread io;
    connection conn(io.executor(), args.at(1));
    semaphore s(conn, args.at(2), 1);
    auto r = s.try_acquire();
    if (!r) std::_Exit(2);
    const std::string id = r->detach();
    std::fprintf(stdout, "\nlease %s\n", id.c_str());
    std::fflush(stdout);
    (void)s.shutdown();
  }
  std::_Exit(0);
}

ADMIT_CHILD_ROLE_TEST(RedisSemaphoreHandoverChild, run_child)

TEST(RedisSemaphoreHandover, AsyncTryAcquireTakesFreePermitsAndNeverQueues) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "try-async", 2);
  s.enable_metrics();
  tried first = try_async(s, 2);
  ASSERT_FALSE(first.ec) << first.ec.message();
  EXPECT_EQ(first.held.count(), 2);
  EXPECT_EQ(first.held.available(), 0);                 // what the grant left free, from its reply
  EXPECT_NE(first.thread, std::this_thread::get_id());  // the connection's executor, the handler's default

  tried refused = try_async(s, 1);
  EXPECT_EQ(refused.ec, admit::errc::would_block);
  EXPECT_FALSE(refused.held);
  EXPECT_EQ(s.inspect().first.waiter_count, 0);  // it did not join the queue
  EXPECT_EQ(try_async(s, 3).ec, admit::errc::exceeds_capacity);

  ASSERT_EQ(first.held.release().first, status::released);
  tried again = try_async(s, 1);
  ASSERT_FALSE(again.ec) << again.ec.message();
  EXPECT_GT(again.held.fencing_token(), first.held.fencing_token());
  EXPECT_EQ(again.held.available(), 1);
  EXPECT_EQ(s.try_acquire()->available(), 0);  // the blocking form's too

  // async_inspect answers as inspect does, off the calling thread.
  auto p = std::make_shared<std::promise<std::pair<std::error_code, admit::redis::semaphore_snapshot>>>();
  auto f = p->get_future();
  s.async_inspect(10, [p](std::error_code ec, admit::redis::semaphore_snapshot snap) {
    p->set_value({ec, std::move(snap)});
  });
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const auto [ec, snap] = f.get();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(snap.capacity, 2);
  EXPECT_EQ(snap.available, 1);  // the blocking try's lease was released at the end of its statement
  EXPECT_EQ(snap.holder_count, 1);

  // One outcome each, as try_acquire counts.
  const auto m = s.metrics();
  EXPECT_EQ(m.admitted, 3u);  // two asynchronous, one blocking
  EXPECT_EQ(m.unavailable, 1u);
  EXPECT_EQ(m.exceeds_capacity, 1u);
  EXPECT_THROW(s.async_try_acquire(0, [](std::error_code, lease) {}), std::invalid_argument);
}

TEST(RedisSemaphoreHandover, ALeaseDetachedInOneProcessIsReleasedByItsIdInAnother) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "handover", 1);

  child_process child =
      admit::redis::testing::spawn_role("RedisSemaphoreHandoverChild.Role", {"detach", server.url(), "handover"});
  ASSERT_EQ(child.wait(), 0) << child.err();
  const std::string& out = child.out();
  const auto at = out.find("\nlease ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string id = out.substr(at + 7, out.find('\n', at + 7) - at - 7);
  ASSERT_EQ(id.size(), 32u) << out;

  // The child is gone and its objects destroyed: the lease is still held in Redis, under the id it printed.
  const auto snap = s.inspect().first;
  ASSERT_EQ(snap.holder_count, 1);
  EXPECT_EQ(snap.holders.at(0).id, id);
  EXPECT_EQ(s.try_acquire().error(), admit::errc::would_block);

  EXPECT_EQ(s.release(id), (std::pair{status::released, std::error_code()}));
  EXPECT_EQ(s.release(id), (std::pair{status::not_held, std::error_code()}));  // once
  auto next = s.try_acquire();
  ASSERT_TRUE(next) << next.error().message();

  // The asynchronous form, on a lease detached here.
  const std::string mine = next->detach();
  EXPECT_FALSE(*next);
  EXPECT_EQ(next->detach(), "");  // nothing left to hand over
  EXPECT_EQ(s.inspect().first.holder_count, 1);
  EXPECT_EQ(release_async(s, mine), (std::pair{std::error_code(), status::released}));
  EXPECT_EQ(release_async(s, mine), (std::pair{std::error_code(), status::not_held}));
  EXPECT_EQ(s.inspect().first.holder_count, 0);
  EXPECT_EQ(s.shutdown(), (std::pair<std::size_t, std::error_code>{0, {}}));
}

TEST(RedisSemaphoreHandover, ADetachedLeaseIsNoLongerRenewedAndExpires) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.lease_ttl = 300ms;  // renewed every 100 ms while a lease object holds it
  semaphore s(conn, "detached-expiry", 1, o);
  auto kept = s.try_acquire();
  ASSERT_TRUE(kept);
  // Renewals keep the held lease alive well past its first expiry...
  const auto first_expiry = kept->expires_at();
  ASSERT_TRUE(eventually([&] { return kept->expires_at() > first_expiry + 600ms; }));
  // ...and stop with detach(): Redis's clock passes its expiry, and the next acquisition sweeps it away.
  const std::string id = kept->detach();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(eventually([&] {
    const auto snap = s.inspect().first;
    return snap.holder_count == 0 || snap.holders.at(0).remaining < 0us;  // swept, or past its expiry
  })) << "the detached lease was still renewed";
  auto next = s.try_acquire();
  ASSERT_TRUE(next) << next.error().message();
  EXPECT_EQ(s.release(id).first, status::not_held);  // expired: nothing to give back
}

TEST(RedisSemaphoreHandover, IdsNoLeaseCanHaveAreAnsweredWithoutACall) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "no-such-lease", 1);
  auto held = s.try_acquire();  // the script is loaded and the semaphore exists
  ASSERT_TRUE(held);
  const long long calls = server.calls("fcall");
  for (const std::string id : {"", "local:0123", "a:b"}) {
    EXPECT_EQ(s.release(id), (std::pair{status::not_held, std::error_code()})) << id;
    EXPECT_EQ(release_async(s, id), (std::pair{std::error_code(), status::not_held})) << id;
  }
  EXPECT_EQ(server.calls("fcall"), calls);
  // An id Redis does not know is asked, and not held; the lease that is held stays so.
  EXPECT_EQ(s.release("0123456789abcdef0123456789abcdef").first, status::not_held);
  EXPECT_EQ(s.inspect().first.holder_count, 1);
}

TEST(RedisSemaphoreHandover, ALocalLeaseIsGivenBackByDetachNotHandedOver) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.timeout = 200ms;
  o.on_failure = failure_policy::fail_open;
  o.local_cap = 1;
  o.breaker.failure_threshold = 0;
  semaphore s(conn, "local-detach", 1, o);
  server.kill();
  tried local = try_async(s, 1);  // Redis is away: the failure policy's local lease
  ASSERT_FALSE(local.ec) << local.ec.message();
  EXPECT_EQ(local.held.fencing_token(), 0);
  const std::error_code beyond = try_async(s, 1).ec;  // the cap is held: Redis's failure, as fail_closed
  EXPECT_TRUE(beyond);
  EXPECT_NE(beyond, admit::errc::would_block);
  EXPECT_EQ(local.held.detach(), "");  // not in Redis: nothing another process could release
  tried again = try_async(s, 1);       // the local permit came back
  EXPECT_FALSE(again.ec) << again.ec.message();
}

// idle_ttl: while leases are held (detached: nobody renews or releases them) every key outlives them; once the last
// has expired, the keys are gone idle_ttl later — without any further call — and the next acquisition starts anew.
TEST(RedisSemaphoreHandover, AnIdleSemaphoreLeavesNothingInRedis) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.lease_ttl = 400ms;
  o.idle_ttl = 200ms;
  semaphore s(conn, "idle", 2, o);
  auto first = s.try_acquire();
  ASSERT_TRUE(first);
  const std::string a = first->detach();
  auto second = s.try_acquire();
  ASSERT_TRUE(second);
  const std::string b = second->detach();
  // Every key expires no earlier than the latest lease (400 ms) plus the idle time, and at most a quarter of the idle
  // time later: 650 ms from now, at most.
  const std::vector<std::string> keys = server.keys();
  ASSERT_EQ(keys, (std::vector<std::string>{"{idle}:holders", "{idle}:leases", "{idle}:meta"}));
  for (const auto& k : keys) {
    const int pttl = std::stoi(server.admin({"PTTL", k}));
    EXPECT_GT(pttl, 450) << k;
    EXPECT_LE(pttl, 651) << k;
  }
  // Released by id, the one left keeps the keys alive; once it has expired too, Redis deletes them by itself.
  ASSERT_EQ(s.release(a).first, status::released);
  for (const auto& k : keys) EXPECT_GT(std::stoi(server.admin({"PTTL", k})), 300) << k;
  ASSERT_TRUE(eventually([&] { return server.keys().empty(); })) << "left: " << server.keys().size();
  EXPECT_EQ(s.release(b).first, status::not_held);
  // Made anew with the object's capacity.
  auto again = s.try_acquire(2);
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_GT(again->fencing_token(), 0);

  // Without idle_ttl nothing expires.
  semaphore kept(conn, "kept", 1);
  ASSERT_TRUE(kept.try_acquire());
  for (const auto& k : server.keys()) {
    if (k.starts_with("{kept}")) {
      EXPECT_EQ(server.admin({"PTTL", k}), "-1") << k;
    }
  }
  // A caller without idle_ttl on a semaphore that has one still moves its keys' expiry past its own leases (the
  // longest idle time given is kept in Redis), and so does inspect, whose grants are leases too.
  ASSERT_EQ(again->release().first, status::released);
  semaphore_options longer;
  longer.lease_ttl = 5s;
  semaphore plain(conn, "idle", 2, longer);
  auto held = plain.try_acquire();
  ASSERT_TRUE(held);
  for (const auto& k : server.keys()) {
    if (k.starts_with("{idle}")) {
      EXPECT_GT(std::stoi(server.admin({"PTTL", k})), 4'500) << k;
    }
  }
  // Every key has the one expiry meta records (kept, in ms), inspect's call too.
  ASSERT_FALSE(plain.inspect().second);
  const std::string kept_until = server.admin({"HGET", "{idle}:meta", "kept"});
  for (const auto& k : server.keys()) {
    if (k.starts_with("{idle}")) {
      EXPECT_EQ(server.admin({"PEXPIRETIME", k}), kept_until) << k;
    }
  }

  // Keys whose expiry was moved earlier than meta's kept (as a call of an older admit, which sets them to exactly
  // what it needs, can) are all moved again by the next call that needs more, even one that would not need more than
  // kept.
  for (const auto& k : server.keys()) {
    if (k.starts_with("{idle}")) (void)server.admin({"PEXPIRE", k, "1000"});
  }
  auto extra = plain.try_acquire();
  ASSERT_TRUE(extra);
  for (const auto& k : server.keys()) {
    if (k.starts_with("{idle}")) {
      EXPECT_GT(std::stoi(server.admin({"PTTL", k})), 4'500) << k << " left to expire before the lease";
    }
  }
  ASSERT_EQ(extra->release().first, status::released);

  // A key emptied (and so deleted by Redis) and made anew by a call that needs no later expiry still gets it: the
  // holders and leases of a lease released and acquired again.
  ASSERT_EQ(held->release().first, status::released);
  EXPECT_EQ(server.admin({"EXISTS", "{idle}:holders"}), "0");
  auto next = plain.try_acquire();
  ASSERT_TRUE(next);
  // (Meta's kept again: on a slow machine this call may have needed a later one and moved every key.)
  const std::string kept_now = server.admin({"HGET", "{idle}:meta", "kept"});
  for (const auto& k : {"{idle}:holders", "{idle}:leases"}) {
    EXPECT_EQ(server.admin({"PEXPIRETIME", k}), kept_now) << k << " made anew without an expiry";
  }

  semaphore_options bad;
  bad.idle_ttl = -1ms;
  EXPECT_THROW(semaphore(conn, "bad", 1, bad), std::invalid_argument);
}

}  // namespace handover_test
