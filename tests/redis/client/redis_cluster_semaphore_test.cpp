// admit::redis::semaphore on a real 3-master Redis Cluster whose slot moves to another master while four threads
// acquire and release (capacity 2): the keys migrated by MIGRATE while the source answers ASK and the target TRYAGAIN
// (a call whose keys it does not all hold: the semaphore is unavailable until the migration ends), then the slot
// given to the target (MOVED). Throughout: never more than the capacity held, every fencing token given once and in
// increasing order per caller; afterwards the callers go on on the target, and every permit comes back (released,
// or expired with its lease) — nothing is lost. And an admission with a rate, whose waiters' records are a key of
// their own, is refused whole while that key alone has moved, never failed halfway through.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/admission.hpp"
#include "admit/redis/client/cluster.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::cluster;
using admit::redis::hash_slot;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_cluster;

constexpr std::int64_t capacity = 2;

// Threads that acquire, hold briefly (the work) and release until stopped, checking that no more than the capacity
// is held at once and recording each grant's fencing token.
class cyclers {
 public:
  cyclers(admit::redis::semaphore& s, int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this, &s](std::stop_token stop) { run(s, stop); });
  }
  ~cyclers() { stop(); }
  void stop() {
    for (auto& t : threads_) t.request_stop();
    threads_.clear();
  }
  std::int64_t cycles() const { return cycles_.load(); }
  std::int64_t most_held() const { return most_held_.load(); }
  std::int64_t failed_releases() const { return failed_releases_.load(); }
  // Every token granted, by caller, in the order each caller got them.
  std::vector<std::vector<std::int64_t>> tokens() const {
    const std::lock_guard lock(mutex_);
    return tokens_;
  }

 private:
  void run(admit::redis::semaphore& s, std::stop_token stop) {
    std::size_t me = 0;
    {
      const std::lock_guard lock(mutex_);
      me = tokens_.size();
      tokens_.emplace_back();
    }
    while (!stop.stop_requested()) {
      auto r = s.try_acquire_for(2s, 1, stop);
      if (!r) continue;  // a call that failed while the slot moved (fail-closed): asked again
      const std::int64_t now = ++held_;
      for (std::int64_t seen = most_held_.load(); now > seen && !most_held_.compare_exchange_weak(seen, now);) {
      }
      {
        const std::lock_guard lock(mutex_);
        tokens_[me].push_back(r->fencing_token());
      }
      std::this_thread::sleep_for(1ms);  // the work done with the permit
      --held_;                           // before the release: the next holder may be granted by it
      if (r->release().second) ++failed_releases_;
      ++cycles_;
    }
  }

  std::atomic<std::int64_t> held_{0}, most_held_{0}, cycles_{0}, failed_releases_{0};
  mutable std::mutex mutex_;
  std::vector<std::vector<std::int64_t>> tokens_;
  std::vector<std::jthread> threads_;
};

TEST(RedisClusterSemaphore, ItsSlotMovedMidRunNeverOverAdmitsAndLosesNothing) {
  redis_cluster rc;
  io_thread io(2);
  cluster c(io.executor(), rc.url(0));
  admit::redis::semaphore_options o;
  o.lease_ttl = 2s;  // a lease whose release failed while the slot moved comes back within this
  admit::redis::semaphore s(c, "migsem", capacity, o);
  const std::string slot = std::to_string(hash_slot("{migsem}"));
  const std::size_t source = rc.owner_of("{migsem}:meta");
  const std::size_t target = (source + 1) % redis_cluster::size;
  const std::size_t third = (source + 2) % redis_cluster::size;
  const std::string source_id = rc.id(source), target_id = rc.id(target);

  cyclers callers(s, 4);
  ASSERT_TRUE(eventually([&] { return callers.cycles() >= 50; }, 30s));
  const auto before = c.statistics();

  ASSERT_EQ(rc.admin(target, {"CLUSTER", "SETSLOT", slot, "IMPORTING", source_id}), "OK");
  ASSERT_EQ(rc.admin(source, {"CLUSTER", "SETSLOT", slot, "MIGRATING", target_id}), "OK");
  ASSERT_EQ(rc.migrate_keys(slot, source, target), "OK");
  // The source still owns the slot: a call finds its keys gone (ASK), and the target refuses one whose keys it does
  // not all hold (TRYAGAIN: some of the semaphore's keys exist only while requests wait), until the slot is the
  // target's. Calls fail meanwhile (the failure policy: fail-closed), releases too: their leases expire.
  ASSERT_TRUE(eventually(
      [&] {
        const auto now = c.statistics();
        return now.ask >= before.ask + 20 && now.tryagain >= before.tryagain + 20;
      },
      30s));
  ASSERT_EQ(rc.migrate_keys(slot, source, target), "OK");  // keys a call made on the source meanwhile
  for (const std::size_t node : {target, source, third}) {
    ASSERT_EQ(rc.admin(node, {"CLUSTER", "SETSLOT", slot, "NODE", target_id}), "OK") << "node " << node;
  }
  const auto moved_at = callers.cycles();
  // The callers go on, on the target: MOVED followed, the slot map refreshed.
  ASSERT_TRUE(eventually([&] { return callers.cycles() >= moved_at + 100; }, 30s));
  callers.stop();

  EXPECT_LE(callers.most_held(), capacity);
  std::set<std::int64_t> all;
  for (const auto& mine : callers.tokens()) {
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end())) << "a caller's tokens went back";
    for (const std::int64_t t : mine) EXPECT_TRUE(all.insert(t).second) << "token " << t << " granted twice";
  }
  const auto after = c.statistics();
  EXPECT_GT(after.moved, before.moved);
  EXPECT_GT(after.ask, before.ask);
  EXPECT_EQ(rc.owner_of("{migsem}:meta"), target);
  EXPECT_EQ(rc.admin(source, {"CLUSTER", "COUNTKEYSINSLOT", slot}), "0");
  // Every permit comes back: released, or (a release that failed while the slot moved) expired with its lease.
  EXPECT_TRUE(eventually(
      [&] {
        const auto [snap, ec] = s.inspect();
        return !ec && snap.available == capacity && snap.holder_count == 0;
      },
      10s))
      << callers.failed_releases() << " release(s) failed";
}

// A rate without classes keeps each waiter's record in {name}:waiters, which the admission's calls declare on a
// Cluster: while its slot migrates and that key alone has moved, the source refuses a call that needs it (TRYAGAIN)
// before the call runs. Undeclared, the call ran on the source, queued the request and then failed at the moved key
// ("Script attempted to access a non local key"), its first writes made: the acquire failed.
TEST(RedisClusterAdmission, ARatesWaitersRecordsAreDeclaredSoAMovedOneRefusesTheCallWhole) {
  redis_cluster rc;
  io_thread io(2);
  cluster c(io.executor(), rc.url(0));
  admit::redis::admission a(c, "migrate", {.rate = admit::rate::per_second(1000), .burst = 1000, .max_in_flight = 1});
  const std::string slot = std::to_string(hash_slot("{migrate}"));
  const std::size_t source = rc.owner_of("{migrate}:meta");
  const std::size_t target = (source + 1) % redis_cluster::size;
  const std::size_t third = (source + 2) % redis_cluster::size;
  const std::string source_id = rc.id(source), target_id = rc.id(target);

  auto held = a.try_acquire(0);
  ASSERT_TRUE(held) << held.error().message();
  auto first = std::async(std::launch::async, [&] { return a.try_acquire_for(60s, 0); });
  ASSERT_TRUE(eventually([&] { return rc.admin(source, {"EXISTS", "{migrate}:waiters"}) == "1"; }, 10s));
  const auto before = c.statistics();

  ASSERT_EQ(rc.admin(target, {"CLUSTER", "SETSLOT", slot, "IMPORTING", source_id}), "OK");
  ASSERT_EQ(rc.admin(source, {"CLUSTER", "SETSLOT", slot, "MIGRATING", target_id}), "OK");
  ASSERT_EQ(rc.admin(source, {"MIGRATE", "127.0.0.1", std::to_string(rc.port(target)), "", "0", "5000", "KEYS",
                              "{migrate}:waiters"}),
            "OK");
  auto second = std::async(std::launch::async, [&] { return a.try_acquire_for(60s, 0); });
  ASSERT_TRUE(eventually([&] { return c.statistics().tryagain >= before.tryagain + 3; }, 10s));
  if (second.wait_for(0s) == std::future_status::ready) {  // refused whole, and asked again: it waits on
    const auto r = second.get();
    FAIL() << "the request ended while the slot moved: " << (r ? "granted" : r.error().message());
  }
  ASSERT_EQ(rc.migrate_keys(slot, source, target), "OK");
  for (const std::size_t node : {target, source, third}) {
    ASSERT_EQ(rc.admin(node, {"CLUSTER", "SETSLOT", slot, "NODE", target_id}), "OK") << "node " << node;
  }

  ASSERT_EQ(held->release().first, admit::redis::lease::release_status::released);
  auto one = first.get();
  ASSERT_TRUE(one) << one.error().message();
  ASSERT_EQ(one->release().first, admit::redis::lease::release_status::released);
  auto two = second.get();
  ASSERT_TRUE(two) << two.error().message();
  EXPECT_GT(two->fencing_token(), one->fencing_token());
  EXPECT_EQ(rc.owner_of("{migrate}:meta"), target);
}

}  // namespace
