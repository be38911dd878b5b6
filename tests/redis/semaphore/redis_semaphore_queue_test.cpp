// The semaphore's queue in Redis, against a real redis-server, with waiters of "another process" queued by calling
// the script directly (a thousand threads would only slow the tests): a grant and a join cost the same number of Redis
// commands with 1,000 waiters as with 10; waiters that leave from the middle of the queue (cancelled, expired) keep
// its list within twice the waiters plus 32 entries, and the order of those that stay; a head that does not fit
// keeps its place unless it left.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "semaphore_script.hpp"

namespace {

using admit::redis::connection;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::testing::eval_args;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::semaphore_source;

// "w" + i, built piecewise: GCC 12 -O3 warns (-Wstringop-overflow, a false positive) on the operator+ form.
std::string numbered(const char* prefix, int i) {
  std::string id = prefix;
  id += std::to_string(i);
  return id;
}

// Waiters of another process on semaphore `name` (its wake list is not this test's semaphore object's).
class other_process {
 public:
  other_process(const redis_server& server, std::string name)
      : server_(server), name_(std::move(name)), source_(semaphore_source()) {
    EXPECT_FALSE(source_.empty());
  }
  // Queues waiter `id` for `n` permits; `waiter_ttl_us` until it is presumed dead. The reply's status.
  std::string join(const std::string& id, const std::string& max_waiters = "-1",
                   const std::string& waiter_ttl_us = "60000000", const std::string& n = "1") {
    return first(call({"acquire", "1", id, n, "60000000", "1", max_waiters, waiter_ttl_us, wake()}));
  }
  std::string cancel(const std::string& id) { return first(call({"cancel", "1", id, wake()})); }
  // Any call (the operation, the definition, its arguments): the reply's status.
  std::string status(const std::vector<std::string>& argv) const { return first(call(argv)); }
  std::string wake() const { return "{" + name_ + "}:wake:other"; }
  // The length of the queue's list, departed waiters not compacted yet included.
  long long queue_length() const { return std::stoll(server_.admin({"LLEN", "{" + name_ + "}:waiting"})); }

 private:
  std::string call(const std::vector<std::string>& argv) const {
    return server_.admin(eval_args(source_, name_, argv));
  }
  // admin() gives an array reply's elements one per line: the status is the first.
  static std::string first(const std::string& r) { return r.substr(0, r.find('\n')); }

  const redis_server& server_;
  std::string name_;
  std::string source_;
};

// O(1) Redis work per grant: a release that grants the head, and a request that joins the queue, cost the same
// number of Redis commands (INFO commandstats, the script's own calls included) with 1,000 waiters as with 10.
TEST(RedisSemaphoreQueue, AReleaseAndAJoinCostTheSameWithAThousandWaiters) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const auto costs = [&](const std::string& name, int waiters) {
    semaphore s(conn, name, 1);
    auto held = s.try_acquire();
    EXPECT_TRUE(held);
    other_process other(server, name);
    for (int i = 0; i < waiters; ++i) other.join(numbered("w", i), "100000");
    EXPECT_EQ(s.inspect().first.waiter_count, waiters);
    const long long before = server.calls();
    EXPECT_EQ(held->release().first, lease::release_status::released);
    const long long release = server.calls() - before;
    const auto snap = s.inspect().first;
    EXPECT_EQ(snap.waiter_count, waiters - 1);  // the head was granted
    EXPECT_EQ(snap.holders.at(0).id, "w0");
    const long long before_join = server.calls();
    other.join("late");
    const long long join = server.calls() - before_join;
    EXPECT_EQ(s.inspect().first.waiter_count, waiters);
    return std::pair<long long, long long>{release, join};
  };
  const auto few = costs("few", 10);
  const auto many = costs("many", 1000);
  EXPECT_EQ(many.first, few.first);
  EXPECT_EQ(many.second, few.second);
  EXPECT_LT(many.first, 40);
  EXPECT_LT(many.second, 20);
}

// Cancelled waiters leave their place in the list behind until it reaches the head or the list is compacted: the
// list never holds more than twice the waiters plus 32 entries, and the waiters that stay are granted in their order.
TEST(RedisSemaphoreQueue, CancelsFromTheMiddleKeepTheListBoundedAndTheOrder) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "cancels", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  other_process other(server, "cancels");
  constexpr int waiters = 300;
  const std::vector<int> stay = {7, 150, 299};
  for (int i = 0; i < waiters; ++i) ASSERT_EQ(other.join(numbered("w", i)), "1");  // queued
  long long longest = 0;
  int left = waiters;
  for (int i = 0; i < waiters; ++i) {
    if (std::find(stay.begin(), stay.end(), i) != stay.end()) continue;
    ASSERT_EQ(other.cancel(numbered("w", i)), "6");  // cancelled
    --left;
    longest = std::max(longest, other.queue_length());
    ASSERT_LE(other.queue_length(), 2 * left + 32) << "after cancelling w" << i;
  }
  EXPECT_GT(longest, left) << "no cancel left its place behind: the bound was never tested";
  const auto snap = s.inspect().first;
  ASSERT_EQ(snap.waiter_count, 3);
  ASSERT_EQ(snap.queue.size(), 3U);
  for (std::size_t i = 0; i < stay.size(); ++i) EXPECT_EQ(snap.queue[i].id, numbered("w", stay[i]));
  // The head is w7, whatever the list still holds in front of it.
  ASSERT_EQ(held->release().first, lease::release_status::released);
  const auto after = s.inspect().first;
  ASSERT_EQ(after.holders.size(), 1U);
  EXPECT_EQ(after.holders[0].id, "w7");
  EXPECT_EQ(after.waiter_count, 2);
  EXPECT_EQ(other.cancel("w7"), "6");  // granted before the cancel: the grant goes back
  const auto freed = s.inspect().first;
  EXPECT_EQ(freed.holder_count, 1);  // w150, the next in line
  ASSERT_EQ(freed.holders.size(), 1U);
  EXPECT_EQ(freed.holders[0].id, "w150");
  EXPECT_EQ(freed.waiter_count, 1);
}

// Waiters that stop polling leave at their expiry, and their places in the list go with them (compacted) even when
// no grant comes to skip them: max_waiters counts only live waiters.
TEST(RedisSemaphoreQueue, ExpiredWaitersLeaveTheListAndFreeTheirPlaces) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "expired", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  other_process other(server, "expired");
  // A waiter ttl of 1 µs: each is past its expiry at the next call, which sweeps it.
  for (int i = 0; i < 200; ++i) ASSERT_EQ(other.join(numbered("dead", i), "5", "1"), "1");
  ASSERT_EQ(other.join("alive", "1"), "1");  // max_waiters 1: the dead ones have gone
  EXPECT_LE(other.queue_length(), 2 * 1 + 32);
  EXPECT_EQ(other.join("one too many", "1"), "3");  // queue full
  ASSERT_EQ(held->release().first, lease::release_status::released);
  const auto after = s.inspect().first;
  ASSERT_EQ(after.holders.size(), 1U);
  EXPECT_EQ(after.holders[0].id, "alive");
  EXPECT_EQ(after.waiter_count, 0);
}

// An expiry without a record in the queue (a state no operation leaves, but Redis is shared) is swept like any other:
// the sweep neither loops on it nor comes back to it at every call.
TEST(RedisSemaphoreQueue, ExpiriesWithoutAWaiterAreSweptToo) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "ghosts", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  for (int i = 0; i < 150; ++i) server.admin({"ZADD", "{ghosts}:expiry", "1", numbered("ghost", i)});
  server.admin({"HSET", "{ghosts}:meta", "next", "0"});  // something is due: the next call sweeps
  ASSERT_EQ(held->release().first, lease::release_status::released);
  EXPECT_EQ(server.admin({"ZCARD", "{ghosts}:expiry"}), "0");
  EXPECT_NE(server.admin({"HGET", "{ghosts}:meta", "next"}), "0");
  EXPECT_TRUE(s.try_acquire());
}

// A head whose request does not fit yet keeps its place, and nobody overtakes it; a head that left holds nobody back,
// whatever it asked for.
TEST(RedisSemaphoreQueue, AHeadThatDoesNotFitKeepsItsPlaceUnlessItLeft) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "heads", 2);
  auto held = s.try_acquire();  // one of two permits
  ASSERT_TRUE(held);
  other_process other(server, "heads");
  ASSERT_EQ(other.join("big", "-1", "60000000", "2"), "1");    // 2 > 1 free: queued
  ASSERT_EQ(other.join("small", "-1", "60000000", "1"), "1");  // 1 would fit, but big is first
  ASSERT_EQ(other.join("last", "-1", "60000000", "1"), "1");
  auto snap = s.inspect().first;
  ASSERT_EQ(snap.queue.size(), 3U);
  EXPECT_EQ(snap.queue[0].id, "big");
  EXPECT_EQ(snap.queue[0].count, 2);
  EXPECT_EQ(snap.queue[1].id, "small");
  EXPECT_EQ(snap.holders.size(), 1U);
  ASSERT_EQ(other.cancel("big"), "6");  // the head leaves: small fits in the free permit at once
  snap = s.inspect().first;
  ASSERT_EQ(snap.holders.size(), 2U);
  EXPECT_TRUE(snap.holders[0].id == "small" || snap.holders[1].id == "small");
  ASSERT_EQ(snap.queue.size(), 1U);
  EXPECT_EQ(snap.queue[0].id, "last");
  EXPECT_EQ(snap.waiter_count, 1);
}

// A waiter that left while at the head, behind no free permit, is still first in the list when a capacity cut makes
// its request too large: it is dropped without a wake-up (nobody waits for one), and the waiter behind it keeps its
// place until it fits.
TEST(RedisSemaphoreQueue, ADepartedHeadLargerThanTheCapacityGetsNoWakeUp) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "departed", 3);
  auto held = s.try_acquire(3);  // nothing free: a cancel serves nobody, the cancelled record stays first
  ASSERT_TRUE(held);
  other_process other(server, "departed");
  ASSERT_EQ(other.join("big", "-1", "60000000", "3"), "1");
  ASSERT_EQ(other.join("small"), "1");
  ASSERT_EQ(other.cancel("big"), "6");
  ASSERT_EQ(other.queue_length(), 2);
  ASSERT_FALSE(s.set_capacity(2));  // 3 > 2: a live "big" would be told so on its wake list
  EXPECT_EQ(server.admin({"EXISTS", "{departed}:wake:other"}), "0");
  auto snap = s.inspect().first;
  ASSERT_EQ(snap.queue.size(), 1U);
  EXPECT_EQ(snap.queue[0].id, "small");
  ASSERT_EQ(held->release().first, lease::release_status::released);
  snap = s.inspect().first;
  ASSERT_EQ(snap.holders.size(), 1U);
  EXPECT_EQ(snap.holders[0].id, "small");
  EXPECT_EQ(snap.waiter_count, 0);
}

// A grant given back by a cancel (its waiter gave up before it learned of it: a deadline or a stop that raced the
// grant) returns its tokens too: a request that failed takes nothing. An admission of capacity 4, one token a second,
// a burst of 2: a's grant empties the bucket, and only the cancel's refund lets b have 2 tokens at once.
TEST(RedisSemaphoreQueue, AGrantGivenBackByACancelReturnsItsTokens) {
  redis_server server;
  const other_process p(server, "refund");
  const std::string def = "4/1000000/2";
  const std::string wake = p.wake();
  const auto status = [&](const std::vector<std::string>& argv) { return p.status(argv); };
  EXPECT_EQ(status({"acquire", def, "a", "2", "60000000", "0", "-1", "60000000", wake}), "0");  // granted
  EXPECT_EQ(status({"acquire", def, "b", "1", "60000000", "0", "-1", "60000000", wake}), "2");  // no token left
  EXPECT_EQ(status({"cancel", def, "a", wake}), "6");                                           // left, given back
  EXPECT_EQ(status({"acquire", def, "b", "2", "60000000", "0", "-1", "60000000", wake}), "0");  // both tokens back
}

// With classes, the grant's charge to its class's assured bucket goes back too: class 0 is assured one token an hour
// (burst 1), so its bucket's state after a grant is the grant's time, and after the refund an hour before it.
TEST(RedisSemaphoreQueue, AGrantGivenBackByACancelReturnsItsClassesAssuredToken) {
  redis_server server;
  const other_process p(server, "assured");
  const std::string def = "4/1000000/100/2:3600000000:1,2:0:0";
  const std::string wake = p.wake();
  const auto status = [&](const std::vector<std::string>& argv) { return p.status(argv); };
  auto server_us = [&] {
    const std::string t = server.admin({"TIME"});  // "<s>\n<µs>"
    return std::stoll(t.substr(0, t.find('\n'))) * 1'000'000 + std::stoll(t.substr(t.find('\n') + 1));
  };
  const long long before = server_us();
  EXPECT_EQ(status({"acquire", def, "a", "1", "60000000", "0", "-1", "60000000", wake, "-1", "0"}), "0");
  const long long charged = std::stoll(server.admin({"HGET", "{assured}:meta", "atat:1"}));
  ASSERT_GE(charged, before) << "the grant did not charge class 0's assured bucket";
  EXPECT_EQ(status({"cancel", def, "a", wake}), "6");  // left, given back
  const long long after = std::stoll(server.admin({"HGET", "{assured}:meta", "atat:1"}));
  EXPECT_EQ(after, charged - 3'600'000'000LL) << "the class's assured token was not given back";
  EXPECT_EQ(server.admin({"HEXISTS", "{assured}:waiters", "c:a"}), "0");  // the mark goes with the lease

  // A lease released (not cancelled) keeps the charge, and its mark goes too.
  EXPECT_EQ(status({"acquire", def, "b", "1", "60000000", "0", "-1", "60000000", wake, "-1", "0"}), "0");
  EXPECT_EQ(server.admin({"HEXISTS", "{assured}:waiters", "c:b"}), "1");
  const long long held = std::stoll(server.admin({"HGET", "{assured}:meta", "atat:1"}));
  EXPECT_EQ(status({"release", def, "b", wake}), "0");
  EXPECT_EQ(std::stoll(server.admin({"HGET", "{assured}:meta", "atat:1"})), held);
  EXPECT_EQ(server.admin({"HEXISTS", "{assured}:waiters", "c:b"}), "0");
}

// Redis keeps a small hash or sorted set in a packed array that every access scans: meta is made a hash table when a
// call creates it, and the expiry set (and meta, when an older admit left it packed) a skip list and a hash table at
// every 32nd waiter that joins (unpack_key in core.lua). The long name that converts them never stays in a key.
TEST(RedisSemaphoreQueue, MetaAndTheExpirySetLeaveRedisPackedEncodings) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "packed", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  const auto encoding = [&](const char* key) {
    return server.admin({"OBJECT", "ENCODING", std::string("{packed}:") + key});
  };
  EXPECT_EQ(encoding("meta"), "hashtable");
  // As an older admit leaves it: the same fields, packed.
  const std::string fields = server.admin({"HGETALL", "{packed}:meta"});
  std::vector<std::string> hset{"HSET", "{packed}:meta"};
  for (std::size_t at = 0, end; at < fields.size(); at = end + 1) {
    end = fields.find('\n', at);
    if (end == std::string::npos) end = fields.size();
    hset.push_back(fields.substr(at, end - at));
  }
  ASSERT_EQ(hset.size() % 2, 0U) << fields;
  server.admin({"DEL", "{packed}:meta"});
  server.admin(hset);
  ASSERT_EQ(encoding("meta"), "listpack");

  other_process other(server, "packed");
  for (int i = 1; i < 32; ++i) ASSERT_EQ(other.join(numbered("w", i)), "1");
  EXPECT_EQ(encoding("expiry"), "listpack");  // the 31st waiter: not yet
  EXPECT_EQ(encoding("meta"), "listpack");
  ASSERT_EQ(other.join("w32"), "1");
  EXPECT_EQ(encoding("expiry"), "skiplist");
  EXPECT_EQ(encoding("meta"), "hashtable");

  EXPECT_EQ(server.admin({"ZCARD", "{packed}:expiry"}), "32");
  EXPECT_EQ(server.admin({"HGETALL", "{packed}:meta"}).find("admit:-"), std::string::npos);
  const auto snap = s.inspect().first;
  EXPECT_EQ(snap.waiter_count, 32);
  ASSERT_EQ(snap.queue.size(), 32U);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(snap.queue[static_cast<std::size_t>(i)].id, numbered("w", i + 1));
  ASSERT_EQ(held->release().first, lease::release_status::released);  // the head, w1, is granted as before
  EXPECT_EQ(s.inspect().first.holders.at(0).id, "w1");
}

}  // namespace

// A meta field that is not a number (a key damaged by hand, or by another program) fails the calls that read it,
// with the script's error. Before, a capacity that could not be read counted as no semaphore at all: the next
// acquire made it anew, all its permits free, while the leases held in it went on — a second holder of one permit.
TEST(RedisSemaphoreQueue, AMetaFieldThatIsNotANumberFailsTheCallInsteadOfMakingTheSemaphoreAnew) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "damaged", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  server.admin({"HSET", "{damaged}:meta", "capacity", "one"});
  const auto second = s.try_acquire();
  ASSERT_FALSE(second) << "granted a second lease of a one-permit semaphore";
  EXPECT_EQ(second.error(), admit::make_error_code(admit::errc::unexpected_reply)) << second.error().message();
  EXPECT_EQ(server.admin({"ZCARD", "{damaged}:holders"}), "1");
  EXPECT_EQ(server.admin({"HGET", "{damaged}:meta", "capacity"}), "one");  // left as it was found
}

// n and the lease's TTL go into the lease's and the queue's records as they were sent, and those records are read back
// as decimal digits: another spelling of the number ("1.0", " 1") is refused before anything is written, where it
// would have made a record that cannot be read back (its permits lost for good).
TEST(RedisSemaphoreQueue, ANumberNotInDecimalDigitsIsRefusedBeforeAnythingIsWritten) {
  redis_server server;
  other_process other(server, "digits");
  for (const std::string n : {"1.0", " 1", "1e0", "0x1", ""}) {
    EXPECT_NE(other.status({"acquire", "1", "w", n, "60000000", "1", "-1", "60000000", other.wake()}).find("digits"),
              std::string::npos)
        << '"' << n << '"';
  }
  EXPECT_NE(other.status({"acquire", "1", "w", "1", "6e7", "1", "-1", "60000000", other.wake()}).find("digits"),
            std::string::npos);
  EXPECT_EQ(server.admin({"EXISTS", "{digits}:holders", "{digits}:leases", "{digits}:waiting"}), "0");
  EXPECT_EQ(other.status({"acquire", "1", "w", "1", "60000000", "1", "-1", "60000000", other.wake()}), "0");
  EXPECT_EQ(server.admin({"HGET", "{digits}:leases", "w"}).substr(0, 2), "1:");
}

// A call that gives the semaphore's meta key alone finds the other keys by their names; any other single key is
// refused, and nothing is made.
TEST(RedisSemaphoreQueue, OneKeyMustBeTheMetaKey) {
  redis_server server;
  const std::string source = semaphore_source();
  const auto one_key = [&](const std::string& key, const std::string& id) {
    return server.admin({"EVAL", source, "1", key, "acquire", "2", id, "1", "60000000", "0", "-1", "60000000", "-"});
  };
  EXPECT_EQ(one_key("{single}:meta", "a").substr(0, 2), "0\n");
  EXPECT_NE(server.admin({"ZSCORE", "{single}:holders", "a"}), "(nil)");
  EXPECT_EQ(server.admin({"HGET", "{single}:leases", "a"}).substr(0, 2), "1:");
  EXPECT_NE(one_key("{single}:holders", "b").find("not a meta key"), std::string::npos);
  EXPECT_EQ(server.admin({"EXISTS", "{single}:holders:meta", "{single}:hold"}), "0");
  EXPECT_EQ(server.admin({"ZCARD", "{single}:holders"}), "1");
}
