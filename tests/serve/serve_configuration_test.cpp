// Loading `admit serve`'s configuration (serve/config/configuration.hpp): envoyproxy/ratelimit's YAML format accepted
// as is, admit's extensions (algorithm, burst, concurrency), and the JSON of GET /rules. What is refused, with its
// file, line and reason: serve_configuration_refusals_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "configuration_testing.hpp"
#include "serve/config/configuration.hpp"

namespace {

using admit::serve::algorithm;
using admit::serve::configuration;
using admit::serve::rate_limit_rule;
using admit::serve::unit;
using admit::serve::testing::file_list;
using admit::serve::testing::load_one;

const rate_limit_rule* rule_named(const configuration& c, const std::string& full_key) {
  for (const rate_limit_rule& r : c.rules())
    if (r.full_key == full_key) return &r;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------------
// What envoyproxy/ratelimit accepts, admit accepts.

TEST(ConfigurationLoads, RulesWithTheirKeysFileLineAndDenseIndexes) {
  const auto c = load_one(R"(domain: shop
descriptors:
  - key: client
    value: mobile
    descriptors:
      - key: path
        rate_limit:
          unit: second
          requests_per_unit: 5
      - key: path
        value: /cart
        rate_limit:
          name: cart
          unit: minute
          requests_per_unit: 10
  - key: client
    rate_limit:
      unit: hour
      requests_per_unit: 100
  - key: client
    value: internal
  - key: bot
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unlimited: true
)",
                          "shop.yaml");
  ASSERT_EQ(c->rules().size(), 4U);
  for (std::size_t i = 0; i < c->rules().size(); ++i) EXPECT_EQ(c->rules()[i].index, i);
  const rate_limit_rule* path = rule_named(*c, "shop.client_mobile.path");
  ASSERT_NE(path, nullptr);
  EXPECT_EQ(path->per, unit::second);
  EXPECT_EQ(path->requests_per_unit, 5U);
  EXPECT_EQ(path->file, "shop.yaml");
  EXPECT_EQ(path->line, 7);
  EXPECT_EQ(path->algorithm, algorithm::fixed_window);
  const rate_limit_rule* cart = rule_named(*c, "shop.client_mobile.path_/cart");
  ASSERT_NE(cart, nullptr);
  EXPECT_EQ(cart->name, "cart");
  EXPECT_EQ(cart->per, unit::minute);
  ASSERT_NE(rule_named(*c, "shop.client"), nullptr);
  const rate_limit_rule* bot = rule_named(*c, "shop.bot");
  ASSERT_NE(bot, nullptr);
  EXPECT_TRUE(bot->unlimited);
  EXPECT_TRUE(bot->shadow_mode);
  EXPECT_TRUE(bot->detailed_metric);
  EXPECT_EQ(bot->per, unit::unknown);
  EXPECT_TRUE(c->has_domain("shop"));
  EXPECT_FALSE(c->has_domain("shops"));
}

TEST(ConfigurationLoads, UnitsInAnyCaseAndAllSevenUnits) {
  const auto c = load_one(R"(domain: u
descriptors:
  - {key: a, rate_limit: {unit: SECOND, requests_per_unit: 1}}
  - {key: b, rate_limit: {unit: Minute, requests_per_unit: 1}}
  - {key: c, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: d, rate_limit: {unit: dAy, requests_per_unit: 1}}
  - {key: e, rate_limit: {unit: week, requests_per_unit: 1}}
  - {key: f, rate_limit: {unit: month, requests_per_unit: 1}}
  - {key: g, rate_limit: {unit: YEAR, requests_per_unit: 1}}
)");
  const unit expected[] = {unit::second, unit::minute, unit::hour, unit::day, unit::week, unit::month, unit::year};
  ASSERT_EQ(c->rules().size(), 7U);
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(c->rules()[i].per, expected[i]) << i;
}

TEST(ConfigurationLoads, WhatTheFormatAcceptsButAdmitDoesNotActOn) {
  // quota_mode and metadata are read and ignored; value_to_metric only shapes the metric key; a key of the format
  // written where it has no meaning (unit beside rate_limit) is ignored, as envoyproxy/ratelimit ignores it.
  const auto c = load_one(R"(domain: extras
descriptors:
  - key: a
    quota_mode: true
    value_to_metric: yes
    unit: day
    metadata:
      owner: team-a
      tags: [x, 1.5, {k: v}]
    rate_limit:
      unit: second
      requests_per_unit: 0
)");
  ASSERT_EQ(c->rules().size(), 1U);
  EXPECT_EQ(c->rules()[0].requests_per_unit, 0U);
  // The misplaced unit is said as a warning (quota_mode and metadata, read and ignored as the format has them, not).
  ASSERT_EQ(c->warnings().size(), 1U);
  EXPECT_EQ(c->warnings()[0].line, 6);
  EXPECT_EQ(c->warnings()[0].message,
            "\"unit\" means nothing in a descriptor and is ignored; it belongs inside rate_limit");
}

// A rate_limit with a unit and no requests_per_unit is a limit of 0, as in envoyproxy/ratelimit: accepted, and said
// as a warning (it loaded silently, and every request of the rule was over the limit). Written as 0, no warning.
TEST(ConfigurationLoads, ALimitWithoutRequestsPerUnitIsAWarning) {
  const auto c = load_one(R"(domain: slip
descriptors:
  - key: a
    rate_limit: {unit: second}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: c
    rate_limit: {unlimited: true}
)");
  ASSERT_EQ(c->rules().size(), 3U);
  EXPECT_EQ(c->rules()[0].requests_per_unit, 0U);
  ASSERT_EQ(c->warnings().size(), 1U);
  EXPECT_EQ(c->warnings()[0].line, 4);
  EXPECT_EQ(c->warnings()[0].message,
            "a rate_limit without requests_per_unit is a limit of 0: every request of slip.a is over it (write "
            "requests_per_unit: 0 to mean that)");
}

// A descriptor's key written inside rate_limit is ignored there (the rule enforces for real): the warning says where
// it belongs. At the top of the file too.
TEST(ConfigurationLoads, AKeyWhereItMeansNothingIsAWarning) {
  const auto c = load_one(R"(domain: misplaced
unit: second
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1, shadow_mode: true}
)");
  ASSERT_EQ(c->rules().size(), 1U);
  EXPECT_FALSE(c->rules()[0].shadow_mode);
  ASSERT_EQ(c->warnings().size(), 2U);
  EXPECT_EQ(c->warnings()[0].line, 2);
  EXPECT_EQ(c->warnings()[0].message,
            "\"unit\" means nothing at the top of the file and is ignored; it belongs inside rate_limit");
  EXPECT_EQ(c->warnings()[1].line, 5);
  EXPECT_EQ(c->warnings()[1].message,
            "\"shadow_mode\" means nothing inside rate_limit and is ignored; it belongs to the descriptor, beside "
            "rate_limit");
}

// A file holds one domain, read from its first YAML document (as envoyproxy/ratelimit reads it): a second, after
// `---`, was dropped without a word.
TEST(ConfigurationLoads, ASecondYamlDocumentIsAWarning) {
  const auto c = load_one(R"(domain: first
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
---
domain: second
descriptors:
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 2}
)");
  ASSERT_EQ(c->rules().size(), 1U);
  ASSERT_EQ(c->warnings().size(), 1U);
  EXPECT_EQ(c->warnings()[0].line, 6);
  EXPECT_EQ(c->warnings()[0].message,
            "a second YAML document (after ---) is ignored: a file holds one domain, in its first");
  // A document marker alone, or one that ends the file, is no second document.
  EXPECT_TRUE(load_one("---\ndomain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
                       "---\n")
                  ->warnings()
                  .empty());
}

TEST(ConfigurationLoads, UnlimitedWithAnInvalidUnitAsEnvoyproxyRatelimitDoes) {
  // There, unlimited refuses a *valid* unit only: a name that is not a unit is ignored.
  const auto c =
      load_one("domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: on\n      unit: none\n");
  EXPECT_TRUE(c->rules().at(0).unlimited);
}

TEST(ConfigurationLoads, YamlOnePointOneScalarsAsGoYamlReadsThem) {
  const auto c = load_one(R"(domain: s
descriptors:
  - key: hex
    shadow_mode: Yes
    rate_limit: {unit: second, requests_per_unit: 0x10}
  - key: underscores
    shadow_mode: off
    rate_limit: {unit: second, requests_per_unit: 1_000}
  - key: 123
    value: true
    rate_limit: {unit: second, requests_per_unit: +7}
)");
  EXPECT_EQ(rule_named(*c, "s.hex")->requests_per_unit, 16U);
  EXPECT_TRUE(rule_named(*c, "s.hex")->shadow_mode);
  EXPECT_EQ(rule_named(*c, "s.underscores")->requests_per_unit, 1000U);
  EXPECT_FALSE(rule_named(*c, "s.underscores")->shadow_mode);
  // A number or a boolean as a key's or a value's *text* is that text.
  EXPECT_EQ(rule_named(*c, "s.123_true")->requests_per_unit, 7U);
}

TEST(ConfigurationLoads, QuotedScalarsAfterMultibyteText) {
  const auto c = load_one(
      "# caf\xC3\xA9 \xE2\x9C\x93\ndomain: 'caf\xC3\xA9'\ndescriptors:\n  - key: \"\xE2\x9C\x93 it''s\"\n    value: "
      "'it''s \"x\"'\n"
      "    rate_limit: {unit: \"second\", requests_per_unit: 1}\n");
  ASSERT_EQ(c->rules().size(), 1U);
  EXPECT_EQ(c->rules()[0].full_key, "caf\xC3\xA9.\xE2\x9C\x93 it''s_it's \"x\"");
}

TEST(ConfigurationLoads, AKeyGivenTwiceKeepsTheLastAsGoYamlDoes) {
  const auto c =
      load_one("domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      unit: hour\n");
  EXPECT_EQ(c->rules().at(0).per, unit::hour);
}

TEST(ConfigurationLoads, MergeKeys) {
  const auto c = load_one(R"(domain: s
descriptors:
  - key: a
    rate_limit: &per_minute
      unit: minute
      requests_per_unit: 10
  - key: b
    rate_limit:
      <<: *per_minute
      requests_per_unit: 20
)");
  EXPECT_EQ(rule_named(*c, "s.b")->per, unit::minute);
  EXPECT_EQ(rule_named(*c, "s.b")->requests_per_unit, 20U);
}

TEST(ConfigurationLoads, ADomainWithoutDescriptors) {
  const auto c = load_one("domain: quiet\n");
  EXPECT_TRUE(c->has_domain("quiet"));
  EXPECT_TRUE(c->rules().empty());
}

TEST(ConfigurationLoads, ReplacesNames) {
  const auto c = load_one(R"(domain: s
descriptors:
  - key: a
    rate_limit:
      name: wide
      unit: second
      requests_per_unit: 1
  - key: b
    rate_limit:
      replaces:
        - name: wide
        - name: other
      unit: second
      requests_per_unit: 2
)");
  EXPECT_EQ(rule_named(*c, "s.b")->replaces, (std::vector<std::string>{"wide", "other"}));
  EXPECT_TRUE(rule_named(*c, "s.b")->name.empty());
}

TEST(ConfigurationLoads, AdmitExtensions) {
  const auto c = load_one(R"(domain: ext
descriptors:
  - key: window
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding_window}
  - key: smooth
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: GCRA, burst: 5}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket}
  - key: fixed
    rate_limit: {unit: second, requests_per_unit: 0, algorithm: fixed_window}
  - key: uploads
    shadow_mode: true
    rate_limit:
      name: uploads
      concurrency: 8
)");
  EXPECT_EQ(rule_named(*c, "ext.window")->algorithm, algorithm::sliding_window);
  const rate_limit_rule* smooth = rule_named(*c, "ext.smooth");
  EXPECT_EQ(smooth->algorithm, algorithm::gcra);
  EXPECT_EQ(smooth->burst, 5U);
  const rate_limit_rule* bucket = rule_named(*c, "ext.bucket");
  EXPECT_EQ(bucket->algorithm, algorithm::token_bucket);
  EXPECT_FALSE(bucket->burst.has_value());
  EXPECT_EQ(rule_named(*c, "ext.fixed")->algorithm, algorithm::fixed_window);
  const rate_limit_rule* uploads = rule_named(*c, "ext.uploads");
  EXPECT_EQ(uploads->algorithm, algorithm::concurrency);
  EXPECT_EQ(uploads->concurrency, 8U);
  EXPECT_EQ(uploads->per, unit::unknown);
  EXPECT_TRUE(uploads->shadow_mode);
}

TEST(ConfigurationLoads, RuleIndexesAcrossFilesInLoadOrder) {
  const file_list files{
      {"1.yaml", "domain: z\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n"},
      {"2.yaml", "domain: a\ndescriptors:\n  - {key: b, rate_limit: {unit: second, requests_per_unit: 1}}\n"}};
  const auto c = configuration::load(files);
  ASSERT_EQ(c->rules().size(), 2U);
  EXPECT_EQ(c->rules()[0].full_key, "z.a");
  EXPECT_EQ(c->rules()[0].file, "1.yaml");
  EXPECT_EQ(c->rules()[1].full_key, "a.b");
  EXPECT_EQ(c->rules()[1].index, 1U);
}

TEST(ConfigurationJson, TheLoadedTree) {
  const auto c = load_one(R"(domain: shop
descriptors:
  - key: client
    value: mobile
    descriptors:
      - key: path
        value: /api/*
        share_threshold: true
        rate_limit:
          name: api
          replaces: [{name: wide}]
          unit: second
          requests_per_unit: 5
          algorithm: gcra
          burst: 2
  - key: uploads
    rate_limit: {concurrency: 3}
  - key: free
    rate_limit: {unlimited: true}
)",
                          "shop.yaml");
  const auto j = nlohmann::json::parse(c->to_json());
  EXPECT_EQ(j.at("rules"), 3);
  const auto& shop = j.at("domains").at(0);
  EXPECT_EQ(shop.at("domain"), "shop");
  EXPECT_EQ(shop.at("file"), "shop.yaml");
  EXPECT_EQ(shop.at("line"), 1);
  const auto& client = shop.at("descriptors").at(0);
  EXPECT_EQ(client.at("key"), "client");
  EXPECT_EQ(client.at("value"), "mobile");
  EXPECT_FALSE(client.contains("rate_limit"));
  const auto& path = client.at("descriptors").at(0);
  EXPECT_EQ(path.at("value"), "/api/*");
  EXPECT_EQ(path.at("share_threshold"), true);
  const auto& api = path.at("rate_limit");
  EXPECT_EQ(api.at("full_key"), "shop.client_mobile.path_/api/*");
  EXPECT_EQ(api.at("name"), "api");
  EXPECT_EQ(api.at("replaces"), nlohmann::json::array({"wide"}));
  EXPECT_EQ(api.at("unit"), "second");
  EXPECT_EQ(api.at("requests_per_unit"), 5);
  EXPECT_EQ(api.at("algorithm"), "gcra");
  EXPECT_EQ(api.at("burst"), 2);
  EXPECT_EQ(api.at("file"), "shop.yaml");
  EXPECT_EQ(api.at("line"), 9);
  EXPECT_EQ(api.at("index"), 0);
  const auto& uploads = shop.at("descriptors").at(1).at("rate_limit");
  EXPECT_EQ(uploads.at("algorithm"), "concurrency");
  EXPECT_EQ(uploads.at("concurrency"), 3);
  EXPECT_FALSE(uploads.contains("unit"));
  EXPECT_EQ(shop.at("descriptors").at(2).at("rate_limit").at("unlimited"), true);
}

}  // namespace
