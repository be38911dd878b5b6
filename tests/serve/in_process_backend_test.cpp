// Tests of serve/engine/in_process_backend.hpp: envoyproxy/ratelimit's fixed window decided exactly (windows aligned
// to Unix time, the boundary, INCRBY counting refused hits, remaining and reset in whole seconds, hits of 0), overrides
// of the limit, admit's algorithms (a refusal counts nothing), concurrency leases (acquire, release, expiry, the
// table's bound), reloads keeping the state of unchanged rules only, and the key cap. Times are explicit.
#include "serve/engine/in_process_backend.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace admit::serve {
// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace in_process_backend_test {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;
using state = hit_outcome::state;

// A whole day of Unix time (so a whole hour, minute and second): windows of those units start here.
constexpr std::int64_t base_s = 1'699'920'000;
static_assert(base_s % 86400 == 0);

sys::time_point at(std::chrono::nanoseconds since_base) {
  return sys::time_point{std::chrono::duration_cast<sys::duration>(std::chrono::seconds{base_s} + since_base)};
}

rate_limit_rule make_rule(std::string key, std::uint32_t rpu, unit per, algorithm a = algorithm::fixed_window,
                          std::size_t index = 0) {
  rate_limit_rule r;
  r.full_key = std::move(key);
  r.requests_per_unit = rpu;
  r.per = per;
  r.algorithm = a;
  r.index = index;
  return r;
}

hit_outcome one(in_process_backend& b, const rate_limit_rule& r, std::string key, std::uint32_t n,
                std::chrono::nanoseconds t, std::optional<limit_override> o = std::nullopt) {
  std::vector<hit> hits{{&r, std::move(key), n, o}};
  std::vector<hit_outcome> out = b.decide_at(hits, at(t));
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

// "k" + std::to_string(i) written so that GCC 12 at -O3 does not warn about it (a false -Wstringop-overflow).
std::string numbered(std::string prefix, int i) { return prefix.append(std::to_string(i)); }

TEST(InProcessFixedWindow, AdmitsTheLimitAtTheEndOfOneWindowAndAgainAtTheStartOfTheNext) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 10, unit::minute)};
  in_process_backend b;
  b.configure_rules(rules);
  for (int i = 0; i < 10; ++i) {
    const hit_outcome o = one(b, rules[0], "d_k_v", 1, 59s + 900ms);
    EXPECT_EQ(o.result, state::ok) << i;
    EXPECT_EQ(o.remaining, 9u - static_cast<std::uint32_t>(i));
    EXPECT_EQ(o.count_after, static_cast<std::uint64_t>(i) + 1);
    EXPECT_EQ(o.limit, 10u);
  }
  EXPECT_EQ(one(b, rules[0], "d_k_v", 1, 59s + 999ms).result, state::over_limit);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(one(b, rules[0], "d_k_v", 1, 60s).result, state::ok) << i;
  EXPECT_EQ(one(b, rules[0], "d_k_v", 1, 60s).result, state::over_limit);
  // another key has its own counter
  EXPECT_EQ(one(b, rules[0], "d_k_w", 1, 60s).result, state::ok);
}

TEST(InProcessFixedWindow, CountsEveryHitEvenWhenOverTheLimitAsIncrbyDoes) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 10, unit::second)};
  in_process_backend b;
  b.configure_rules(rules);
  hit_outcome o = one(b, rules[0], "k", 15, 0s);  // refused, but counted
  EXPECT_EQ(o.result, state::over_limit);
  EXPECT_EQ(o.remaining, 0u);
  EXPECT_EQ(o.count_after, 15u);
  o = one(b, rules[0], "k", 1, 500ms);
  EXPECT_EQ(o.result, state::over_limit);
  EXPECT_EQ(o.count_after, 16u);
  EXPECT_EQ(one(b, rules[0], "k", 10, 1s).result, state::ok);  // the next second is a new window
  EXPECT_EQ(one(b, rules[0], "k", 1, 1s).result, state::over_limit);
}

TEST(InProcessFixedWindow, ReportsTheResetInWholeSecondsOfUnixTime) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 5, unit::minute), make_rule("d.h", 5, unit::hour, {}, 1)};
  in_process_backend b;
  b.configure_rules(rules);
  // 40.7 s into the minute: envoyproxy/ratelimit says 60 − 40 = 20 s
  EXPECT_EQ(one(b, rules[0], "k", 1, 40s + 700ms).reset_after, 20s);
  EXPECT_EQ(one(b, rules[0], "k", 1, 59s + 999ms).reset_after, 1s);
  EXPECT_EQ(one(b, rules[0], "k", 1, 60s).reset_after, 60s);
  EXPECT_EQ(one(b, rules[1], "h", 1, 61min + 1s).reset_after, 59min - 1s);
}

TEST(InProcessFixedWindow, AHitOfZeroChecksWithoutCounting) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 2, unit::second)};
  in_process_backend b;
  b.configure_rules(rules);
  EXPECT_EQ(one(b, rules[0], "k", 2, 0s).remaining, 0u);
  const hit_outcome o = one(b, rules[0], "k", 0, 0s);
  EXPECT_EQ(o.result, state::ok);
  EXPECT_EQ(o.count_after, 2u);
  EXPECT_EQ(one(b, rules[0], "k", 1, 0s).result, state::over_limit);
  EXPECT_EQ(one(b, rules[0], "k", 0, 0s).result, state::over_limit);  // 3 > 2 already
}

TEST(InProcessFixedWindow, ABackwardsClockStepCountsInTheNewestWindow) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 2, unit::second)};
  in_process_backend b;
  b.configure_rules(rules);
  EXPECT_EQ(one(b, rules[0], "k", 2, 5s).result, state::ok);
  EXPECT_EQ(one(b, rules[0], "k", 1, 4s).result, state::over_limit);  // an older window would have had room
}

TEST(InProcessOverride, ReplacesTheLimitAndSharesTheFixedWindowCounterOfTheSameUnit) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 10, unit::minute)};
  in_process_backend b;
  b.configure_rules(rules);
  const limit_override three{3, unit::minute};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(one(b, rules[0], "k", 1, 0s, three).result, state::ok);
  const hit_outcome o = one(b, rules[0], "k", 1, 0s, three);
  EXPECT_EQ(o.result, state::over_limit);
  EXPECT_EQ(o.limit, 3u);
  EXPECT_EQ(one(b, rules[0], "k", 1, 0s).count_after, 5u);  // the rule's limit, the same counter
  // another unit: another window
  const hit_outcome s = one(b, rules[0], "k", 1, 0s, limit_override{1, unit::second});
  EXPECT_EQ(s.result, state::ok);
  EXPECT_EQ(s.reset_after, 1s);
}

TEST(InProcessOverride, WithoutARuleIsAFixedWindowOfTheOverride) {
  in_process_backend b;
  rate_limit_rule made = make_rule("d.k_v", 2, unit::second, algorithm::fixed_window, no_rule_index);
  const limit_override two{2, unit::second};
  EXPECT_EQ(one(b, made, "o", 1, 0s, two).result, state::ok);
  EXPECT_EQ(one(b, made, "o", 1, 0s, two).result, state::ok);
  EXPECT_EQ(one(b, made, "o", 1, 0s, two).result, state::over_limit);
  EXPECT_EQ(one(b, made, "o", 1, 1s, two).result, state::ok);
}

TEST(InProcessAlgorithms, GcraAndTokenBucketAdmitTheBurstThenTheRateAndCountNoRefusal) {
  for (const algorithm a : {algorithm::gcra, algorithm::token_bucket}) {
    std::vector<rate_limit_rule> rules{make_rule("d.k", 10, unit::second, a)};
    rules[0].burst = 5;
    in_process_backend b;
    b.configure_rules(rules);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(one(b, rules[0], "k", 1, 0s).result, state::ok) << to_string(a);
    const hit_outcome refused = one(b, rules[0], "k", 1, 0s);
    EXPECT_EQ(refused.result, state::over_limit) << to_string(a);
    EXPECT_EQ(refused.limit, 10u);
    EXPECT_EQ(one(b, rules[0], "k", 100, 50ms).result, state::over_limit);         // refused: counts nothing
    EXPECT_EQ(one(b, rules[0], "k", 1, 100ms).result, state::ok) << to_string(a);  // one interval later
    EXPECT_EQ(one(b, rules[0], "k", 1, 100ms).result, state::over_limit) << to_string(a);
    EXPECT_EQ(one(b, rules[0], "k", 5, 600ms).result, state::ok) << to_string(a);  // full again
  }
}

TEST(InProcessAlgorithms, SlidingWindowWeighsThePreviousWindow) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 10, unit::minute, algorithm::sliding_window)};
  in_process_backend b;
  b.configure_rules(rules);
  EXPECT_EQ(one(b, rules[0], "k", 10, 30s).result, state::ok);
  const hit_outcome o = one(b, rules[0], "k", 1, 30s);
  EXPECT_EQ(o.result, state::over_limit);
  // When it could pass: at 66 s, 10 · 54/60 = 9 of the first window's hits still weigh (the estimate at its full
  // 120 s would tell a caller to wait 90 s)
  EXPECT_EQ(o.reset_after, 36s);
  EXPECT_EQ(one(b, rules[0], "k", 1, 60s).result, state::over_limit);  // no boundary burst
  // half the previous window still weighs: 10 · 0.5 = 5 in the estimate, room for 5
  const hit_outcome half = one(b, rules[0], "k", 5, 90s);
  EXPECT_EQ(half.result, state::ok);
  EXPECT_EQ(half.remaining, 0u);
  EXPECT_EQ(one(b, rules[0], "k", 1, 90s).result, state::over_limit);
  EXPECT_EQ(one(b, rules[0], "k", 10, 180s).result, state::ok);
}

// duration_until_reset of a refusal by admit's algorithms says when that request could pass (the time until the
// limiter is full again would be 60 s for each of these), and one unit when it never can.
TEST(InProcessAlgorithms, ARefusalResetsWhenTheRequestCouldPass) {
  for (const algorithm a : {algorithm::gcra, algorithm::token_bucket, algorithm::sliding_window}) {
    SCOPED_TRACE(static_cast<int>(a));
    std::vector<rate_limit_rule> rules{make_rule("d.k", 10, unit::minute, a)};
    in_process_backend b;
    b.configure_rules(rules);
    ASSERT_EQ(one(b, rules[0], "k", 10, 0s).result, state::ok);
    const hit_outcome next = one(b, rules[0], "k", 1, 0s);
    EXPECT_EQ(next.result, state::over_limit);
    // gcra and token_bucket refill one every 6 s; the sliding window's first window lets nothing more in, and 6 s
    // into the next one its weight leaves room for one
    EXPECT_EQ(next.reset_after, a == algorithm::sliding_window ? 66s : 6s);
    const hit_outcome never = one(b, rules[0], "k", 11, 0s);  // more than the limiter ever holds
    EXPECT_EQ(never.result, state::over_limit);
    EXPECT_EQ(never.reset_after, 60s);
    std::vector<rate_limit_rule> none{make_rule("d.z", 0, unit::minute, a)};  // a limit of 0: nothing ever passes
    b.configure_rules(none);
    EXPECT_EQ(one(b, none[0], "z", 1, 0s).reset_after, 60s);
    EXPECT_EQ(one(b, none[0], "z", 0, 0s).result, state::ok);
  }
}

TEST(InProcessConcurrency, LeasesArePermitsUntilReleased) {
  std::vector<rate_limit_rule> rules{make_rule("d.c", 0, unit::unknown, algorithm::concurrency)};
  rules[0].concurrency = 2;
  in_process_backend b;
  b.configure_rules(rules);
  const hit_outcome a = one(b, rules[0], "c", 1, 0s);
  const hit_outcome c = one(b, rules[0], "c", 1, 0s);
  ASSERT_EQ(a.result, state::ok);
  ASSERT_EQ(c.result, state::ok);
  EXPECT_EQ(a.lease.size(), 32u);
  EXPECT_EQ(a.lease.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a.lease, c.lease);
  EXPECT_EQ(c.remaining, 0u);
  EXPECT_EQ(one(b, rules[0], "c", 1, 0s).result, state::over_limit);
  EXPECT_EQ(one(b, rules[0], "other", 2, 0s).result, state::ok);  // keys are independent
  EXPECT_TRUE(b.release_at(a.lease, at(1s)));
  EXPECT_FALSE(b.release_at(a.lease, at(1s)));  // once
  EXPECT_FALSE(b.release_at("00000000000000000000000000000000", at(1s)));
  const hit_outcome d = one(b, rules[0], "c", 1, 1s);
  EXPECT_EQ(d.result, state::ok);
  EXPECT_EQ(one(b, rules[0], "c", 2, 1s).result, state::over_limit);
  EXPECT_EQ(b.leases(), 3u);  // c, other (one lease of 2 permits), d
}

TEST(InProcessConcurrency, LeasesExpireAfterTheirTtl) {
  std::vector<rate_limit_rule> rules{make_rule("d.c", 0, unit::unknown, algorithm::concurrency)};
  rules[0].concurrency = 1;
  in_process_backend b{{.lease_ttl = 10s}};
  b.configure_rules(rules);
  const hit_outcome a = one(b, rules[0], "c", 1, 0s);
  ASSERT_EQ(a.result, state::ok);
  EXPECT_EQ(a.reset_after, 10s);  // the lease's ttl, as the Redis backend reports it
  const hit_outcome refused = one(b, rules[0], "c", 1, 10s - 1ns);
  EXPECT_EQ(refused.result, state::over_limit);
  EXPECT_EQ(refused.reset_after, 10s);                         // the longest the permit in use can stay held
  EXPECT_EQ(one(b, rules[0], "c", 0, 1s).reset_after, 10s);    // a check too, while the permit is held
  EXPECT_EQ(one(b, rules[0], "free", 0, 1s).reset_after, 0s);  // and nothing when none is
  const hit_outcome later = one(b, rules[0], "c", 1, 10s);     // the first lease expired
  EXPECT_EQ(later.result, state::ok);
  EXPECT_FALSE(b.release_at(a.lease, at(10s)));
  EXPECT_TRUE(b.release_at(later.lease, at(11s)));
  EXPECT_EQ(b.leases(), 0u);
}

TEST(InProcessConcurrency, TheLeaseTableIsBounded) {
  std::vector<rate_limit_rule> rules{make_rule("d.c", 0, unit::unknown, algorithm::concurrency)};
  rules[0].concurrency = 100;
  in_process_backend b{{.max_leases = 3}};
  b.configure_rules(rules);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(one(b, rules[0], numbered("k", i), 1, 0s).result, state::ok);
  const hit_outcome full = one(b, rules[0], "k9", 1, 0s);
  EXPECT_EQ(full.result, state::failed);
  EXPECT_NE(full.error.find("max_leases"), std::string::npos);
}

// The counting is the library's keyed_concurrency_limiter: a permit refused a lease (the table full) goes back to it,
// a check takes nothing, a new key beyond max_keys is the key cap, a limit of 0 admits only checks.
TEST(InProcessConcurrency, PermitsAreTheLibrarysAndNoneIsLeftBehind) {
  std::vector<rate_limit_rule> rules{make_rule("d.c", 0, unit::unknown, algorithm::concurrency),
                                     make_rule("d.z", 0, unit::unknown, algorithm::concurrency, 1)};
  rules[0].concurrency = 2;
  in_process_backend b{{.max_keys = 2, .max_leases = 2}};
  b.configure_rules(rules);
  const hit_outcome a = one(b, rules[0], "a", 1, 0s);
  const hit_outcome a2 = one(b, rules[0], "a", 1, 0s);
  ASSERT_EQ(a2.result, state::ok);
  const hit_outcome full = one(b, rules[0], "b", 1, 0s);  // the table is full: no lease, and no permit kept
  EXPECT_EQ(full.result, state::failed);
  const hit_outcome check = one(b, rules[0], "b", 0, 0s);
  EXPECT_EQ(check.result, state::ok);
  EXPECT_EQ(check.count_after, 0u);
  EXPECT_EQ(check.remaining, 2u);
  EXPECT_TRUE(check.lease.empty());
  const hit_outcome held = one(b, rules[0], "a", 0, 0s);
  EXPECT_EQ(held.count_after, 2u);
  EXPECT_EQ(held.remaining, 0u);
  EXPECT_EQ(b.keys(), 1u);  // "a" only: the refused "b" left nothing behind

  ASSERT_TRUE(b.release_at(a.lease, at(1s)));
  EXPECT_EQ(one(b, rules[0], "b", 1, 1s).result, state::ok);  // two keys stored now: the cap
  const hit_outcome third = one(b, rules[0], "c", 1, 1s);
  EXPECT_EQ(third.result, state::failed);
  EXPECT_NE(third.error.find("key cap"), std::string::npos) << third.error;

  EXPECT_EQ(one(b, rules[1], "z", 1, 0s).result, state::over_limit);  // concurrency: 0
  EXPECT_EQ(one(b, rules[1], "z", 0, 0s).result, state::ok);

  // A reload without the rule releases its leases' permits (the limiter goes with the rule).
  const std::vector<rate_limit_rule> next{make_rule("d.other", 1, unit::minute)};
  b.configure_rules(next);
  EXPECT_EQ(b.leases(), 0u);
  EXPECT_EQ(b.keys(), 0u);
}

TEST(InProcessReload, KeepsTheStateOfUnchangedRulesAndDropsTheOthers) {
  std::vector<rate_limit_rule> first{make_rule("d.a", 2, unit::minute, {}, 0),
                                     make_rule("d.b", 2, unit::minute, algorithm::sliding_window, 1),
                                     make_rule("d.c", 2, unit::minute, {}, 2)};
  in_process_backend b;
  b.configure_rules(first);
  for (const auto& r : first) EXPECT_EQ(one(b, r, "k", 2, 0s).result, state::ok);
  EXPECT_EQ(b.keys(), 3u);
  // a: unchanged but at another index; b: its rate changed; c: removed
  std::vector<rate_limit_rule> second{make_rule("d.b", 3, unit::minute, algorithm::sliding_window, 0),
                                      make_rule("d.a", 2, unit::minute, {}, 1)};
  b.configure_rules(second);
  EXPECT_EQ(one(b, second[1], "k", 1, 1s).result, state::over_limit);  // a's count (2) carried over
  const hit_outcome fresh = one(b, second[0], "k", 3, 1s);  // b counts afresh: its 3 fit the new rate at once
  EXPECT_EQ(fresh.result, state::ok);
  EXPECT_EQ(b.keys(), 2u);
  // a decision still under way on the first configuration finds the state by the rule's identity
  EXPECT_EQ(one(b, first[0], "k", 1, 1s).count_after, 4u);
}

// A fixed window counts hits, whatever its limit: a reload that changes requests_per_unit keeps the window's count, as
// envoyproxy/ratelimit's counters and the Redis backend's (keyed without the limit) keep theirs; lowering a limit
// during an incident does not hand every client a fresh window. A changed unit is another window: a new count.
TEST(InProcessReload, AFixedWindowKeepsItsCountWhenItsLimitChanges) {
  const std::vector<rate_limit_rule> first{make_rule("d.a", 10, unit::hour)};
  in_process_backend b;
  b.configure_rules(first);
  EXPECT_EQ(one(b, first[0], "k", 6, 0s).count_after, 6u);
  const std::vector<rate_limit_rule> lowered{make_rule("d.a", 3, unit::hour)};
  b.configure_rules(lowered);
  const hit_outcome after = one(b, lowered[0], "k", 1, 1s);
  EXPECT_EQ(after.result, state::over_limit);
  EXPECT_EQ(after.count_after, 7u);
  const std::vector<rate_limit_rule> per_minute{make_rule("d.a", 3, unit::minute)};
  b.configure_rules(per_minute);
  EXPECT_EQ(one(b, per_minute[0], "k", 1, 2s).count_after, 1u);
}

// A decision under way on a configuration that a reload replaced, for a concurrency rule the reload changed, was
// answered with a lease id while its permit was dropped at the end of the call (no permit held): it fails instead.
TEST(InProcessReload, AConcurrencyRuleChangedUnderADecisionFailsInsteadOfGrantingALeaseItDrops) {
  std::vector<rate_limit_rule> first{make_rule("d.c", 0, unit::unknown, algorithm::concurrency)};
  first[0].concurrency = 1;
  std::vector<rate_limit_rule> second = first;
  second[0].concurrency = 2;
  in_process_backend b;
  b.configure_rules(first);
  b.configure_rules(second);
  const hit_outcome o = one(b, first[0], "c", 1, 0s);
  EXPECT_EQ(o.result, state::failed);
  EXPECT_TRUE(o.lease.empty());
  EXPECT_NE(o.error.find("reload"), std::string::npos) << o.error;
  EXPECT_EQ(b.leases(), 0u);
}

TEST(InProcessKeyCap, ANewKeyBeyondTheCapFailsUntilAWindowPasses) {
  std::vector<rate_limit_rule> rules{make_rule("d.k", 5, unit::second)};
  in_process_backend b{{.max_keys = 16}};
  b.configure_rules(rules);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(one(b, rules[0], numbered("k", i), 1, 0s).result, state::ok) << i;
  const hit_outcome refused = one(b, rules[0], "k16", 1, 500ms);
  EXPECT_EQ(refused.result, state::failed);
  EXPECT_NE(refused.error.find("max_keys = 16"), std::string::npos);
  EXPECT_EQ(one(b, rules[0], "k3", 1, 500ms).result, state::ok);  // stored keys keep their service
  EXPECT_EQ(one(b, rules[0], "k16", 1, 1s).result, state::ok);    // the idle keys of the last window made room
  EXPECT_LE(b.keys(), 16u);
}

TEST(InProcessOptions, RefusesABadOption) {
  EXPECT_THROW(in_process_backend({.max_keys = 0}), std::invalid_argument);
  EXPECT_THROW(in_process_backend({.lease_ttl = 0s}), std::invalid_argument);
  EXPECT_THROW(in_process_backend({.max_leases = 0}), std::invalid_argument);
}

}  // namespace in_process_backend_test
}  // namespace admit::serve
