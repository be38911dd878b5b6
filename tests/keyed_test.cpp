// Tests of admit/keyed.hpp with GCRA per key: per-key independence; the same decisions as one standalone admit::gcra
// per key (random traces with stale times, n above the burst under both oversize policies); eviction that never
// changes a decision (an evicting store against one that never evicts, on the same trace); a stale `now` after an
// eviction that is answered conservatively; the key cap under a flood of unique keys (reject_new and evict_busy); and
// an eight-thread stress test of the per-key bound and the cap, for both algorithms. The token bucket per key is in
// keyed_token_bucket_test.cpp.
#include "admit/keyed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "admit/gcra.hpp"
#include "admit/testing/invalid_argument_message.hpp"
#include "admit/token_bucket.hpp"
#include "keyed_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace keyed_test {

namespace {

using namespace std::chrono_literals;
using admit::decision;
using admit::gcra;
using admit::keyed;
using admit::keyed_options;

// The decision that records no metrics is not public: only the Asio integration reaches it (detail::limiter_access).
template <class K>
concept has_public_decide_quiet_at = requires(K& k, typename K::time_point now) {
  k.decide_quiet_at(std::string("k"), now, 1);
};
template <class K>
concept has_public_decide_at = requires(K& k, typename K::time_point now) {
  k.decide_at(std::string("k"), now, 1);
};
static_assert(!has_public_decide_quiet_at<keyed<gcra>>);
static_assert(has_public_decide_at<keyed<gcra>>);
using admit::keyed_when_full;
using admit::oversize_policy;
using admit::rate;
using admit::token_bucket;
using std::chrono::nanoseconds;
using namespace admit::testing::keyed_traces;

TEST(Keyed, KeysAreIndependent) {
  keyed<gcra> k{rate::per_second(10), 2};  // T = 100ms
  EXPECT_TRUE(k.try_acquire_at("a", t0));
  EXPECT_TRUE(k.try_acquire_at("a", t0));
  EXPECT_FALSE(k.try_acquire_at("a", t0));
  EXPECT_TRUE(k.try_acquire_at("b", t0));  // "a" being empty does not touch "b"
  EXPECT_TRUE(k.try_acquire_at("b", t0));
  EXPECT_FALSE(k.try_acquire_at("b", t0));
  EXPECT_TRUE(k.try_acquire_at("a", t0 + 100ms));
  EXPECT_EQ(k.size(), 2U);
}

TEST(Keyed, DecisionCarriesTheLimiterAnswer) {
  keyed<gcra> k{rate::per(30, 60s), 16};  // redis-cell's "15 30 60"
  const decision d = k.decide_at(std::string_view{"user123"}, t0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.limit, 16);
  EXPECT_EQ(d.remaining, 15);
  EXPECT_EQ(d.retry_after, 0ns);
  EXPECT_EQ(d.reset_after, 2s);
  EXPECT_FALSE(admit::is_key_limit_refusal(d));
  EXPECT_TRUE(k.contains("user123"));
  EXPECT_TRUE(k.contains(std::string("user123")));
}

// Requests that change nothing do not create a key: a refusal (n above the burst), n == 0, an infinite rate.
TEST(Keyed, RequestsThatChangeNothingStoreNothing) {
  keyed<gcra> k{rate::per_second(10), 3};
  EXPECT_TRUE(k.decide_at("a", t0, 4).exceeds_capacity());
  EXPECT_TRUE(k.try_acquire_at("b", t0, 0));
  EXPECT_EQ(k.size(), 0U);
  keyed<gcra> unlimited{rate::inf(), 3};
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(unlimited.try_acquire_at(key_name(i), t0, 10));
  EXPECT_EQ(unlimited.size(), 0U);
}

TEST(Keyed, InvalidConfigurationThrowsNamingTheValue) {
  using admit::testing::invalid_argument_message;
  EXPECT_NE(invalid_argument_message([] { keyed<gcra> k(rate::per_second(1), 0); }).find("got 0"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              keyed<gcra> k(rate::per_second(1), 1, keyed_options{.max_keys = 0});
            }).find("max_keys"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              keyed<gcra> k(rate::per_second(1), 1, keyed_options{.shards = 0});
            }).find("shards"),
            std::string::npos);
}

TEST(Keyed, ShardsAreAPowerOfTwoWithAtLeastSixteenKeysEach) {
  EXPECT_EQ((keyed<gcra>{rate::per_second(1), 1, keyed_options{.max_keys = 1'000'000, .shards = 48}}.shard_count()),
            64U);
  EXPECT_EQ((keyed<gcra>{rate::per_second(1), 1, keyed_options{.max_keys = 100, .shards = 64}}.shard_count()), 4U);
  EXPECT_EQ((keyed<gcra>{rate::per_second(1), 1, keyed_options{.max_keys = 3}}.shard_count()), 1U);
}

class KeyedMatchesGcra : public ::testing::TestWithParam<oversize_policy> {};

// Without eviction (a cap above the number of keys, no sweep), every decision equals that of a standalone gcra per
// key, stale times included.
TEST_P(KeyedMatchesGcra, SameDecisionsAsAStandaloneGcraPerKey) {
  const rate r = rate::per_second(40);
  const std::int64_t burst = 4;
  keyed<gcra> k{r, burst, GetParam(), keyed_options{.max_keys = 1000, .sweep = 0}};
  std::map<int, std::unique_ptr<gcra>> alone;
  int admitted = 0;
  for (const event& e : random_trace(7, 50, 20'000, 0.2)) {
    auto& g = alone[e.key];
    if (!g) g = std::make_unique<gcra>(r, burst, GetParam());
    const decision want = g->decide_at(e.at, e.n);
    const decision got = k.decide_at(key_name(e.key), e.at, e.n);
    ASSERT_EQ(got, want) << "key " << e.key << " n " << e.n;
    admitted += want.admitted ? 1 : 0;
  }
  EXPECT_GT(admitted, 1000);
  EXPECT_EQ(k.stats().evicted_idle, 0U);
}

INSTANTIATE_TEST_SUITE_P(Policies, KeyedMatchesGcra, ::testing::Values(oversize_policy::reject, oversize_policy::debt));

class KeyedEviction : public ::testing::TestWithParam<std::size_t> {};

// The store that evicts (a cap of 12 keys in one shard; sweeps of GetParam() slots) decides exactly as one that never
// evicts, while hundreds of keys pass through it.
TEST_P(KeyedEviction, NeverChangesADecision) {
  const rate r = rate::per_second(10);  // T = 100 ms, τ = 300 ms
  keyed<gcra> evicting{r, 3, keyed_options{.max_keys = 12, .shards = 1, .sweep = GetParam()}};
  keyed<gcra> keeping{r, 3, keyed_options{.max_keys = 100'000, .sweep = 0}};
  const auto trace = rotating_trace(11, 20'000);
  for (const event& e : trace) {
    const decision want = keeping.decide_at(key_name(e.key), e.at, e.n);
    const decision got = evicting.decide_at(key_name(e.key), e.at, e.n);
    ASSERT_EQ(got, want) << "key " << e.key << " at " << (e.at - t0).count();
    ASSERT_LE(evicting.size(), 12U);
  }
  const admit::keyed_stats s = evicting.stats();
  EXPECT_EQ(s.refused_keys, 0U);
  EXPECT_GT(s.evicted_idle, 500U);
  EXPECT_EQ(s.evicted_busy, 0U);
  EXPECT_GT(keeping.size(), 500U);
}

INSTANTIATE_TEST_SUITE_P(SweepSizes, KeyedEviction, ::testing::Values(0U, 1U, 4U, 64U));

// A stale `now` after an eviction: the store answers from a state no fuller than any key it dropped, so it may refuse
// what the non-evicting store admits, never the reverse.
TEST(Keyed, StaleNowAfterEvictionIsNeverAnsweredMoreGenerously) {
  const rate r = rate::per_second(10);  // T = 100 ms, τ = 400 ms
  // One shard: the floor is per shard.
  keyed<gcra> evicting{r, 4, keyed_options{.max_keys = 100, .shards = 1, .sweep = 0}};
  keyed<gcra> keeping{r, 4, keyed_options{.max_keys = 100, .shards = 1, .sweep = 0}};
  for (auto* k : {&evicting, &keeping}) {
    ASSERT_TRUE(k->try_acquire_at("a", t0, 4));       // full again at t0 + 400ms
    ASSERT_TRUE(k->try_acquire_at("b", t0 + 1s, 4));  // full again at t0 + 1.4s
  }
  EXPECT_EQ(evicting.evict_idle_at(t0 + 2s), 2U);
  EXPECT_EQ(evicting.size(), 0U);
  // At t0 + 300ms "a" has 3 requests back; the evicting store answers as if "a" were "b" at its emptiest.
  const decision kept = keeping.decide_at("a", t0 + 300ms);
  const decision evicted = evicting.decide_at("a", t0 + 300ms);
  EXPECT_TRUE(kept.admitted);
  EXPECT_FALSE(evicted.admitted);
  EXPECT_FALSE(admit::is_key_limit_refusal(evicted));
  // From the eviction's time on, the answers are the same again.
  EXPECT_EQ(evicting.decide_at("a", t0 + 2s), keeping.decide_at("a", t0 + 2s));
}

// reject_new: a flood of unique keys never lifts the size above the cap; stored busy keys keep their state; the new
// keys are refused with limit 0 and the exact time the first stored key becomes idle, and are admitted from then on.
TEST(KeyedCap, RejectNewHoldsTheCapAndKeepsBusyKeys) { reject_new_holds_the_cap<gcra>(); }

// The retry_after of a refused new key is when room appears: retrying then is admitted.
TEST(KeyedCap, RetryAfterOfARefusedKeyIsWhenRoomAppears) {
  keyed<gcra> k{rate::per_second(10), 2, keyed_options{.max_keys = 2, .shards = 1}};
  ASSERT_TRUE(k.try_acquire_at("a", t0, 2));      // full again at t0 + 200ms
  ASSERT_TRUE(k.try_acquire_at("b", t0 + 50ms));  // full again at t0 + 150ms
  const decision d = k.decide_at("c", t0 + 60ms);
  ASSERT_TRUE(admit::is_key_limit_refusal(d));
  EXPECT_EQ(d.retry_after, 90ms);
  EXPECT_TRUE(admit::is_key_limit_refusal(k.decide_at("c", t0 + 150ms - 1ns)));
  EXPECT_TRUE(k.try_acquire_at("c", t0 + 150ms));
  EXPECT_FALSE(k.contains("b"));
  EXPECT_TRUE(k.contains("a"));
}

// evict_busy: a flood of new keys is admitted by dropping the stored key nearest to full; no key is ever admitted more
// than rate·w + burst, even when it comes back after being dropped.
TEST(KeyedCap, EvictBusyMakesRoomWithoutOverAdmitting) { evict_busy_never_over_admits<gcra>(); }

// evict_busy refuses a new key only when no sampled key can ever be full (rate zero). A flood of a million fresh keys,
// one a microsecond, each taking 10 ms worth of tokens from a bucket of 10 s: every stored key stays busy (no key is
// ever idle), and every new key has tokens to spare even from the raised floor. So each new key must be stored by a
// busy eviction, and none may be refused. (The evictions empty the slots after the clock hand; a sample of slots rather
// than of stored keys there found only empty ones and refused the key.) About 1 s in a debug build.
template <class Limiter>
void evict_busy_serves_a_flood_of_fresh_keys() {
  keyed<Limiter, std::uint64_t> k{rate::per_second(1e6), 10'000'000,
                                  keyed_options{.max_keys = 4096, .when_full = keyed_when_full::evict_busy}};
  constexpr std::uint64_t flood = 1'000'000;
  constexpr std::int64_t n = 10'000;
  tp now = t0;
  std::uint64_t refused = 0;
  std::uint64_t admitted = 0;
  for (std::uint64_t key = 0; key < flood; ++key) {
    now += 1us;
    const decision d = k.decide_at(key, now, n);
    refused += admit::is_key_limit_refusal(d) ? 1 : 0;
    admitted += d.admitted ? 1 : 0;
  }
  EXPECT_EQ(refused, 0U);
  EXPECT_EQ(admitted, flood);
  EXPECT_EQ(k.size(), 4096U);
  const admit::keyed_stats s = k.stats();
  EXPECT_EQ(s.refused_keys, 0U);
  EXPECT_EQ(s.evicted_busy, flood - 4096);
  EXPECT_EQ(s.evicted_idle, 0U);
}
TEST(KeyedCap, EvictBusyServesAFloodOfFreshKeysWithoutRefusal) { evict_busy_serves_a_flood_of_fresh_keys<gcra>(); }
TEST(KeyedTokenBucketCap, EvictBusyServesAFloodOfFreshKeysWithoutRefusal) {
  evict_busy_serves_a_flood_of_fresh_keys<token_bucket>();
}

// Eight threads, hot keys and random keys among 4096, times from a shared counter (so threads pass slightly stale
// times): no key is admitted more than rate·w + burst over the span of times used, and the size never exceeds the cap.
template <class Limiter>
void eight_threads_keep_the_per_key_bound_and_the_cap(keyed_when_full when_full) {
  const rate r = rate::per_second(1000);  // T = 1 ms
  const std::int64_t burst = 5;
  constexpr std::size_t cap = 256;
  constexpr int keys = 4096;
  constexpr int hot = 4;
  keyed<Limiter> k{r, burst, keyed_options{.max_keys = cap, .when_full = when_full, .shards = 8, .sweep = 2}};
  std::vector<std::atomic<std::int64_t>> admitted(keys);
  std::atomic<std::int64_t> clock_ns{0};
  std::atomic<bool> done{false};
  std::atomic<std::size_t> max_size{0};
  std::thread watcher([&] {
    while (!done.load()) max_size.store(std::max(max_size.load(), k.size()));
  });
  std::vector<std::thread> threads;
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937 rng{static_cast<std::uint32_t>(th + 1)};
      std::uniform_int_distribution<int> any(hot, keys - 1);
      std::uniform_int_distribution<int> coin(0, 3);
      for (int i = 0; i < 20'000; ++i) {
        const int key = coin(rng) == 0 ? i % hot : any(rng);
        const tp at = t0 + nanoseconds{clock_ns.fetch_add(20'000)};  // 20 µs per call, shared
        const decision d = k.decide_at(key_name(key), at, 1 + (i % 7 == 0 ? 1 : 0));
        if (d.admitted) admitted[static_cast<std::size_t>(key)].fetch_add(1 + (i % 7 == 0 ? 1 : 0));
      }
    });
  }
  for (auto& t : threads) t.join();
  done.store(true);
  watcher.join();
  const std::int64_t span_ns = clock_ns.load();
  const std::int64_t bound = span_ns / 1'000'000 + burst;
  for (int key = 0; key < keys; ++key) ASSERT_LE(admitted[static_cast<std::size_t>(key)].load(), bound) << key;
  // The hot keys are served (at about the rate) and the cap holds.
  for (int key = 0; key < hot; ++key) EXPECT_GT(admitted[static_cast<std::size_t>(key)].load(), bound / 4) << key;
  EXPECT_LE(max_size.load(), cap);
  const admit::keyed_stats s = k.stats();
  EXPECT_LE(s.keys, cap);
  EXPECT_GT(s.evicted_idle + s.evicted_busy, 0U);
}

class KeyedStress : public ::testing::TestWithParam<keyed_when_full> {};

TEST_P(KeyedStress, EightThreadsKeepThePerKeyBoundAndTheCap) {
  eight_threads_keep_the_per_key_bound_and_the_cap<gcra>(GetParam());
}
TEST_P(KeyedStress, EightThreadsKeepThePerKeyBoundAndTheCapOfTokenBuckets) {
  eight_threads_keep_the_per_key_bound_and_the_cap<token_bucket>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Policies, KeyedStress,
                         ::testing::Values(keyed_when_full::reject_new, keyed_when_full::evict_busy));

// The keyed store is generic over a keyed policy: the GCRA one works with any steady clock.
TEST(Keyed, WorksWithIntegerKeysAndAnotherClock) {
  keyed<admit::basic_gcra<admit::coarse_steady_clock>, std::uint64_t> k{rate::per_second(10), 1};
  const auto now = admit::coarse_steady_clock::now();
  EXPECT_TRUE(k.try_acquire_at(std::uint64_t{42}, now));
  EXPECT_FALSE(k.try_acquire_at(std::uint64_t{42}, now));
  EXPECT_TRUE(k.try_acquire_at(std::uint64_t{43}, now));
  EXPECT_EQ(k.size(), 2U);
}

}  // namespace

}  // namespace keyed_test
