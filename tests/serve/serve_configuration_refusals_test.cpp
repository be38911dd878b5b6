// `admit serve`'s configuration refused (serve/config/configuration.hpp): every way of being wrong that
// envoyproxy/ratelimit names, refused where it refuses, and admit's own refusals for its extensions (algorithm, burst,
// concurrency, over_limit_hits) — each with its file, line and reason.
#include <gtest/gtest.h>

#include <ostream>
#include <stdexcept>
#include <string>

#include "configuration_testing.hpp"
#include "serve/config/configuration.hpp"

namespace {

using admit::serve::config_error;
using admit::serve::configuration;
using admit::serve::testing::file_list;
using admit::serve::testing::load_one;

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
     6, R"("requests_per_unit" is the number 2.5; it must be a whole number)"},  // (not "quote it")
    {"huge_requests", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 99999999999999999999\n",
     6, R"("requests_per_unit" is the number 99999999999999999999; it must be a whole number from 0 to 4294967295)"},
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
    {"domain_is_a_list", "domain: [a, b]\n", 1, R"("domain" must be one value, not a list)"},
    {"key_is_a_map", "domain: s\ndescriptors:\n  - key: {name: a}\n", 3, R"("key" must be a string, not a map)"},
    {"value_is_a_list", "domain: s\ndescriptors:\n  - key: a\n    value: [{key: b}]\n", 4, R"("value" must be one value, not a list)"},
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
    {"over_limit_hits_unknown", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      over_limit_hits: charge\n",
     7, R"(invalid over_limit_hits "charge"; use count (a refused hit is charged all the same) or drop (it is not))"},
    {"over_limit_hits_count_sliding", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: sliding_window\n      over_limit_hits: count\n",
     8, "over_limit_hits: count applies to fixed_window, token_bucket and gcra"},
    {"over_limit_hits_unlimited", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      over_limit_hits: drop\n",
     6, "an unlimited rate_limit counts nothing; remove over_limit_hits or unlimited"},
    {"over_limit_hits_concurrency", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      concurrency: 2\n      over_limit_hits: count\n",
     6, "takes no over_limit_hits"},
    {"prefetch_zero", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      prefetch: 0\n",
     7, "prefetch must be at least 1 (1: every hit asks Redis)"},
    {"prefetch_above_the_limit", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      prefetch: 6\n",
     7, "prefetch 6 exceeds the limit 5: a prefetch takes at most what the limiter holds"},
    {"prefetch_above_the_burst", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 50\n      algorithm: gcra\n      burst: 4\n      prefetch: 5\n",
     9, "prefetch 5 exceeds the burst 4"},
    {"prefetch_concurrency", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      concurrency: 2\n      prefetch: 2\n",
     6, "takes no prefetch"},
    {"prefetch_unlimited", "domain: s\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      prefetch: 2\n",
     6, "remove prefetch or unlimited"},
    {"over_limit_hits_outside_rate_limit", "domain: s\ndescriptors:\n  - key: a\n    over_limit_hits: count\n", 4,
     R"(key "over_limit_hits" belongs inside rate_limit)"},
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

}  // namespace
