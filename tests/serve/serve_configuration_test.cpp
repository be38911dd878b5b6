// Loading `admit serve`'s configuration (serve/config/configuration.hpp): envoyproxy/ratelimit's YAML format accepted
// as is, refused where envoyproxy/ratelimit refuses it (each refusal with its file, line and reason), admit's
// extensions (algorithm, burst, concurrency) and their checks, and the JSON of GET /rules.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/config/configuration.hpp"

namespace {

using admit::serve::algorithm;
using admit::serve::config_error;
using admit::serve::configuration;
using admit::serve::rate_limit_rule;
using admit::serve::unit;

using file_list = std::vector<std::pair<std::string, std::string>>;

std::shared_ptr<const configuration> load_one(const std::string& text, const std::string& name = "one.yaml") {
  const file_list files{{name, text}};
  return configuration::load(files);
}

const rate_limit_rule* rule_named(const configuration& c, const std::string& full_key) {
  for (const rate_limit_rule& r : c.rules())
    if (r.full_key == full_key) return &r;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------------
// Refusals: every way of being wrong that envoyproxy/ratelimit names, and admit's own for its extensions.

struct refusal {
  const char* name;
  const char* yaml;
  int line;
  const char* message;  // a part of the message that must be there
};

// clang-format off
const refusal refusals[] = {
    // envoyproxy/ratelimit's own refusals (its test/config files), with YAML of our own.
    {"unit_unknown", R"(domain: shop
descriptors:
  - key: client
    rate_limit:
      unit: fortnight
      requests_per_unit: 3
)", 5, R"(invalid rate limit unit "fortnight"; use second, minute, hour, day, week, month or year)"},
    {"unit_named_unknown", "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: unknown\n", 5,
     R"(invalid rate limit unit "unknown")"},
    {"unit_missing", "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      requests_per_unit: 3\n", 4,
     "rate_limit has no unit; use second, minute, hour, day, week, month or year (or unlimited: true)"},
    {"yaml_unterminated_quote", "domain: shop\ndescriptors:\n  - key: 'client\n", 3,
     "the file is not valid YAML: the quoted scalar that starts here is never closed (add ')"},
    {"yaml_unterminated_double_quote", "domain: \"sh\\\"op\ndescriptors:\n", 1, "is never closed (add \")"},
    {"yaml_three_quotes", "'''\n", 1, "the file is not valid YAML"},
    {"yaml_bad_flow", "domain: shop\ndescriptors: [ {key: a}\nother: 1\n", 3, "the file is not valid YAML"},
    {"duplicate_descriptor", R"(domain: shop
descriptors:
  - key: client
    value: mobile
  - key: other
  - key: client
    value: mobile
)", 6, R"(duplicate descriptor "shop.client_mobile" (also at line 3))"},
    {"duplicate_nested_descriptor", R"(domain: shop
descriptors:
  - key: client
    descriptors:
      - key: path
      - key: path
)", 6, R"(duplicate descriptor "shop.client.path")"},
    {"no_domain", "descriptors:\n  - key: a\n", 1, "the file has no domain; add domain: NAME"},
    {"null_domain", "# a comment\ndomain:\ndescriptors:\n", 2, "the file has no domain"},
    {"empty_file", "", 0, "the file has no domain"},
    {"empty_key", "domain: shop\ndescriptors:\n  - value: mobile\n", 3, "descriptor has an empty key"},
    {"null_key", "domain: shop\ndescriptors:\n  - key:\n    value: mobile\n", 3, "descriptor has an empty key"},
    {"misspelled_rate_limit", R"(domain: shop
descriptors:
  - key: client
    ratelimit:
      unit: day
)", 4, R"(unknown key "ratelimit"; use key, value, rate_limit, descriptors)"},
    {"misspelled_requests_per_unit", R"(domain: shop
descriptors:
  - key: client
    rate_limit:
      unit: day
      request_per_unit: 5
)", 6, R"(unknown key "request_per_unit"; use unit, requests_per_unit)"},
    {"misspelled_root_key", "domain: shop\ndescriptor:\n  - key: a\n", 2, R"(unknown key "descriptor"; use domain, descriptors)"},
    {"list_of_strings", "domain: shop\ndescriptors:\n  - key: a\n  - just-a-name\n", 4,
     R"("descriptors" lists the string "just-a-name"; each item of a list is a map)"},
    {"replaces_list_of_strings", R"(domain: shop
descriptors:
  - key: a
    rate_limit:
      unit: second
      replaces: [other]
)", 6, R"("replaces" lists the string "other"; each item of a list is a map, e.g. - name: NAME)"},
    {"number_as_key", "1.5: shop\ndomain: shop\n", 1, "key 1.5 is not a string"},
    {"integer_as_key", "domain: shop\ndescriptors:\n  - key: a\n    7: b\n", 4, "key 7 is not a string"},
    {"boolean_as_key", "domain: shop\nyes: b\n", 2, "key yes is not a string"},
    {"replaces_empty_name", R"(domain: shop
descriptors:
  - key: a
    rate_limit:
      name: mine
      unit: second
      requests_per_unit: 1
      replaces:
        - name: theirs
        - name:
)", 10, "replaces has an entry with an empty name"},
    {"replaces_itself", R"(domain: shop
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit:
          name: mine
          replaces:
            - name: mine
          unit: second
          requests_per_unit: 1
)", 9, R"(rate_limit "mine" replaces itself)"},
    {"unlimited_with_unit", R"(domain: shop
descriptors:
  - key: a
    rate_limit:
      unlimited: true
      unit: Hour
      requests_per_unit: 4
)", 6, R"(unlimited: true takes no unit; remove unit "Hour" or unlimited)"},
    {"share_threshold_without_wildcard", R"(domain: shop
descriptors:
  - key: path
    value: /cart
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
)", 5, R"(share_threshold applies to wildcard values only (with '*'), and "path_/cart" has none)"},
    // Types, as envoyproxy/ratelimit's YAML decoder checks them.
    {"negative_requests", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
     6, R"("requests_per_unit" must be a whole number from 0 to 4294967295, not the number -1)"},
    {"float_requests", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 2.5\n",
     6, R"("requests_per_unit" is the number 2.5, which the format does not take)"},
    {"quoted_requests", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: \"5\"\n",
     6, R"("requests_per_unit" must be a whole number from 0 to 4294967295, not the string "5")"},
    {"too_many_requests", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 4294967296\n",
     6, "must be a whole number from 0 to 4294967295"},
    {"huge_value", "domain: s\ndescriptors:\n  - key: id\n    value: 18446744073709551615\n", 4,
     R"("value" is the number 18446744073709551615, larger than the format takes)"},
    {"null_list_item", "domain: s\ndescriptors:\n  -\n  - key: b\n", 3, R"("descriptors" lists null)"},
    {"descriptors_is_a_string", "domain: s\ndescriptors: ''\n", 2,
     R"("descriptors" must be a list of maps, not the string "")"},
    {"float_value", "domain: s\ndescriptors:\n  - key: version\n    value: 1.5\n", 4, R"("value" is the number 1.5)"},
    {"not_a_boolean", "domain: s\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n", 4,
     R"("shadow_mode" must be true or false, not the string "maybe")"},
    {"quota_mode_not_boolean", "domain: s\ndescriptors:\n  - key: a\n    quota_mode: 3\n", 4, R"("quota_mode" must be true or false)"},
    {"root_is_a_list", "- domain: s\n", 1, "the file must be a map with domain and descriptors, not a list"},
    {"descriptors_is_a_map", "domain: s\ndescriptors:\n  key: a\n", 3, R"("descriptors" must be a list of maps, not a map)"},
    {"rate_limit_is_a_string", "domain: s\ndescriptors:\n  - key: a\n    rate_limit: fast\n", 4, R"("rate_limit" must be a map)"},
    {"domain_is_a_list", "domain: [a, b]\n", 1, R"("domain" lists the string "a")"},
    {"key_is_a_map", "domain: s\ndescriptors:\n  - key: {name: a}\n", 3, R"("key" must be a string, not a map)"},
    {"value_is_a_list", "domain: s\ndescriptors:\n  - key: a\n    value: [{key: b}]\n", 4, R"("value" must be a string, not a list)"},
    {"metadata_not_a_map", "domain: s\ndescriptors:\n  - key: a\n    metadata: owner\n", 4, R"("metadata" must be a map)"},
    // admit's extensions.
    {"algorithm_unknown", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: leaky\n",
     7, R"(invalid algorithm "leaky"; use fixed_window, sliding_window, gcra or token_bucket)"},
    {"algorithm_concurrency_spelled", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: concurrency\n",
     7, "concurrency: N instead of unit and requests_per_unit"},
    {"burst_with_fixed_window", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      burst: 10\n",
     7, "burst applies to algorithm gcra or token_bucket, not fixed_window"},
    {"burst_with_sliding_window", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: sliding_window\n      burst: 10\n",
     8, "burst applies to algorithm gcra or token_bucket, not sliding_window"},
    {"burst_zero", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: gcra\n      burst: 0\n",
     8, "burst must be at least 1"},
    {"burst_outside_rate_limit", "domain: s\ndescriptors:\n  - key: a\n    burst: 3\n    rate_limit:\n      unit: second\n", 4,
     R"(key "burst" belongs inside rate_limit)"},
    {"algorithm_at_root", "domain: s\nalgorithm: gcra\n", 2, R"(key "algorithm" belongs inside rate_limit)"},
    {"algorithm_with_unlimited", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      algorithm: gcra\n",
     6, "an unlimited rate_limit counts nothing; remove algorithm or unlimited"},
    {"gcra_without_rate", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      algorithm: gcra\n",
     4, "algorithm gcra needs requests_per_unit of at least 1"},
    {"concurrency_with_unit", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      concurrency: 4\n      unit: second\n",
     6, "concurrency: N is a limit of its own and takes no unit; remove unit or concurrency"},
    {"concurrency_with_requests", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 4\n      concurrency: 4\n",
     5, "takes no requests_per_unit"},
    {"concurrency_with_algorithm", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      concurrency: 4\n      algorithm: gcra\n",
     6, "takes no algorithm"},
    {"concurrency_with_unlimited", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      concurrency: 4\n      unlimited: true\n",
     6, "takes no unlimited"},
    {"concurrency_zero", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      concurrency: 0\n", 5,
     "concurrency must be at least 1"},
    {"concurrency_negative", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      concurrency: -2\n", 5,
     R"("concurrency" must be a whole number)"},
};
// clang-format on

void PrintTo(const refusal& r, std::ostream* os) { *os << r.name; }

class ConfigurationRefuses : public testing::TestWithParam<refusal> {};

TEST_P(ConfigurationRefuses, NamingFileLineAndReason) {
  const refusal& r = GetParam();
  try {
    (void)load_one(r.yaml, "rules.yaml");
    FAIL() << "loaded:\n" << r.yaml;
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), "rules.yaml");
    EXPECT_EQ(e.line(), r.line) << e.what();
    EXPECT_NE(e.message().find(r.message), std::string::npos) << "message: " << e.message();
    const std::string prefix = r.line > 0 ? "rules.yaml:" + std::to_string(r.line) + ": " : "rules.yaml: ";
    EXPECT_EQ(std::string(e.what()), prefix + e.message());
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ConfigurationRefuses, testing::ValuesIn(refusals),
                         [](const testing::TestParamInfo<refusal>& p) { return std::string(p.param.name); });

TEST(ConfigurationRefuses, ADomainDefinedByTwoFiles) {
  const file_list files{{"a.yaml", "domain: shop\ndescriptors:\n  - key: a\n"},
                        {"b.yaml", "# the same domain again\n\ndomain: shop\n"}};
  try {
    (void)configuration::load(files);
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), "b.yaml");
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.message(),
              R"(duplicate domain "shop": a.yaml (line 1) has it already; a domain is defined by one file)");
  }
}

TEST(ConfigurationRefuses, IsAnInvalidArgument) {
  EXPECT_THROW((void)load_one("domain: s\ndescriptors:\n  - value: x\n"), std::invalid_argument);
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
