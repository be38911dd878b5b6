// admit::redis::admission's priority classes against a real redis-server: a class entitled to its guaranteed permits
// goes before an earlier borrower, a class borrows what the others do not use, and — the differential test — the same
// sequence of requests and releases, decided by the local admit::admission and by admit::redis::admission, grants the
// same requests at every step (without a rate, where time plays no part). Classes in the definition, their number kept
// by set_limits, and inspect's view of each class.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/admission.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::admission_options;
using admit::redis::connection;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::waiter_count;

TEST(RedisAdmissionClasses, AClassWithinItsGuaranteeGoesBeforeAnEarlierBorrower) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::admission a(conn, "shares", {.max_in_flight = 4, .classes = {{"interactive", 0.5}, {"batch", 0.5}}});
  // Nobody waits: batch borrows all four permits.
  std::vector<admit::redis::lease> batch;
  for (int i = 0; i < 4; ++i) {
    auto l = a.try_acquire(1);
    ASSERT_TRUE(l) << l.error().message();
    batch.push_back(std::move(*l));
  }
  EXPECT_EQ(a.try_acquire(0).error(), admit::errc::would_block);
  auto batch_waiter = std::async(std::launch::async, [&] { return a.try_acquire_for(20s, 1); });
  ASSERT_TRUE(eventually([&] { return waiter_count(a) == 1; }));
  auto interactive_waiter = std::async(std::launch::async, [&] { return a.try_acquire_for(20s, 0); });
  ASSERT_TRUE(eventually([&] { return waiter_count(a) == 2; }));
  const auto [s, ec] = a.inspect();
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(s.classes.size(), 2U);
  EXPECT_EQ(s.classes[0].held, 0);
  EXPECT_EQ(s.classes[1].held, 4);
  EXPECT_EQ(s.classes[1].queued, 1);
  EXPECT_EQ(admit::redis::describe(s), "no rate, max_in_flight 4, 2 classes");
  // A release: the interactive class holds nothing of its 2 guaranteed permits, the batch class 4 of its 2. The
  // interactive waiter arrived later and still goes first.
  (void)batch.back().release();
  batch.pop_back();
  ASSERT_EQ(interactive_waiter.wait_for(10s), std::future_status::ready);
  auto i = interactive_waiter.get();
  ASSERT_TRUE(i) << i.error().message();
  EXPECT_EQ(batch_waiter.wait_for(0s), std::future_status::timeout);
  // The next release goes to the batch waiter: nobody else waits.
  (void)batch.back().release();
  auto b = batch_waiter.get();
  ASSERT_TRUE(b) << b.error().message();
}

// The head of a class's queue asks again when the earliest lease expires, so that leases nobody renews (a holder
// that died) reach it at their expiry, not at its next poll (30 s here): the first lease's expiry frees one permit of
// the two it asks for, and its poll then learns when the second expires.
TEST(RedisAdmissionClasses, TheHeadOfAClassAsksAgainWhenEachLeaseAheadExpires) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::semaphore_options shorter;
  shorter.lease_ttl = 300ms;
  shorter.auto_renew = false;
  admit::redis::semaphore_options longer = shorter;
  longer.lease_ttl = 1500ms;
  admit::redis::semaphore_options patient;
  patient.poll_interval = 30s;
  const admission_options limits{.max_in_flight = 2, .classes = {{"a", 0.5}, {"b", 0.5}}};
  admit::redis::admission first(conn, "watched", limits, shorter);
  admit::redis::admission second(conn, "watched", limits, longer);
  admit::redis::admission waiter(conn, "watched", limits, patient);
  auto one = first.try_acquire(0);
  ASSERT_TRUE(one) << one.error().message();
  auto two = second.try_acquire(0);
  ASSERT_TRUE(two) << two.error().message();
  const auto start = std::chrono::steady_clock::now();
  auto both = waiter.try_acquire_for(10s, 1, 2);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(both) << both.error().message();
  EXPECT_GE(waited, 1300ms);  // not before the second lease expired (on Redis's clock: some slack)
  EXPECT_LT(waited, 1500ms + 1s);
  EXPECT_EQ(both->count(), 2);
}

TEST(RedisAdmissionClasses, TheDefinitionHoldsTheClasses) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const admission_options two{.max_in_flight = 4, .classes = {{"interactive", 0.75}, {"batch", 0.25}}};
  admit::redis::admission a(conn, "classes", two);
  auto held = a.try_acquire(1);  // held to the end: the number of classes cannot change under it
  ASSERT_TRUE(held) << held.error().message();
  admit::redis::admission other_shares(conn, "classes",
                                       {.max_in_flight = 4, .classes = {{"interactive", 0.5}, {"batch", 0.5}}});
  EXPECT_EQ(other_shares.try_acquire(0).error(), admit::errc::definition_conflict);
  EXPECT_EQ(admit::redis::describe(other_shares.limits()),
            "no rate, max_in_flight 4, classes interactive 0.5, batch 0.5");
  // set_limits may change the shares, and the number of classes only while nobody holds or waits (below).
  admit::redis::admission three(conn, "classes",
                                {.max_in_flight = 4, .classes = {{"a", 0.25}, {"b", 0.25}, {"c", 0.25}}});
  EXPECT_EQ(three.set_limits(three.limits()), admit::errc::definition_conflict);
  EXPECT_THROW((void)three.set_limits({.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.5}}}),
               std::invalid_argument);  // this object's number of classes stays
  ASSERT_FALSE(other_shares.set_limits(other_shares.limits()));
  EXPECT_TRUE(other_shares.try_acquire(0));
  EXPECT_EQ(a.try_acquire(0).error(), admit::errc::definition_conflict);
  EXPECT_THROW((void)other_shares.try_acquire(2), std::invalid_argument);  // two classes: priorities 0 and 1
  EXPECT_THROW(admit::redis::admission(conn, "bad", {.max_in_flight = 4, .classes = {{"a", 0.75}, {"b", 0.5}}}),
               std::invalid_argument);
}

// The number of classes changes only while nobody holds a lease or waits: each lease and waiter keeps its class's
// number. Then the classes start anew, their held and queued counts at 0, and the old definition is refused.
TEST(RedisAdmissionClasses, TheNumberOfClassesChangesWhileNobodyHoldsOrWaits) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::admission two(conn, "reclass", {.max_in_flight = 2, .classes = {{"a", 0.5}, {"b", 0.5}}});
  std::vector<admit::redis::lease> held;
  for (int i = 0; i < 2; ++i) {
    auto l = two.try_acquire(1);
    ASSERT_TRUE(l) << l.error().message();
    held.push_back(std::move(*l));
  }
  auto waiter = std::async(std::launch::async, [&] { return two.try_acquire_for(20s, 0); });
  ASSERT_TRUE(eventually([&] { return waiter_count(two) == 1; }));
  admit::redis::admission three(conn, "reclass",
                                {.max_in_flight = 3, .classes = {{"x", 0.25}, {"y", 0.25}, {"z", 0.25}}});
  EXPECT_EQ(three.set_limits(three.limits()), admit::errc::definition_conflict);  // held and waited for
  const auto released = [](admit::redis::lease& l) {
    return l.release().first == admit::redis::lease::release_status::released;
  };
  for (auto& l : held) ASSERT_TRUE(released(l));
  auto granted = waiter.get();
  ASSERT_TRUE(granted) << granted.error().message();
  EXPECT_EQ(three.set_limits(three.limits()), admit::errc::definition_conflict);  // the waiter's lease, class 0
  ASSERT_TRUE(released(*granted));

  ASSERT_FALSE(three.set_limits(three.limits()));
  auto z = three.try_acquire(2);
  ASSERT_TRUE(z) << z.error().message();
  EXPECT_EQ(two.try_acquire(0).error(), admit::errc::definition_conflict);
  auto [s, ec] = three.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(admit::redis::describe(s), "no rate, max_in_flight 3, 3 classes");
  ASSERT_EQ(s.classes.size(), 3U);
  EXPECT_EQ(s.classes[0].held, 0);
  EXPECT_EQ(s.classes[2].held, 1);
  // Full, class y waits and is served by z's release: the new classes' queues work.
  auto x = three.try_acquire(0);
  auto x2 = three.try_acquire(0);
  ASSERT_TRUE(x && x2);
  auto y = std::async(std::launch::async, [&] { return three.try_acquire_for(20s, 1); });
  ASSERT_TRUE(eventually([&] { return waiter_count(three) == 1; }));
  ASSERT_TRUE(released(*z));
  auto y_lease = y.get();
  ASSERT_TRUE(y_lease) << y_lease.error().message();
  for (auto* l : {&*x, &*x2, &*y_lease}) ASSERT_TRUE(released(*l));

  // Back to one class, with a rate: no class field of the three is left in meta, and waiting works.
  admit::redis::admission one(conn, "reclass", {.rate = admit::rate::per_second(1000), .burst = 5, .max_in_flight = 1});
  ASSERT_FALSE(one.set_limits(one.limits()));
  EXPECT_EQ(server.admin({"HEXISTS", "{reclass}:meta", "held:3"}), "0");
  EXPECT_EQ(server.admin({"HEXISTS", "{reclass}:meta", "classes"}), "0");
  EXPECT_EQ(server.admin({"EXISTS", "{reclass}:waiting:2"}), "0");
  auto only = one.try_acquire(0);
  ASSERT_TRUE(only) << only.error().message();
  auto next = std::async(std::launch::async, [&] { return one.try_acquire_for(20s, 0); });
  ASSERT_TRUE(eventually([&] { return waiter_count(one) == 1; }));
  ASSERT_TRUE(released(*only));
  auto n = next.get();
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(three.try_acquire(0).error(), admit::errc::definition_conflict);
}

// One implementation's side of the differential test: requests by index, each waiting on a thread of its own, and
// the indexes granted so far.
template <class Acquire, class Release, class Waiting>
class side {
 public:
  side(Acquire acquire, Release release, Waiting waiting)
      : acquire_(std::move(acquire)), release_(std::move(release)), waiting_(std::move(waiting)) {}
  ~side() {
    stop_.request_stop();
    threads_.clear();
  }
  void request(std::size_t index, std::size_t priority, std::int64_t n) {
    ++issued_;
    threads_.emplace_back([this, index, priority, n] {
      auto held = acquire_(stop_.get_token(), priority, n);
      if (!held) return;
      const std::lock_guard lock(m_);
      granted_.insert(index);
      held_.emplace(index, std::move(*held));
    });
  }
  // Releases request `index`'s permits (granted, not yet released).
  void release(std::size_t index) {
    typename decltype(held_)::node_type node;
    {
      const std::lock_guard lock(m_);
      node = held_.extract(index);
      ++released_;
    }
    ASSERT_FALSE(node.empty()) << index;
    release_(node.mapped());
  }
  // Every request granted or waiting: what was decided is visible.
  bool settled() {
    std::size_t granted = 0;
    {
      const std::lock_guard lock(m_);
      granted = granted_.size();
    }
    return static_cast<std::int64_t>(granted) + waiting_() == static_cast<std::int64_t>(issued_);
  }
  std::set<std::size_t> granted() {
    const std::lock_guard lock(m_);
    return granted_;
  }
  std::set<std::size_t> holding() {
    const std::lock_guard lock(m_);
    std::set<std::size_t> out;
    for (const auto& [index, held] : held_) out.insert(index);
    return out;
  }

 private:
  Acquire acquire_;
  Release release_;
  Waiting waiting_;
  std::stop_source stop_;
  std::mutex m_;
  std::set<std::size_t> granted_;
  std::map<std::size_t, std::decay_t<decltype(std::declval<Acquire>()(std::stop_token(), 0, 1).value())>> held_;
  std::size_t issued_ = 0, released_ = 0;
  std::vector<std::jthread> threads_;
};

// The same random sequence of requests (class, n) and releases, decided by the local admission and by the Redis one:
// after every step, both have granted the same requests.
void expect_the_same_decisions(const admission_options& limits, const std::string& name, unsigned seed) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::admission local(limits);
  admit::redis::admission remote(conn, name, limits, {.poll_interval = 10s});
  side l([&](std::stop_token stop, std::size_t priority, std::int64_t n) { return local.acquire(stop, priority, n); },
         [](admit::permit& p) { p.release(); }, [&] { return static_cast<std::int64_t>(local.waiting()); });
  side r([&](std::stop_token stop, std::size_t priority, std::int64_t n) { return remote.acquire(stop, priority, n); },
         [](admit::redis::lease& lease) { (void)lease.release(); }, [&] { return waiter_count(remote); });

  std::mt19937 rng(seed);
  std::size_t next = 0;
  std::int64_t most_waiting = 0;
  for (int step = 0; step < 60; ++step) {
    const auto holding = l.holding();
    const bool release = !holding.empty() && (rng() % 100 < 45 || next >= 40);
    std::string what;
    if (release) {
      auto it = holding.begin();
      std::advance(it, rng() % holding.size());
      what = "release " + std::to_string(*it);
      l.release(*it);
      r.release(*it);
    } else if (next < 40) {
      const std::size_t priority = rng() % limits.classes.size();
      const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 3);
      what = "request " + std::to_string(next) + " (class " + std::to_string(priority) + ", " + std::to_string(n) + ")";
      l.request(next, priority, n);
      r.request(next, priority, n);
      ++next;
    } else {
      break;
    }
    ASSERT_TRUE(eventually([&] { return l.settled() && r.settled(); })) << "step " << step << ": " << what;
    ASSERT_EQ(l.granted(), r.granted()) << "step " << step << ": " << what;
    most_waiting = std::max(most_waiting, static_cast<std::int64_t>(local.waiting()));
  }
  EXPECT_GE(most_waiting, 2);  // the classes competed: requests waited
}

// Permits only: three classes with uneven shares (one unreserved permit in 8, one class guaranteed nothing), requests
// of 1 to 3 permits.
TEST(RedisAdmissionClasses, DecidesAsTheLocalAdmissionDoes) {
  expect_the_same_decisions(
      {.max_in_flight = 8, .classes = {{"interactive", 0.5}, {"batch", 0.375}, {"scavenger", 0.0}}}, "permits",
      20261203);
}

// Tokens and permits: a rate of one a minute, so that no token comes back while the test runs (every decision is the
// same at any instant of it), with a burst of 9 spread over the classes' assured buckets (5, 3 and none).
TEST(RedisAdmissionClasses, DecidesAsTheLocalAdmissionDoesWithARate) {
  expect_the_same_decisions({.rate = admit::rate::parse("1/min"),
                             .burst = 9,
                             .max_in_flight = 5,
                             .classes = {{"interactive", 0.5}, {"batch", 0.3}, {"scavenger", 0.0}}},
                            "tokens", 42);
}

// Tokens alone, scarce (a burst of 6, assured 3 and 3): which class's head a token goes to, over several sequences.
TEST(RedisAdmissionClasses, DecidesAsTheLocalAdmissionDoesOnScarceTokens) {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_the_same_decisions(
        {.rate = admit::rate::parse("1/min"), .burst = 6, .classes = {{"interactive", 0.5}, {"batch", 0.5}}}, "scarce",
        seed);
  }
}

}  // namespace

// The script keeps its per-call state in the function library's locals. A lone acquire or release that takes the
// short way must not see what the last call, on another limit, left there: with an idle time, its call that moves the
// keys' expiry gave its own expiry to the other limit's waiters hash and class queues (once a quarter of the idle
// time), which then vanished under the waiters of that limit.
TEST(RedisAdmissionClasses, AnotherLimitsShortCallsLeaveItsKeysExpiryAlone) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::semaphore_options kept_long;
  kept_long.idle_ttl = std::chrono::hours(1);
  admit::redis::admission classes(conn, "classes", {.max_in_flight = 1, .classes = {{"a", 0.5}, {"b", 0.5}}},
                                  kept_long);
  auto held = classes.try_acquire(0);
  ASSERT_TRUE(held) << held.error().message();
  auto waiter = std::async(std::launch::async, [&] { return classes.try_acquire_for(20s, 1); });
  ASSERT_TRUE(eventually([&] { return waiter_count(classes) == 1; }));

  admit::redis::semaphore_options kept_short;
  kept_short.idle_ttl = std::chrono::milliseconds(40);
  admit::redis::semaphore plain(conn, "plain", 1, kept_short);
  // Each round: a long call on `classes` (inspect), then a short one on `plain`; for longer than a quarter of plain's
  // idle time, so that one of them moves plain's keys' expiry.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(classes.inspect().second);
    auto l = plain.try_acquire();
    ASSERT_TRUE(l) << l.error().message();
    ASSERT_EQ(l->release().first, admit::redis::lease::release_status::released);
  }
  for (const std::string key : {"{classes}:waiters", "{classes}:waiting:1"}) {
    EXPECT_GT(std::stoll(server.admin({"PTTL", key})), 600'000) << key;  // an hour's, not plain's 10 s lease + 40 ms
  }
  (void)held->release();
  auto w = waiter.get();
  EXPECT_TRUE(w) << w.error().message();
}
