// Tests of admit/keyed.hpp: per-key independence; the same decisions as one standalone admit::gcra, and as one
// standalone admit::token_bucket, per key (random traces with stale times, n above the burst under both oversize
// policies, the zero and infinite rates); eviction that never changes a decision (an evicting store against one that
// never evicts, or against standalone limiters, on the same trace); a stale `now` after an eviction that is answered
// conservatively; the key cap under a flood of unique keys (reject_new and evict_busy); and an eight-thread stress
// test of the per-key bound and the cap, for both algorithms.
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
#include <tuple>
#include <vector>

#include "admit/gcra.hpp"
#include "admit/testing/invalid_argument_message.hpp"
#include "admit/token_bucket.hpp"

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
using tp = std::chrono::steady_clock::time_point;
using std::chrono::nanoseconds;

const tp t0 = tp{} + 1000h;

std::string key_name(int i) { return "client-" + std::to_string(i); }

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

// One step of a trace: which key, when, how many.
struct event {
  int key;
  tp at;
  std::int64_t n;
};

// A random trace over `keys` keys with mostly increasing times, n in 0..burst+1, and `stale` of the events at a time
// up to 300 ms before the latest.
std::vector<event> random_trace(std::uint32_t seed, int keys, int length, double stale) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<int> key(0, keys - 1);
  std::uniform_int_distribution<std::int64_t> step_us(0, 40'000);
  std::uniform_int_distribution<std::int64_t> n(0, 5);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<event> trace;
  tp now = t0;
  for (int i = 0; i < length; ++i) {
    now += std::chrono::microseconds(step_us(rng));
    tp at = now;
    if (coin(rng) < stale) at -= std::chrono::microseconds(step_us(rng) * 7);
    trace.push_back({key(rng), at, n(rng)});
  }
  return trace;
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

// A trace whose active keys rotate: at any time only the last few keys used are busy, while hundreds pass through.
std::vector<event> rotating_trace(std::uint32_t seed, int length) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<int> pick(0, 3);
  std::uniform_int_distribution<std::int64_t> step_ms(0, 30);
  std::uniform_int_distribution<std::int64_t> n(0, 3);
  std::vector<event> trace;
  tp now = t0;
  for (int i = 0; i < length; ++i) {
    now += std::chrono::milliseconds(step_ms(rng));
    // Four active keys, replaced every 500 ms: with τ = 300 ms at most eight are busy at any time.
    const int generation = static_cast<int>((now - t0) / 500ms);
    trace.push_back({generation * 4 + pick(rng), now, n(rng)});
  }
  return trace;
}

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
TEST(KeyedCap, RejectNewHoldsTheCapAndKeepsBusyKeys) {
  const rate r = rate::per_second(10);  // T = 100 ms, τ = 500 ms
  keyed<gcra> k{r, 5, keyed_options{.max_keys = 64, .shards = 4}};
  ASSERT_EQ(k.shard_count(), 4U);
  std::vector<int> stored;
  int refused = 0;
  for (int i = 0; i < 10'000; ++i) {
    const tp at = t0 + std::chrono::microseconds(i);  // the flood takes 10 ms
    const decision d = k.decide_at(key_name(i), at, 5);
    if (d.admitted) {
      stored.push_back(i);
    } else {
      ASSERT_TRUE(admit::is_key_limit_refusal(d));
      ASSERT_EQ(d.remaining, 0);
      ASSERT_GT(d.retry_after, 0ns);
      // The earliest stored key (of this shard) is full at its time + 500 ms.
      ASSERT_LE(d.retry_after, 500ms);
      ++refused;
    }
    ASSERT_LE(k.size(), 64U);
  }
  EXPECT_EQ(stored.size(), 64U);
  EXPECT_EQ(refused, 10'000 - 64);
  EXPECT_EQ(k.stats().refused_keys, static_cast<std::uint64_t>(refused));
  // The stored keys kept their state: empty at their flood time, one request back 100 ms later.
  for (const int i : stored) {
    const tp at = t0 + std::chrono::microseconds(i);
    EXPECT_FALSE(k.try_acquire_at(key_name(i), at + 99ms));
    EXPECT_TRUE(k.try_acquire_at(key_name(i), at + 100ms));
  }
  // Once they are idle, new keys make room by evicting them (one new key every 10 ms, each busy for 100 ms).
  for (int i = 0; i < 1'000; ++i) {
    ASSERT_TRUE(k.try_acquire_at(key_name(20'000 + i), t0 + 2s + i * 10ms)) << i;
    ASSERT_LE(k.size(), 64U);
  }
  EXPECT_GE(k.stats().evicted_idle, 64U);
}

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
TEST(KeyedCap, EvictBusyMakesRoomWithoutOverAdmitting) {
  const rate r = rate::per_second(10);  // T = 100 ms
  const std::int64_t burst = 3;
  keyed<gcra> k{r, burst, keyed_options{.max_keys = 16, .when_full = keyed_when_full::evict_busy, .shards = 1}};
  constexpr int keys = 200;
  std::vector<std::int64_t> admitted(keys, 0);
  std::mt19937 rng{5};
  std::uniform_int_distribution<int> pick(0, keys - 1);
  tp now = t0;
  for (int i = 0; i < 50'000; ++i) {
    now += 200us;
    const int key = pick(rng);
    const decision d = k.decide_at(key_name(key), now);
    ASSERT_FALSE(admit::is_key_limit_refusal(d));
    admitted[static_cast<std::size_t>(key)] += d.admitted ? 1 : 0;
    ASSERT_LE(k.size(), 16U);
  }
  const std::int64_t bound = (now - t0) / 100ms + burst;
  for (int key = 0; key < keys; ++key) EXPECT_LE(admitted[static_cast<std::size_t>(key)], bound) << key;
  EXPECT_GT(k.stats().evicted_busy, 0U);
  EXPECT_GT(*std::max_element(admitted.begin(), admitted.end()), 10);
}

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

// --- The token bucket per key ---------------------------------------------------------------------------------------

TEST(KeyedTokenBucket, KeysAreIndependentAndDecideAsABucket) {
  keyed<token_bucket> k{rate::per_second(10), 2};  // 100 ms a token
  const decision first = k.decide_at("a", t0);
  EXPECT_TRUE(first.admitted);
  EXPECT_EQ(first.limit, 2);
  EXPECT_EQ(first.remaining, 1);
  EXPECT_EQ(first.reset_after, 100ms);
  EXPECT_TRUE(k.try_acquire_at("a", t0));
  const decision refused = k.decide_at("a", t0 + 40ms);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.retry_after, 60ms);
  EXPECT_EQ(refused.reset_after, 160ms);
  EXPECT_FALSE(admit::is_key_limit_refusal(refused));
  EXPECT_TRUE(k.try_acquire_at("b", t0 + 40ms, 2));  // "a" being empty does not touch "b"
  EXPECT_TRUE(k.try_acquire_at("a", t0 + 100ms));
  EXPECT_EQ(k.size(), 2U);
}

// A stale `now` is answered at the latest `now` of an admission: it never refills twice (x/time/rate would).
TEST(KeyedTokenBucket, AStaleNowIsRaisedToTheLatestOne) {
  keyed<token_bucket> k{rate::per_second(10), 5, keyed_options{.sweep = 0}};
  token_bucket alone{rate::per_second(10), 5};
  for (const auto& [at, n] : std::vector<std::pair<tp, std::int64_t>>{
           {t0, 5}, {t0 + 1s, 3}, {t0 + 500ms, 1}, {t0 + 500ms, 2}, {t0 + 1s, 1}, {t0 + 900ms, 0}}) {
    ASSERT_EQ(k.decide_at("a", at, n), alone.decide_at(at, n)) << (at - t0).count() << " " << n;
  }
  // At t0 + 1s the bucket was full (5), took 3, then 1 and 2 at a stale t0 + 500ms counted as t0 + 1s: 0 left.
  const decision d = k.decide_at("a", t0 + 600ms);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 100ms);  // from t0 + 1s, not from t0 + 600ms
}

// Requests that change nothing store nothing; a burst below 1 is refused (a decision's limit must not look like the
// key cap's refusal, whose limit is 0).
TEST(KeyedTokenBucket, RequestsThatChangeNothingStoreNothingAndBurstZeroThrows) {
  keyed<token_bucket> k{rate::per_second(10), 3};
  EXPECT_TRUE(k.decide_at("a", t0, 4).exceeds_capacity());
  EXPECT_TRUE(k.try_acquire_at("b", t0, 0));
  EXPECT_EQ(k.size(), 0U);
  keyed<token_bucket> unlimited{rate::inf(), 3};
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(unlimited.try_acquire_at(key_name(i), t0, 10));
  EXPECT_EQ(unlimited.size(), 0U);
  using admit::testing::invalid_argument_message;
  EXPECT_NE(invalid_argument_message([] { keyed<token_bucket> z(rate::per_second(1), 0); }).find("got 0"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              keyed<token_bucket> z(rate::every(std::chrono::hours(1)), 2'000'000'000);
            }).find("2^62"),
            std::string::npos);
}

// Rate zero: a key spends its burst once and is never idle again (never evicted); a new key has its whole burst.
TEST(KeyedTokenBucket, RateZeroSpendsTheBurstOnceAndKeepsTheKey) {
  keyed<token_bucket> k{rate{}, 3};
  EXPECT_TRUE(k.try_acquire_at("a", t0, 2));
  EXPECT_EQ(k.evict_idle_at(t0 + 1000h), 0U);
  const decision d = k.decide_at("a", t0 + 1000h, 2);
  EXPECT_TRUE(d.exceeds_capacity());
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.reset_after, nanoseconds::max());
  EXPECT_TRUE(k.try_acquire_at("a", t0 - 1h));
  EXPECT_TRUE(k.try_acquire_at("b", t0 + 2000h, 3));
}

// How a trace's limiter is configured: rate, burst, oversize policy.
struct bucket_case {
  const char* name;
  rate r;
  std::int64_t burst;
  oversize_policy policy;
};

class KeyedMatchesTokenBucket : public ::testing::TestWithParam<bucket_case> {};

// Without eviction, every decision (admitted, limit, remaining, retry_after, reset_after) equals that of a standalone
// token_bucket per key: stale times (up to 280 ms back), n from 0 to 5 (above the burst of 4), both oversize policies,
// an interval that is not a whole number of nanoseconds, the zero rate and the infinite one.
TEST_P(KeyedMatchesTokenBucket, SameDecisionsAsAStandaloneTokenBucketPerKey) {
  const bucket_case c = GetParam();
  keyed<token_bucket> k{c.r, c.burst, c.policy, keyed_options{.max_keys = 1000, .sweep = 0}};
  std::map<int, std::unique_ptr<token_bucket>> alone;
  int admitted = 0;
  int refused = 0;
  for (const event& e : random_trace(17, 50, 20'000, 0.2)) {
    auto& b = alone[e.key];
    if (!b) b = std::make_unique<token_bucket>(c.r, c.burst, c.policy);
    const decision want = b->decide_at(e.at, e.n);
    const decision got = k.decide_at(key_name(e.key), e.at, e.n);
    ASSERT_EQ(got, want) << "key " << e.key << " n " << e.n << " at " << (e.at - t0).count();
    (want.admitted ? admitted : refused) += e.n > 0 ? 1 : 0;
  }
  EXPECT_GT(admitted, c.r.is_zero() ? 50 : 1000);
  if (!c.r.is_inf()) {
    EXPECT_GT(refused, 500);
  }
  EXPECT_EQ(k.stats().evicted_idle, 0U);
}

INSTANTIATE_TEST_SUITE_P(Cases, KeyedMatchesTokenBucket,
                         ::testing::Values(bucket_case{"per40", rate::per_second(40), 4, oversize_policy::reject},
                                           bucket_case{"per40_debt", rate::per_second(40), 4, oversize_policy::debt},
                                           bucket_case{"per3", rate::per_second(3), 4, oversize_policy::reject},
                                           bucket_case{"per3_debt", rate::per_second(3), 4, oversize_policy::debt},
                                           bucket_case{"burst1_debt", rate::per_second(70), 1, oversize_policy::debt},
                                           bucket_case{"zero", rate{}, 4, oversize_policy::reject},
                                           bucket_case{"zero_debt", rate{}, 4, oversize_policy::debt},
                                           bucket_case{"inf", rate::inf(), 4, oversize_policy::reject}),
                         [](const ::testing::TestParamInfo<bucket_case>& param) {
                           return std::string(param.param.name);
                         });

class KeyedTokenBucketEviction : public ::testing::TestWithParam<std::tuple<std::size_t, oversize_policy>> {};

// A store capped at 12 keys (one shard; sweeps of 0, 1, 4, 64 slots) decides exactly as standalone token buckets, one
// per key, while hundreds of keys pass through it; and so does a store that never evicts.
TEST_P(KeyedTokenBucketEviction, NeverChangesADecision) {
  const auto [sweep, policy] = GetParam();
  const rate r = rate::per_second(10);  // 100 ms a token, τ = 300 ms
  keyed<token_bucket> evicting{r, 3, policy, keyed_options{.max_keys = 12, .shards = 1, .sweep = sweep}};
  keyed<token_bucket> keeping{r, 3, policy, keyed_options{.max_keys = 100'000, .sweep = 0}};
  std::map<int, std::unique_ptr<token_bucket>> alone;
  std::vector<event> trace = rotating_trace(23, 20'000);
  for (std::size_t i = 0; i < trace.size(); i += 7) trace[i].n = 4;  // above the burst: debt or refusal
  for (const event& e : trace) {
    auto& b = alone[e.key];
    if (!b) b = std::make_unique<token_bucket>(r, 3, policy);
    const decision want = b->decide_at(e.at, e.n);
    ASSERT_EQ(keeping.decide_at(key_name(e.key), e.at, e.n), want) << "key " << e.key;
    ASSERT_EQ(evicting.decide_at(key_name(e.key), e.at, e.n), want) << "key " << e.key << " at " << (e.at - t0).count();
    ASSERT_LE(evicting.size(), 12U);
  }
  const admit::keyed_stats s = evicting.stats();
  EXPECT_EQ(s.refused_keys, 0U);
  EXPECT_GT(s.evicted_idle, 500U);
  EXPECT_EQ(s.evicted_busy, 0U);
  EXPECT_GT(keeping.size(), 500U);
}

INSTANTIATE_TEST_SUITE_P(SweepsAndPolicies, KeyedTokenBucketEviction,
                         ::testing::Combine(::testing::Values(0U, 1U, 4U, 64U),
                                            ::testing::Values(oversize_policy::reject, oversize_policy::debt)));

// A key is idle from TAT + τ on, not before: evict_idle_at drops it exactly then.
TEST(KeyedTokenBucket, AKeyIsIdleExactlyWhenItsBucketIsFull) {
  keyed<token_bucket> k{rate::per_second(10), 4, keyed_options{.sweep = 0}};
  ASSERT_TRUE(k.try_acquire_at("a", t0, 3));      // one token left: full again at t0 + 300 ms
  ASSERT_TRUE(k.try_acquire_at("a", t0 + 50ms));  // full again at t0 + 400 ms
  EXPECT_EQ(k.evict_idle_at(t0 + 400ms - 1ns), 0U);
  EXPECT_EQ(k.decide_at("a", t0 + 400ms - 1ns, 0).remaining, 3);  // n == 0: a query
  EXPECT_EQ(k.evict_idle_at(t0 + 400ms), 1U);
  EXPECT_FALSE(k.contains("a"));
}

// A stale `now` after an eviction: answered from a state no fuller than the dropped key's, never more generously.
TEST(KeyedTokenBucket, StaleNowAfterEvictionIsNeverAnsweredMoreGenerously) {
  const rate r = rate::per_second(10);  // 100 ms a token, τ = 400 ms
  keyed<token_bucket> evicting{r, 4, keyed_options{.max_keys = 100, .shards = 1, .sweep = 0}};
  keyed<token_bucket> keeping{r, 4, keyed_options{.max_keys = 100, .shards = 1, .sweep = 0}};
  for (auto* k : {&evicting, &keeping}) {
    ASSERT_TRUE(k->try_acquire_at("a", t0, 4));       // full again at t0 + 400ms
    ASSERT_TRUE(k->try_acquire_at("b", t0 + 1s, 4));  // full again at t0 + 1.4s
  }
  EXPECT_EQ(evicting.evict_idle_at(t0 + 2s), 2U);
  const decision kept = keeping.decide_at("a", t0 + 300ms);
  const decision evicted = evicting.decide_at("a", t0 + 300ms);
  EXPECT_TRUE(kept.admitted);
  EXPECT_FALSE(evicted.admitted);
  EXPECT_FALSE(admit::is_key_limit_refusal(evicted));
  EXPECT_LE(evicted.remaining, kept.remaining);
  EXPECT_EQ(evicting.decide_at("a", t0 + 2s), keeping.decide_at("a", t0 + 2s));
}

// reject_new: a flood of unique keys never lifts the size above the cap; the refusals are key-cap refusals with a
// retry_after within τ; stored keys keep their state.
TEST(KeyedTokenBucketCap, RejectNewHoldsTheCapAndKeepsBusyKeys) {
  keyed<token_bucket> k{rate::per_second(10), 5, keyed_options{.max_keys = 64, .shards = 4}};  // τ = 500 ms
  std::vector<int> stored;
  for (int i = 0; i < 10'000; ++i) {
    const decision d = k.decide_at(key_name(i), t0 + std::chrono::microseconds(i), 5);
    if (d.admitted) {
      stored.push_back(i);
    } else {
      ASSERT_TRUE(admit::is_key_limit_refusal(d));
      ASSERT_GT(d.retry_after, 0ns);
      ASSERT_LE(d.retry_after, 500ms);
    }
    ASSERT_LE(k.size(), 64U);
  }
  EXPECT_EQ(stored.size(), 64U);
  for (const int i : stored) {
    const tp at = t0 + std::chrono::microseconds(i);
    EXPECT_FALSE(k.try_acquire_at(key_name(i), at + 99ms));
    EXPECT_TRUE(k.try_acquire_at(key_name(i), at + 100ms));
  }
  for (int i = 0; i < 1'000; ++i) {
    ASSERT_TRUE(k.try_acquire_at(key_name(20'000 + i), t0 + 2s + i * 10ms)) << i;
    ASSERT_LE(k.size(), 64U);
  }
  EXPECT_GE(k.stats().evicted_idle, 64U);
}

// evict_busy: no key is ever admitted more than rate·w + burst, even when it comes back after being dropped.
TEST(KeyedTokenBucketCap, EvictBusyMakesRoomWithoutOverAdmitting) {
  const std::int64_t burst = 3;
  keyed<token_bucket> k{rate::per_second(10), burst,
                        keyed_options{.max_keys = 16, .when_full = keyed_when_full::evict_busy, .shards = 1}};
  constexpr int keys = 200;
  std::vector<std::int64_t> admitted(keys, 0);
  std::mt19937 rng{5};
  std::uniform_int_distribution<int> pick(0, keys - 1);
  tp now = t0;
  for (int i = 0; i < 50'000; ++i) {
    now += 200us;
    const int key = pick(rng);
    const decision d = k.decide_at(key_name(key), now);
    ASSERT_FALSE(admit::is_key_limit_refusal(d));
    admitted[static_cast<std::size_t>(key)] += d.admitted ? 1 : 0;
    ASSERT_LE(k.size(), 16U);
  }
  const std::int64_t bound = (now - t0) / 100ms + burst;
  for (int key = 0; key < keys; ++key) EXPECT_LE(admitted[static_cast<std::size_t>(key)], bound) << key;
  EXPECT_GT(k.stats().evicted_busy, 0U);
  EXPECT_GT(*std::max_element(admitted.begin(), admitted.end()), 10);
}

TEST(KeyedTokenBucket, WorksWithIntegerKeysAndAnotherClock) {
  keyed<admit::basic_token_bucket<admit::coarse_steady_clock>, std::uint64_t> k{rate::per_second(10), 1};
  const auto now = admit::coarse_steady_clock::now();
  EXPECT_TRUE(k.try_acquire_at(std::uint64_t{42}, now));
  EXPECT_FALSE(k.try_acquire_at(std::uint64_t{42}, now));
  EXPECT_TRUE(k.try_acquire_at(std::uint64_t{43}, now));
  EXPECT_EQ(k.size(), 2U);
  static_assert(sizeof(admit::keyed_token_bucket_policy<>::state_type) == 16);
}

}  // namespace
