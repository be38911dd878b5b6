// over_limit_hits (count | drop) in `admit serve`'s configuration and in the in-process backend, at explicit times:
// the defaults by algorithm, /rules, a GCRA and a token bucket that go into debt and refuse even a check of 0 until
// the rate has repaid it (to the nanosecond), the fixed window's drop, an override of a dropping rule counted apart,
// the policies' own arithmetic against admit's (an admission is the same decision), and a reload that changes the
// mode starting over.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "admit/keyed_policy.hpp"
#include "configuration_testing.hpp"
#include "serve/config/configuration.hpp"
#include "serve/engine/charging_policies.hpp"
#include "serve/engine/in_process_backend.hpp"

namespace admit::serve {
namespace over_limit_hits_test {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;
using state = hit_outcome::state;

constexpr std::int64_t base_s = 1'699'920'000;  // a whole day of Unix time: windows of every unit start here
static_assert(base_s % 86400 == 0);

sys::time_point at(std::chrono::nanoseconds since_base) {
  return sys::time_point{std::chrono::duration_cast<sys::duration>(std::chrono::seconds{base_s} + since_base)};
}

rate_limit_rule make_rule(std::uint32_t rpu, unit per, algorithm a, std::optional<over_limit_hits> mode) {
  rate_limit_rule r;
  r.full_key = "d.user";
  r.requests_per_unit = rpu;
  r.per = per;
  r.algorithm = a;
  r.over_limit = mode;
  return r;
}

state one(in_process_backend& b, const rate_limit_rule& r, std::uint32_t n, std::chrono::nanoseconds t,
          std::optional<limit_override> o = std::nullopt) {
  std::vector<hit> hits{{&r, "d_user_alice", n, o}};
  return b.decide_at(hits, at(t)).at(0).result;
}

TEST(OverLimitHitsConfiguration, DefaultsByAlgorithmAndAsWritten) {
  const auto c = testing::load_one(R"(domain: d
descriptors:
  - key: fixed
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket}
  - key: budget
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket, over_limit_hits: COUNT}
  - key: fixed_drop
    rate_limit: {unit: second, requests_per_unit: 5, over_limit_hits: drop}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra, over_limit_hits: count}
)");
  const auto rules = c->rules();
  ASSERT_EQ(rules.size(), 5U);
  EXPECT_EQ(over_limit_hits_of(rules[0]), over_limit_hits::count);
  EXPECT_EQ(over_limit_hits_of(rules[1]), over_limit_hits::drop);
  EXPECT_EQ(over_limit_hits_of(rules[2]), over_limit_hits::count);
  EXPECT_EQ(over_limit_hits_of(rules[3]), over_limit_hits::drop);
  EXPECT_EQ(over_limit_hits_of(rules[4]), over_limit_hits::count);
  const auto j = nlohmann::json::parse(c->to_json());
  std::vector<std::string> shown;
  for (const auto& d : j.at("domains").at(0).at("descriptors"))
    shown.push_back(d.at("rate_limit").at("over_limit_hits"));
  EXPECT_EQ(shown, (std::vector<std::string>{"count", "drop", "count", "drop", "count"}));
}

// 10 a second (an interval of 100 ms), a burst of 10, refused hits charged.
class Debt : public ::testing::TestWithParam<algorithm> {
 protected:
  rate_limit_rule rule = make_rule(10, unit::second, GetParam(), over_limit_hits::count);
  in_process_backend b;
  void SetUp() override { b.configure_rules(std::span(&rule, 1)); }
};

TEST_P(Debt, ACostAboveWhatIsLeftIsChargedAndRefusesEvenACheckUntilRepaid) {
  EXPECT_EQ(one(b, rule, 15, 0s), state::over_limit);  // 1.5x the burst: refused, and 5 tokens owed
  EXPECT_EQ(one(b, rule, 0, 0s), state::over_limit);
  EXPECT_EQ(one(b, rule, 0, 499ms), state::over_limit);
  EXPECT_EQ(one(b, rule, 0, 500ms), state::ok);          // repaid to the nanosecond; nothing left
  EXPECT_EQ(one(b, rule, 1, 500ms), state::over_limit);  // charged: owes one token more
  EXPECT_EQ(one(b, rule, 0, 599ms), state::over_limit);
  EXPECT_EQ(one(b, rule, 0, 600ms), state::ok);
  EXPECT_EQ(one(b, rule, 1, 700ms), state::ok);   // one token refilled
  EXPECT_EQ(one(b, rule, 9, 1700ms), state::ok);  // and after a second, the burst less the one spent
  EXPECT_EQ(one(b, rule, 2, 1700ms), state::over_limit);
}

TEST_P(Debt, AnswersCarryTheLimitAndNothingRemainsWhileInDebt) {
  std::vector<hit> hits{{&rule, "k", 25, std::nullopt}, {&rule, "k", 0, std::nullopt}};
  const std::vector<hit_outcome> out = b.decide_at(hits, at(0s));
  for (const hit_outcome& o : out) {
    EXPECT_EQ(o.result, state::over_limit);
    EXPECT_EQ(o.limit, 10U);
    EXPECT_EQ(o.remaining, 0U);
    EXPECT_GE(o.count_after, 10U);
  }
  // Refused until the 15 tokens owed are repaid: 1.5 s, in whole seconds (2.5 s until the bucket is full again).
  EXPECT_EQ(out[0].reset_after, 2s);
  EXPECT_EQ(out[1].reset_after, 2s);
}

TEST_P(Debt, TheDebtIsCappedAsOnRedis) {
  const rate_limit_rule slow = make_rule(1, unit::hour, GetParam(), over_limit_hits::count);
  in_process_backend s;
  s.configure_rules(std::span(&slow, 1));
  const std::uint32_t huge = 4'000'000'000U;  // 4e9 hours of the rate: far more than the cap of 2^51 µs (71 years)
  EXPECT_EQ(one(s, slow, huge, 0s), state::over_limit);
  EXPECT_EQ(one(s, slow, huge, 0s), state::over_limit);  // a second charge does not pass the cap either
  const auto cap = std::chrono::microseconds{std::int64_t{1} << 51};
  EXPECT_EQ(one(s, slow, 0, cap - 1ns), state::over_limit);
  EXPECT_EQ(one(s, slow, 0, cap), state::ok);
}

TEST_P(Debt, DropChargesNothing) {
  const rate_limit_rule dropping = make_rule(10, unit::second, GetParam(), std::nullopt);
  in_process_backend d;
  d.configure_rules(std::span(&dropping, 1));
  EXPECT_EQ(one(d, dropping, 15, 0s), state::over_limit);
  EXPECT_EQ(one(d, dropping, 0, 0s), state::ok);
  EXPECT_EQ(one(d, dropping, 10, 0s), state::ok);
  EXPECT_EQ(one(d, dropping, 1, 0s), state::over_limit);
  EXPECT_EQ(one(d, dropping, 0, 0s), state::ok);  // empty, not in debt
}

TEST_P(Debt, AReloadThatChangesTheModeStartsOver) {
  EXPECT_EQ(one(b, rule, 15, 0s), state::over_limit);
  rate_limit_rule dropping = rule;
  dropping.over_limit = over_limit_hits::drop;
  b.configure_rules(std::span(&dropping, 1));
  EXPECT_EQ(one(b, dropping, 10, 0s), state::ok);
}

INSTANTIATE_TEST_SUITE_P(Rates, Debt, ::testing::Values(algorithm::gcra, algorithm::token_bucket),
                         [](const ::testing::TestParamInfo<algorithm>& p) { return std::string(to_string(p.param)); });

TEST(OverLimitHitsFixedWindow, CountIsEnvoysAndDropCountsOnlyWhatFits) {
  const rate_limit_rule counting = make_rule(10, unit::second, algorithm::fixed_window, std::nullopt);
  const rate_limit_rule dropping = make_rule(10, unit::second, algorithm::fixed_window, over_limit_hits::drop);
  in_process_backend c;
  c.configure_rules(std::span(&counting, 1));
  EXPECT_EQ(one(c, counting, 15, 0s), state::over_limit);
  EXPECT_EQ(one(c, counting, 0, 0s), state::over_limit);  // INCRBY counted the 15
  EXPECT_EQ(one(c, counting, 0, 1s), state::ok);          // a new window
  in_process_backend d;
  d.configure_rules(std::span(&dropping, 1));
  EXPECT_EQ(one(d, dropping, 15, 0s), state::over_limit);
  EXPECT_EQ(one(d, dropping, 0, 0s), state::ok);
  EXPECT_EQ(one(d, dropping, 10, 0s), state::ok);
  EXPECT_EQ(one(d, dropping, 1, 0s), state::over_limit);
  EXPECT_EQ(one(d, dropping, 0, 0s), state::ok);  // exactly at the limit is not over it
  // An override of the limit is counted as envoyproxy/ratelimit counts it (every hit), apart from the rule's counter.
  const limit_override o{3, unit::second};
  EXPECT_EQ(one(d, dropping, 5, 0s, o), state::over_limit);
  EXPECT_EQ(one(d, dropping, 0, 0s, o), state::over_limit);
  EXPECT_EQ(one(d, dropping, 0, 0s), state::ok);
}

// The charging policies admit exactly what admit's own policies admit; they differ only after a refusal. Random
// requests on one key, each policy pair fed the same times: while the charging one has refused nothing, every answer
// (and the state) is the same.
TEST(ChargingPolicies, AdmitAsAdmitsOwnUntilTheFirstRefusal) {
  const rate r = rate::per_second(10);
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const auto gc = keyed_gcra_policy<unix_clock>::make_config(r, 5);
    const auto tc = keyed_token_bucket_policy<unix_clock>::make_config(r, 5);
    std::int64_t g1 = charging_gcra::full_since(gc, detail::ns_min), g2 = g1;
    auto t1 = charging_token_bucket::full_since(tc, detail::ns_min), t2 = t1;
    std::int64_t now = 1'000'000'000;
    for (int i = 0; i < 50; ++i) {
      now += static_cast<std::int64_t>(rng() % 200'000'000);
      const std::int64_t n = rng() % 4;
      const decision own_g = keyed_gcra_policy<unix_clock>::decide(gc, g1, now, n);
      const decision charged_g = charging_gcra::decide(gc, g2, now, n);
      const decision own_t = keyed_token_bucket_policy<unix_clock>::decide(tc, t1, now, n);
      const decision charged_t = charging_token_bucket::decide(tc, t2, now, n);
      ASSERT_EQ(own_g.admitted, !charging_verdict_over(charged_g)) << round << " " << i;
      ASSERT_EQ(own_t.admitted, !charging_verdict_over(charged_t)) << round << " " << i;
      if (!own_g.admitted || !own_t.admitted) {
        if (!own_g.admitted && n > 0) {
          EXPECT_GT(charged_g.retry_after, 0ns);
        }
        if (!own_t.admitted && n > 0) {
          EXPECT_GT(charged_t.retry_after, 0ns);
        }
        break;
      }
      ASSERT_EQ(own_g, charged_g);
      ASSERT_EQ(own_t, charged_t);
      ASSERT_EQ(g1, g2);
      ASSERT_EQ(t1, t2);
    }
  }
}

}  // namespace over_limit_hits_test
}  // namespace admit::serve
