// Tests of admit/keyed.hpp with a token bucket per key: per-key independence; the same decisions as one standalone
// admit::token_bucket per key (random traces with stale times, n above the burst under both oversize policies, the
// zero and infinite rates); eviction that never changes a decision (against standalone buckets on the same trace); a
// stale `now` after an eviction answered conservatively; the key cap (reject_new and evict_busy).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "admit/keyed.hpp"
#include "admit/testing/invalid_argument_message.hpp"
#include "admit/token_bucket.hpp"
#include "keyed_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace keyed_token_bucket_test {

namespace {

using namespace std::chrono_literals;
using admit::decision;
using admit::keyed;
using admit::keyed_options;
using admit::keyed_when_full;
using admit::oversize_policy;
using admit::rate;
using admit::token_bucket;
using std::chrono::nanoseconds;
using namespace admit::testing::keyed_traces;

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
TEST(KeyedTokenBucketCap, RejectNewHoldsTheCapAndKeepsBusyKeys) { reject_new_holds_the_cap<token_bucket>(); }

// evict_busy: no key is ever admitted more than rate·w + burst, even when it comes back after being dropped.
TEST(KeyedTokenBucketCap, EvictBusyMakesRoomWithoutOverAdmitting) { evict_busy_never_over_admits<token_bucket>(); }

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

}  // namespace keyed_token_bucket_test
