// Matching a request's descriptor to its rule (configuration::find), as envoyproxy/ratelimit matches: the examples of
// its documentation (nesting, most specific match, depth, unlimited, shadow mode, replaces, wildcards,
// share_threshold), the counter key (shared where share_threshold applies, unambiguous everywhere) and the metric key.
#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "serve/config/configuration.hpp"

namespace {

using admit::serve::configuration;
using admit::serve::descriptor_entry;
using admit::serve::rule_match;
using admit::serve::unit;

std::shared_ptr<const configuration> load(const std::string& text) {
  const std::vector<std::pair<std::string, std::string>> files{{"match.yaml", text}};
  return configuration::load(files);
}

std::optional<rule_match> find(const configuration& c, const std::string& domain,
                               std::initializer_list<descriptor_entry> entries) {
  const std::vector<descriptor_entry> v(entries);
  return c.find(domain, v);
}

// Example 1: one level, key and value.
TEST(ConfigurationFind, KeyAndValue) {
  const auto c = load(R"(domain: db
descriptors:
  - key: database
    value: orders
    rate_limit: {unit: second, requests_per_unit: 300}
  - key: database
    value: catalog
    rate_limit: {unit: second, requests_per_unit: 200}
)");
  const auto orders = find(*c, "db", {{"database", "orders"}});
  ASSERT_TRUE(orders);
  EXPECT_EQ(orders->rule->requests_per_unit, 300U);
  EXPECT_EQ(orders->rule->full_key, "db.database_orders");
  EXPECT_EQ(orders->metric_key, "db.database_orders");
  EXPECT_EQ(find(*c, "db", {{"database", "catalog"}})->rule->requests_per_unit, 200U);
  EXPECT_FALSE(find(*c, "db", {{"database", "users"}}));
  EXPECT_FALSE(find(*c, "db", {{"database", ""}}));
  EXPECT_FALSE(find(*c, "other", {{"database", "orders"}}));
  EXPECT_FALSE(find(*c, "db", {}));
}

// Example 2: nested descriptors; a node without rate_limit limits nothing; a key without value counts each value.
TEST(ConfigurationFind, NestedDescriptors) {
  const auto c = load(R"(domain: sms
descriptors:
  - key: kind
    value: promotion
    descriptors:
      - key: phone
        rate_limit: {unit: day, requests_per_unit: 3}
  - key: phone
    rate_limit: {unit: day, requests_per_unit: 50}
)");
  const auto promo_a = find(*c, "sms", {{"kind", "promotion"}, {"phone", "555-0101"}});
  const auto promo_b = find(*c, "sms", {{"kind", "promotion"}, {"phone", "555-0102"}});
  ASSERT_TRUE(promo_a && promo_b);
  EXPECT_EQ(promo_a->rule, promo_b->rule);
  EXPECT_EQ(promo_a->rule->requests_per_unit, 3U);
  EXPECT_EQ(promo_a->rule->full_key, "sms.kind_promotion.phone");
  EXPECT_NE(promo_a->counter_key, promo_b->counter_key);  // each number has its own counter
  EXPECT_EQ(promo_a->metric_key, "sms.kind_promotion.phone");
  const auto any = find(*c, "sms", {{"phone", "555-0101"}});
  ASSERT_TRUE(any);
  EXPECT_EQ(any->rule->requests_per_unit, 50U);
  EXPECT_NE(any->counter_key, promo_a->counter_key);
  EXPECT_FALSE(find(*c, "sms", {{"kind", "promotion"}}));  // the outer node has no rule
  EXPECT_FALSE(find(*c, "sms", {{"kind", "receipt"}, {"phone", "555-0101"}}));
}

// Example 3: key and value is tried before the key alone.
TEST(ConfigurationFind, TheMostSpecificMatch) {
  const auto c = load(R"(domain: edge
descriptors:
  - key: client_ip
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: client_ip
    value: 203.0.113.9
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: client_ip
    value: 192.0.2.1
)");
  EXPECT_EQ(find(*c, "edge", {{"client_ip", "198.51.100.7"}})->rule->requests_per_unit, 10U);
  EXPECT_EQ(find(*c, "edge", {{"client_ip", "198.51.100.7"}})->metric_key, "edge.client_ip");
  const auto blocked = find(*c, "edge", {{"client_ip", "203.0.113.9"}});
  ASSERT_TRUE(blocked);
  EXPECT_EQ(blocked->rule->requests_per_unit, 0U);
  // A descriptor with a value and no rate_limit: matched, so the key-only rule does not apply — not limited.
  EXPECT_FALSE(find(*c, "edge", {{"client_ip", "192.0.2.1"}}));
  // An entry without a value falls to the key-only descriptor.
  EXPECT_EQ(find(*c, "edge", {{"client_ip", ""}})->rule->requests_per_unit, 10U);
}

// Example 4: a request matches at its own depth only.
TEST(ConfigurationFind, TheRequestsDepthMustBeTheTreesDepth) {
  const auto shallow = load(R"(domain: depth
descriptors:
  - key: key
    value: value
    rate_limit: {unit: second, requests_per_unit: 300}
)");
  EXPECT_FALSE(find(*shallow, "depth", {{"key", "value"}, {"subkey", "subvalue"}}));
  EXPECT_TRUE(find(*shallow, "depth", {{"key", "value"}}));
  const auto deep = load(R"(domain: depth
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit: {unit: second, requests_per_unit: 300}
)");
  const auto m = find(*deep, "depth", {{"key", "value"}, {"subkey", "subvalue"}});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->rule->full_key, "depth.key_value.subkey");
  EXPECT_FALSE(find(*deep, "depth", {{"key", "value"}}));
  EXPECT_FALSE(find(*deep, "depth", {{"key", "value"}, {"subkey", "x"}, {"third", "y"}}));
}

// Example 5: unlimited rules are found (the engine answers OK without counting).
TEST(ConfigurationFind, Unlimited) {
  const auto c = load(R"(domain: internal
descriptors:
  - key: directory
    rate_limit: {unlimited: true}
  - key: blob_store
    rate_limit: {unit: minute, requests_per_unit: 100}
)");
  const auto directory = find(*c, "internal", {{"directory", "any"}});
  ASSERT_TRUE(directory);
  EXPECT_TRUE(directory->rule->unlimited);
  const auto blob = find(*c, "internal", {{"blob_store", "x"}});
  ASSERT_TRUE(blob);
  EXPECT_FALSE(blob->rule->unlimited);
  EXPECT_EQ(blob->rule->per, unit::minute);
}

// Example 6: shadow mode is the rule's.
TEST(ConfigurationFind, ShadowMode) {
  const auto c = load(R"(domain: soft
descriptors:
  - key: service
    descriptors:
      - key: user
        value: alice
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: user
        value: bob
        rate_limit: {unit: second, requests_per_unit: 20}
)");
  const auto alice = find(*c, "soft", {{"service", "auth"}, {"user", "alice"}});
  ASSERT_TRUE(alice);
  EXPECT_TRUE(alice->rule->shadow_mode);
  EXPECT_EQ(alice->rule->requests_per_unit, 10U);
  const auto bob = find(*c, "soft", {{"service", "auth"}, {"user", "bob"}});
  ASSERT_TRUE(bob);
  EXPECT_FALSE(bob->rule->shadow_mode);
  EXPECT_EQ(bob->rule->requests_per_unit, 20U);
  EXPECT_FALSE(find(*c, "soft", {{"service", "auth"}, {"user", "carol"}}));
}

// Example 7: replaces is carried by the rule found (the engine drops the replaced rule when both match).
TEST(ConfigurationFind, Replaces) {
  const auto c = load(R"(domain: contracts
descriptors:
  - key: tier
    value: gold
    descriptors:
      - key: user
        value: dana
        rate_limit: {name: gold_dana, unit: second, requests_per_unit: 5}
  - key: region
    value: eu
    descriptors:
      - key: user
        value: dana
        rate_limit:
          replaces: [{name: gold_dana}]
          unit: second
          requests_per_unit: 10
)");
  const auto gold = find(*c, "contracts", {{"tier", "gold"}, {"user", "dana"}});
  const auto eu = find(*c, "contracts", {{"region", "eu"}, {"user", "dana"}});
  ASSERT_TRUE(gold && eu);
  EXPECT_EQ(gold->rule->name, "gold_dana");
  EXPECT_TRUE(gold->rule->replaces.empty());
  EXPECT_EQ(eu->rule->replaces, std::vector<std::string>{"gold_dana"});
  EXPECT_EQ(eu->rule->requests_per_unit, 10U);
}

// Example 9: wildcards at the end, in the middle, several; tried after the exact value and before the key alone.
TEST(ConfigurationFind, Wildcards) {
  const auto c = load(R"(domain: wild
descriptors:
  - key: tenant
    value: team-*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: tenant
    value: team-red
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 99}
  - key: path
    value: /v1/*/items
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: route
    value: /a/*/b/*/c
    rate_limit: {unit: minute, requests_per_unit: 40}
  - key: exact
    value: abc
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: parent
    value: p
    descriptors:
      - key: child
        value: x*
        rate_limit: {unit: minute, requests_per_unit: 60}
)");
  const auto blue = find(*c, "wild", {{"tenant", "team-blue"}});
  const auto green = find(*c, "wild", {{"tenant", "team-green"}});
  ASSERT_TRUE(blue && green);
  EXPECT_EQ(blue->rule->requests_per_unit, 20U);
  EXPECT_EQ(blue->rule, green->rule);
  EXPECT_NE(blue->counter_key, green->counter_key);  // no share_threshold: a counter per value
  EXPECT_EQ(blue->rule->full_key, "wild.tenant_team-*");
  EXPECT_EQ(blue->metric_key, "wild.tenant_team-*");
  EXPECT_EQ(find(*c, "wild", {{"tenant", "team-"}})->rule->requests_per_unit, 20U);    // `*` matches nothing too
  EXPECT_EQ(find(*c, "wild", {{"tenant", "team-red"}})->rule->requests_per_unit, 1U);  // exact first
  EXPECT_EQ(find(*c, "wild", {{"tenant", "solo"}})->rule->requests_per_unit, 99U);     // then key alone
  EXPECT_EQ(find(*c, "wild", {{"path", "/v1/42/items"}})->rule->requests_per_unit, 30U);
  EXPECT_EQ(find(*c, "wild", {{"path", "/v1//items"}})->rule->requests_per_unit, 30U);
  EXPECT_FALSE(find(*c, "wild", {{"path", "/v1/42/other"}}));
  EXPECT_FALSE(find(*c, "wild", {{"path", "/v1/items"}}));  // prefix and suffix may not overlap
  EXPECT_EQ(find(*c, "wild", {{"route", "/a/1/b/2/c"}})->rule->requests_per_unit, 40U);
  EXPECT_FALSE(find(*c, "wild", {{"route", "/a/1/x/2/c"}}));
  EXPECT_FALSE(find(*c, "wild", {{"exact", "abcd"}}));  // a value without `*` is not a prefix
  EXPECT_EQ(find(*c, "wild", {{"parent", "p"}, {"child", "xyz"}})->metric_key, "wild.parent_p.child_x*");
}

TEST(ConfigurationFind, TheFirstWildcardInFileOrderWins) {
  const auto c = load(R"(domain: order
descriptors:
  - key: k
    value: a*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: ab*
    rate_limit: {unit: second, requests_per_unit: 2}
)");
  EXPECT_EQ(find(*c, "order", {{"k", "abc"}})->rule->requests_per_unit, 1U);
}

// Example 11: share_threshold makes every matching value count on one counter.
TEST(ConfigurationFind, ShareThreshold) {
  const auto c = load(R"(domain: files
descriptors:
  - key: file
    value: docs/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: file
    value: docs/readme
    rate_limit: {unit: hour, requests_per_unit: 99}
  - key: file_apart
    value: docs/*
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: tenant
    value: t-*
    share_threshold: true
    descriptors:
      - key: file
        value: f*
        share_threshold: true
        descriptors:
          - key: op
            rate_limit: {unit: minute, requests_per_unit: 5}
      - key: user
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 7}
)");
  const auto a = find(*c, "files", {{"file", "docs/a.pdf"}});
  const auto b = find(*c, "files", {{"file", "docs/b.csv"}});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->counter_key, b->counter_key);
  EXPECT_EQ(a->counter_key, "5:files4:file6:docs/*");
  EXPECT_EQ(a->metric_key, "files.file_docs/*");
  // The exact value still wins, with its own counter.
  const auto readme = find(*c, "files", {{"file", "docs/readme"}});
  EXPECT_EQ(readme->rule->requests_per_unit, 99U);
  EXPECT_EQ(readme->counter_key, "5:files4:file11:docs/readme");
  // Without share_threshold: a counter per value.
  EXPECT_NE(find(*c, "files", {{"file_apart", "docs/a"}})->counter_key,
            find(*c, "files", {{"file_apart", "docs/b"}})->counter_key);
  // Nested: each level that matched a share_threshold wildcard gives its pattern; the others their values.
  const auto n1 = find(*c, "files", {{"tenant", "t-1"}, {"file", "f1"}, {"op", "read"}});
  const auto n2 = find(*c, "files", {{"tenant", "t-2"}, {"file", "f2"}, {"op", "read"}});
  const auto n3 = find(*c, "files", {{"tenant", "t-2"}, {"file", "f2"}, {"op", "write"}});
  ASSERT_TRUE(n1 && n2 && n3);
  EXPECT_EQ(n1->counter_key, n2->counter_key);
  EXPECT_NE(n1->counter_key, n3->counter_key);
  EXPECT_EQ(n1->metric_key, "files.tenant_t-*.file_f*.op");
  // detailed_metric with share_threshold: the pattern where shared, the request's values elsewhere.
  const auto d = find(*c, "files", {{"tenant", "t-9"}, {"user", "eve"}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->metric_key, "files.tenant_t-*.user_eve");
}

TEST(ConfigurationFind, MetricKeysWithDetailedMetricAndValueToMetric) {
  const auto c = load(R"(domain: m
descriptors:
  - key: caller
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        value_to_metric: true
        descriptors:
          - key: subject
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
)");
  EXPECT_EQ(find(*c, "m", {{"caller", "svc-a"}})->metric_key, "m.caller_svc-a");
  EXPECT_EQ(find(*c, "m", {{"caller", "svc-a"}})->rule->full_key, "m.caller");
  EXPECT_EQ(find(*c, "m", {{"route", "api"}, {"method", "GET"}, {"subject", "42"}})->metric_key,
            "m.route_api.method_GET.subject");
  EXPECT_EQ(find(*c, "m", {{"user", "ann"}, {"action", "readfile"}, {"resource", "docs"}})->metric_key,
            "m.user_ann.action_readfile.resource");
}

TEST(ConfigurationFind, CounterKeysAreUniqueAcrossDomainsAndUnambiguous) {
  const auto c = load(R"(domain: a
descriptors:
  - key: b_c
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    descriptors:
      - key: c
        rate_limit: {unit: second, requests_per_unit: 1}
)");
  const std::vector<std::pair<std::string, std::string>> more{
      {"a.yaml", "domain: a\ndescriptors:\n  - {key: b_c, rate_limit: {unit: second, requests_per_unit: 1}}\n"},
      {"ab.yaml", "domain: a_b\ndescriptors:\n  - {key: c, rate_limit: {unit: second, requests_per_unit: 1}}\n"},
      {"x.yaml", "domain: '1:a'\ndescriptors:\n  - {key: c, rate_limit: {unit: second, requests_per_unit: 1}}\n"}};
  const auto two = configuration::load(more);
  std::set<std::string> keys;
  keys.insert(find(*two, "a", {{"b_c", "d"}})->counter_key);
  keys.insert(find(*two, "a_b", {{"c", "d"}})->counter_key);
  keys.insert(find(*two, "1:a", {{"c", "d"}})->counter_key);
  keys.insert(find(*c, "a", {{"b", "c_d"}, {"c", ""}})->counter_key);
  keys.insert(find(*c, "a", {{"b", "c_"}, {"c", "d"}})->counter_key);
  keys.insert(find(*c, "a", {{"b", "c_d"}, {"c", "e"}})->counter_key);
  keys.insert(find(*c, "a", {{"b", "c_d:e"}, {"c", ""}})->counter_key);
  EXPECT_EQ(keys.size(), 7U);
  EXPECT_EQ(find(*two, "a_b", {{"c", "d"}})->counter_key, "3:a_b1:c1:d");
}

// As envoyproxy/ratelimit, a descriptor is known by the text `key_value`: the entry (b, c) finds a descriptor whose key
// is "b_c" and has no value (and such a pair of descriptors in one list is a duplicate).
TEST(ConfigurationFind, TheCompositeKeyIsMatchedAsText) {
  const auto c = load(R"(domain: text
descriptors:
  - key: b_c
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  const auto m = find(*c, "text", {{"b", "c"}});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->rule->full_key, "text.b_c");
  EXPECT_THROW((void)load("domain: d\ndescriptors:\n  - key: b_c\n  - key: b\n    value: c\n"),
               admit::serve::config_error);
}

TEST(ConfigurationFind, ALaterRequestEntryAfterALeafMatchesNothing) {
  const auto c = load(R"(domain: leaf
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  EXPECT_TRUE(find(*c, "leaf", {{"a", "1"}}));
  EXPECT_FALSE(find(*c, "leaf", {{"a", "1"}, {"a", "1"}}));
}

TEST(ConfigurationFind, RulesAreThoseOfTheConfiguration) {
  const auto c = load(R"(domain: own
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    rate_limit: {concurrency: 2}
)");
  const auto b = find(*c, "own", {{"b", "x"}});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->rule, &c->rules()[1]);
  EXPECT_EQ(b->rule->index, 1U);
  EXPECT_EQ(b->rule->concurrency, 2U);
}

}  // namespace
