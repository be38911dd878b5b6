// admit::redis::cluster against a real 3-master Redis Cluster: hash slots as Redis computes them, each key routed to
// the master of its slot, broadcasts, distributed limiters over the cluster (exact admitted counts), SCRIPT FLUSH on
// every master mid-run, and a slot migrated between masters mid-run while limiters decide (MOVED and ASK followed,
// no decision lost or counted twice); the distributed semaphore on the cluster (one slot, wake-ups through the slot's
// master).
#include "admit/redis/client/cluster.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_cluster.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::cluster;
using admit::redis::command;
using admit::redis::hash_slot;
using admit::redis::limiter_result;
using admit::redis::reply;
using admit::redis::testing::eventually;
using admit::redis::testing::expect_the_release_wakes_the_waiter;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_cluster;
namespace asio = boost::asio;
namespace detail = admit::redis::detail;

// One token an hour: nothing refills during a test, so exactly min(attempts, burst) admissions per key are correct.
const admit::rate hourly = admit::rate::per(1, std::chrono::hours(1));

// Coroutines that decide continuously, each on its own keys in turn, until stopped; per-key tallies and every
// failure are recorded.
class deciders {
 public:
  deciders(const admit::redis::limiter& limiter, asio::any_io_executor ex, int coroutines, int keys_each)
      : limiter_(limiter), tallies_(static_cast<std::size_t>(coroutines * keys_each)) {
    running_ = coroutines;
    for (int c = 0; c < coroutines; ++c) {
      asio::co_spawn(ex, run(c * keys_each, keys_each), asio::detached);
    }
  }
  ~deciders() { stop(); }

  static std::string key(std::size_t i) { return "k" + std::to_string(i); }

  void stop() {
    stop_ = true;
    if (!eventually([&] { return running_.load() == 0; }, 60s)) throw std::runtime_error("deciders did not stop");
  }
  std::int64_t decisions() const { return decisions_.load(); }
  // Every key decided at least `n` times.
  bool each_key_decided(int n) const {
    std::lock_guard lock(mutex_);
    for (const auto& t : tallies_) {
      if (t.attempts < n) return false;
    }
    return true;
  }

  struct tally {
    int attempts = 0;
    int admitted = 0;
  };
  // After stop().
  const std::vector<tally>& tallies() const { return tallies_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  asio::awaitable<void> run(int first, int count) {
    while (!stop_) {
      for (int i = first; i < first + count; ++i) {
        const limiter_result r =
            co_await limiter_.async_decide_detailed(key(static_cast<std::size_t>(i)), 1, asio::use_awaitable);
        std::lock_guard lock(mutex_);
        auto& t = tallies_[static_cast<std::size_t>(i)];
        ++t.attempts;
        if (!r.consulted) {
          failures_.push_back(key(static_cast<std::size_t>(i)) + ": " + r.error.message() + " " + r.message);
        } else if (r.decision.admitted) {
          ++t.admitted;
        }
        ++decisions_;
      }
    }
    --running_;
  }

  const admit::redis::limiter& limiter_;
  mutable std::mutex mutex_;
  std::vector<tally> tallies_;
  std::vector<std::string> failures_;
  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::atomic<std::int64_t> decisions_{0};
};

void expect_exact(const deciders& d, int burst) {
  EXPECT_TRUE(d.failures().empty()) << d.failures().size() << " failures, first: " << d.failures().front();
  for (std::size_t i = 0; i < d.tallies().size(); ++i) {
    const auto& t = d.tallies()[i];
    EXPECT_EQ(t.admitted, std::min(t.attempts, burst)) << "key " << i << " attempts " << t.attempts;
  }
}

// ---- without a server ----

TEST(RedisClusterSlots, HashSlotIsCrc16OfTheHashTag) {
  EXPECT_EQ(hash_slot("123456789"), 12739);  // the CRC16/XMODEM check value 0x31C3
  EXPECT_EQ(hash_slot(""), 0);
  EXPECT_EQ(hash_slot("{user1000}.following"), hash_slot("user1000"));
  EXPECT_EQ(hash_slot("{user1000}.followers"), hash_slot("user1000"));
  EXPECT_EQ(hash_slot("foo{}{bar}"), hash_slot("foo{}{bar}"));  // an empty tag: the whole key
  EXPECT_NE(hash_slot("foo{}{bar}"), hash_slot("bar"));
  EXPECT_EQ(hash_slot("foo{{bar}}zap"), hash_slot("{bar"));  // from the first '{' to the first '}' after it
  EXPECT_EQ(hash_slot("foo{bar}{zap}"), hash_slot("bar"));   // only the first tag counts
  EXPECT_EQ(hash_slot("{api}:user:42"), hash_slot("{api}"));
}

TEST(RedisClusterSlots, RouteTakesTheKeyArgumentOfEachCommand) {
  using detail::route_kind;
  const auto r = [](command c) { return detail::route_of(c); };
  EXPECT_EQ(r({"GET", "k"}).key, "k");
  EXPECT_EQ(r({"get", "k"}).kind, route_kind::keyed);
  EXPECT_EQ(r({"EVALSHA", "sha", "2", "{a}", "{a}:b", "x"}).key, "{a}");
  EXPECT_EQ(r({"evalsha", "sha", "0", "x"}).kind, route_kind::any_master);
  EXPECT_EQ(r({"FCALL", "f", "1", "k"}).key, "k");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "k"}).key, "k");
  EXPECT_EQ(r({"BLMPOP", "1.5", "1", "k", "RIGHT", "COUNT", "8"}).key, "k");
  EXPECT_EQ(r({"LMPOP", "1", "k", "LEFT"}).key, "k");
  EXPECT_EQ(r({"PING"}).kind, route_kind::any_master);
  EXPECT_EQ(r({"TIME"}).kind, route_kind::any_master);
  EXPECT_EQ(r({"INFO", "server"}).kind, route_kind::any_master);
  EXPECT_EQ(r({"CLUSTER", "SLOTS"}).kind, route_kind::any_master);
  EXPECT_EQ(r({"SCRIPT", "LOAD", "return 1"}).kind, route_kind::every_master);
  EXPECT_EQ(r({"script", "flush"}).kind, route_kind::every_master);
  EXPECT_EQ(r({"SCRIPT", "EXISTS", "sha"}).kind, route_kind::any_master);
  EXPECT_EQ(r({"FLUSHALL"}).kind, route_kind::every_master);
}

TEST(RedisClusterSlots, InvalidConfigurationThrows) {
  io_thread io;
  EXPECT_THROW(cluster(io.executor(), std::vector<admit::redis::connection_options>{}), std::invalid_argument);
  EXPECT_THROW(cluster(io.executor(), "unix:///tmp/redis.sock"), std::invalid_argument);
  EXPECT_THROW(cluster(io.executor(), "redis://127.0.0.1:7000/2"), std::invalid_argument);
  admit::redis::cluster_options o;
  o.tryagain_delay = 0ns;
  EXPECT_THROW(cluster(io.executor(), "redis://127.0.0.1:7000", o), std::invalid_argument);
  o = {};
  o.refresh_interval = -1ns;
  EXPECT_THROW(cluster(io.executor(), "redis://127.0.0.1:7000", o), std::invalid_argument);
}

// ---- against a real cluster ----

TEST(RedisCluster, RoutesEachKeyToTheMasterOfItsSlot) {
  redis_cluster rc;
  // Redis computes the same slots.
  for (int i = 0; i < 100; ++i) {
    const std::string key = i % 3 == 0 ? "{tag" + std::to_string(i) + "}:x" : "key:" + std::to_string(i * 7919);
    ASSERT_EQ(rc.admin(0, {"CLUSTER", "KEYSLOT", key}), std::to_string(hash_slot(key))) << key;
  }
  io_thread io(2);
  cluster c(io.executor(), rc.url(1));
  // Before the map is known a call goes to the seed and follows MOVED if needed.
  ASSERT_TRUE(c.execute("SET", "first", "1").ok());
  ASSERT_TRUE(eventually([&] { return c.statistics().refreshes >= 1; }));
  const auto before = c.statistics();
  constexpr int keys = 90;
  for (int i = 0; i < keys; ++i) {
    const auto r = c.execute("SET", "key:" + std::to_string(i), i);
    ASSERT_TRUE(r.ok()) << r.error.message() << " " << r.value;
  }
  EXPECT_EQ(c.statistics().moved, before.moved);  // every key went straight to its master
  std::vector<int> per_node(redis_cluster::size);
  for (int i = 0; i < keys; ++i) {
    const std::string key = "key:" + std::to_string(i);
    const std::size_t owner = rc.owner_of(key);
    ASSERT_LT(owner, redis_cluster::size);
    EXPECT_EQ(rc.admin(owner, {"GET", key}), std::to_string(i));
    ++per_node[owner];
  }
  for (const int n : per_node) EXPECT_GT(n, 0);  // all three masters were used
  EXPECT_EQ(c.statistics().nodes, 3u);

  // Keyless commands go to any master; asynchronous calls complete through their handlers.
  EXPECT_EQ(c.execute("PING").value, reply::status("PONG"));
  std::vector<std::future<reply>> incrs;
  for (int i = 0; i < 50; ++i)
    incrs.push_back(c.async_execute_command(std::nullopt, {"INCR", "{n}"}, asio::use_future));
  std::set<std::int64_t> seen;
  for (auto& f : incrs) seen.insert(f.get().integer());
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_EQ(*seen.rbegin(), 50);

  // A deadline already passed sends nothing.
  const auto late = c.execute_command(std::chrono::steady_clock::now() - 1ms, {"INCR", "{n}"});
  EXPECT_EQ(late.error, errc::timeout);
  EXPECT_EQ(rc.admin(rc.owner_of("{n}"), {"GET", "{n}"}), "50");

  // After close(), calls complete with errc::closed.
  c.close();
  EXPECT_EQ(c.execute("GET", "first").error, errc::closed);
}

// Options at the clock's end mean "never", not an overflow: with a refresh_interval of nanoseconds::max(), a refresh
// asked for after the first is put off to the clock's end (its time was last refresh + the interval: undefined
// behaviour, which the sanitizer build reports), and the calls go on.
TEST(RedisCluster, OptionsAtTheClocksEndSaturate) {
  redis_cluster rc;
  io_thread io;
  admit::redis::cluster_options o;
  o.refresh_interval = std::chrono::nanoseconds::max();
  o.tryagain_delay = std::chrono::nanoseconds::max();
  cluster c(io.executor(), rc.url(0), o);
  ASSERT_TRUE(c.execute("SET", "{edge}k", "1").ok());
  const auto refreshes = c.statistics().refreshes;
  c.refresh();
  c.refresh();
  const auto r = c.execute("GET", "{edge}k");
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.value.str(), "1");
  EXPECT_EQ(c.statistics().refreshes, refreshes) << "a refresh within refresh_interval of the last";
}

TEST(RedisCluster, GcraOnEveryMasterAdmitsExactlyTheBurst) {
  redis_cluster rc;
  io_thread io(2);
  cluster c(io.executor(), rc.url(0));
  // Three limiter names whose slots are on three different masters.
  std::vector<std::string> names(redis_cluster::size);
  for (int i = 0; std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); }); ++i) {
    const std::string name = "lim" + std::to_string(i);
    auto& slot = names[rc.owner_of("{" + name + "}")];
    if (slot.empty()) slot = name;
  }
  constexpr std::int64_t burst = 10;
  for (const auto& name : names) {
    admit::redis::gcra limiter(c, name, hourly, burst, patient());
    int admitted = 0;
    for (int i = 0; i < 15; ++i) {
      const auto r = limiter.decide("k");
      ASSERT_TRUE(r.consulted) << name << ": " << r.error.message() << " " << r.message;
      admitted += r.decision.admitted ? 1 : 0;
    }
    EXPECT_EQ(admitted, burst) << name;
    // A burst of concurrent asynchronous decisions on another key.
    std::vector<std::future<limiter_result>> futures;
    for (int i = 0; i < 30; ++i) futures.push_back(limiter.async_decide_detailed("a", 1, asio::use_future));
    admitted = 0;
    for (auto& f : futures) {
      const auto r = f.get();
      ASSERT_TRUE(r.consulted) << name << ": " << r.error.message() << " " << r.message;
      admitted += r.decision.admitted ? 1 : 0;
    }
    EXPECT_EQ(admitted, burst) << name;
  }
  for (std::size_t i = 0; i < redis_cluster::size; ++i) {
    EXPECT_GE(rc.calls(i, "function|load"), 1) << "node " << i;  // FUNCTION LOAD went to every master
    EXPECT_GE(rc.calls(i, "fcall"), 1) << "node " << i;
  }
}

TEST(RedisCluster, FunctionFlushOnEveryMasterMidRunIsTransparent) {
  redis_cluster rc;
  io_thread io(2);
  cluster c(io.executor(), rc.url(0));
  constexpr int burst = 5;
  admit::redis::gcra limiter(c, "flush", hourly, burst, patient());
  const std::size_t owner = rc.owner_of("{flush}");
  deciders d(limiter, io.executor(), 4, 5);
  ASSERT_TRUE(eventually([&] { return d.each_key_decided(2); }, 30s));
  const long long loads = rc.calls(owner, "function|load");
  // Through the cluster: a broadcast to every master.
  const auto flushed = c.execute("FUNCTION", "FLUSH");
  ASSERT_TRUE(flushed.ok()) << flushed.error.message() << " " << flushed.value;
  for (std::size_t i = 0; i < redis_cluster::size; ++i) EXPECT_EQ(rc.calls(i, "function|flush"), 1) << "node " << i;
  // The callers meet "Function not found", load the library again (on every master) and go on.
  ASSERT_TRUE(eventually([&] { return rc.calls(owner, "function|load") > loads; }, 30s));
  const auto after = d.decisions();
  ASSERT_TRUE(eventually([&] { return d.decisions() > after + 100 && d.each_key_decided(burst + 2); }, 30s));
  d.stop();
  expect_exact(d, burst);
}

TEST(RedisCluster, SemaphoreKeysLiveInOneSlotAndWakeUpsReachTheWaiter) {
  redis_cluster rc;
  io_thread io;
  cluster c(io.executor(), rc.url(1));
  // The wake-up: BLMPOP on the slot's master, through the cluster client.
  expect_the_release_wakes_the_waiter(c, "jobs");
  admit::redis::semaphore s(c, "jobs", 1);
  const auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  // Every key of the semaphore is on the master of {jobs}'s slot.
  const std::size_t owner = rc.owner_of("{jobs}:meta");
  for (const char* k : {"{jobs}:meta", "{jobs}:holders", "{jobs}:leases"}) {
    EXPECT_EQ(rc.admin(owner, {"EXISTS", k}), "1") << k;
  }
  // The script is a function library, loaded on every master (so also on one that a failover or a slot move makes
  // the slot's owner); flushed from the owner, it is loaded again by the next call.
  for (std::size_t i = 0; i < redis_cluster::size; ++i) {
    EXPECT_NE(rc.admin(i, {"FUNCTION", "LIST"}).find("admit_semaphore_"), std::string::npos) << "master " << i;
  }
  rc.admin(owner, {"FUNCTION", "FLUSH"});
  auto more = s.try_acquire();
  EXPECT_EQ(more.error(), admit::errc::would_block) << "the function was not loaded again";
}

TEST(RedisCluster, SlotMigratedMidRunFollowsAskThenMoved) {
  redis_cluster rc;
  io_thread io(2);
  cluster c(io.executor(), rc.url(0));
  constexpr int burst = 5;
  admit::redis::limiter_options o = patient();
  o.detect_lost_state = true;  // the epoch key "{mig}" migrates with the slot too
  admit::redis::gcra limiter(c, "mig", hourly, burst, o);
  const std::string slot = std::to_string(hash_slot("{mig}"));
  const std::size_t source = rc.owner_of("{mig}");
  const std::size_t target = (source + 1) % redis_cluster::size;
  const std::size_t third = (source + 2) % redis_cluster::size;
  const std::string source_id = rc.id(source), target_id = rc.id(target);

  deciders d(limiter, io.executor(), 6, 5);
  // Every key admitted at least once, so that all of the limiter's keys exist (a script over several keys of a
  // migrating slot where only some exist would get TRYAGAIN until the migration ends).
  ASSERT_TRUE(eventually([&] { return d.each_key_decided(burst + 1); }, 30s));
  const auto before = c.statistics();

  ASSERT_EQ(rc.admin(target, {"CLUSTER", "SETSLOT", slot, "IMPORTING", source_id}), "OK");
  ASSERT_EQ(rc.admin(source, {"CLUSTER", "SETSLOT", slot, "MIGRATING", target_id}), "OK");
  ASSERT_EQ(rc.migrate_keys(slot, source, target), "OK");
  // The keys are on the target; the source still owns the slot and answers ASK.
  ASSERT_TRUE(eventually([&] { return c.statistics().ask >= before.ask + 20; }, 30s));
  const auto during = d.decisions();
  ASSERT_TRUE(eventually([&] { return d.decisions() > during + 50; }, 30s));

  for (const std::size_t node : {target, source, third}) {
    ASSERT_EQ(rc.admin(node, {"CLUSTER", "SETSLOT", slot, "NODE", target_id}), "OK") << "node " << node;
  }
  // Now the source answers MOVED; the client updates the slot at once and refreshes its whole map (at most one
  // refresh per refresh_interval: this may come a little later).
  ASSERT_TRUE(eventually([&] { return c.statistics().moved > before.moved; }, 30s));
  ASSERT_TRUE(eventually([&] { return c.statistics().refreshes > before.refreshes; }, 30s));
  const auto after = d.decisions();
  ASSERT_TRUE(eventually([&] { return d.decisions() > after + 100; }, 30s));
  d.stop();
  // With the new map, a call goes straight to the target.
  const auto moved = c.statistics().moved;
  const auto get = c.execute("GET", limiter.storage_key("k0"));
  ASSERT_TRUE(get.ok()) << get.error.message() << " " << get.value;
  EXPECT_TRUE(get.value.is_string());
  EXPECT_EQ(c.statistics().moved, moved);

  expect_exact(d, burst);
  EXPECT_EQ(rc.owner_of("{mig}"), target);
  EXPECT_EQ(rc.admin(source, {"CLUSTER", "COUNTKEYSINSLOT", slot}), "0");
  EXPECT_EQ(rc.admin(target, {"CLUSTER", "COUNTKEYSINSLOT", slot}), std::to_string(30 + 1));  // 30 keys + the epoch
  const auto stats = c.statistics();
  EXPECT_GT(stats.ask, before.ask);
  EXPECT_GT(stats.moved, before.moved);
  EXPECT_EQ(stats.refresh_failures, 0u);
}

}  // namespace
