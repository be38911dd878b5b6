// Tests of serve/engine/service.hpp on the in-process backend, with configurations loaded from inline YAML: the
// answers of every example of envoyproxy/ratelimit's README (matching, nesting, unlimited, shadow mode, replaces,
// detailed metrics, wildcards, share_threshold), request validation, hits_addend at both levels, limit overrides,
// the rate-limit headers, the global shadow mode, the failure policy (with a backend that fails), concurrency leases,
// reloads, and the metrics the decisions leave. Times are explicit.
#include "serve/engine/service.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "serve/engine/in_process_backend.hpp"
#include "serve/engine/serve_metrics.hpp"

namespace admit::serve {
namespace {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;

// A whole day of Unix time (so a whole hour, minute and second): windows of those units start here.
constexpr std::int64_t base_s = 1'699'920'000;
static_assert(base_s % 86400 == 0);
sys::time_point at(std::chrono::nanoseconds t) {
  return sys::time_point{std::chrono::duration_cast<sys::duration>(std::chrono::seconds{base_s} + t)};
}

std::shared_ptr<const configuration> yaml(std::string text) {
  std::vector<std::pair<std::string, std::string>> files{{"config.yaml", std::move(text)}};
  return configuration::load(files);
}

rls_descriptor desc(std::vector<descriptor_entry> entries) { return {std::move(entries), std::nullopt, std::nullopt}; }

rls_request req(std::string domain, std::vector<rls_descriptor> ds, std::uint32_t hits = 0) {
  return {std::move(domain), std::move(ds), hits};
}

struct harness {
  explicit harness(const std::string& text, service_options o = {}, in_process_options b = {})
      : svc(std::make_unique<in_process_backend>(b), yaml(text), o) {}
  rls_result ask(rls_request r, std::chrono::nanoseconds t = 0s) {
    std::optional<rls_result> out;
    svc.should_rate_limit_at(std::move(r), at(t), [&](rls_result x) { out = std::move(x); });
    EXPECT_TRUE(out.has_value());  // the in-process backend answers inline
    return out.value_or(rls_result{});
  }
  rls_response ok(rls_request r, std::chrono::nanoseconds t = 0s) {
    rls_result x = ask(std::move(r), t);
    EXPECT_FALSE(x.failure) << x.failure->message;
    return x.response;
  }
  service svc;
};

const std::string example1 = R"(domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
)";

TEST(ServiceValidation, RefusesAnEmptyDomainOrDescriptorListOrAnOverrideWithoutUnit) {
  harness h{example1};
  rls_result r = h.ask(req("", {desc({{"database", "users"}})}));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->message, "rate limit domain must not be empty");
  r = h.ask(req("mongo_cps", {}));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->message, "rate limit descriptor list must not be empty");
  rls_descriptor d = desc({{"database", "users"}});
  d.limit = limit_override{5, unit::unknown};
  r = h.ask(req("mongo_cps", {d}));
  ASSERT_TRUE(r.failure);
  EXPECT_NE(r.failure->message.find("unit"), std::string::npos);
  EXPECT_NE(h.svc.metrics_text().find("admit_serve_requests_total{code=\"invalid\"} 3\n"), std::string::npos);
}

TEST(ServiceReadmeExamples, Example1TwoValuesOfOneKeyEachWithItsLimit) {
  harness h{example1};
  for (int i = 0; i < 500; ++i) {
    const rls_response r = h.ok(req("mongo_cps", {desc({{"database", "users"}})}), 100ms);
    ASSERT_EQ(r.overall_code, rls_code::ok) << i;
  }
  rls_response r = h.ok(req("mongo_cps", {desc({{"database", "users"}})}), 900ms);
  EXPECT_EQ(r.overall_code, rls_code::over_limit);
  ASSERT_EQ(r.statuses.size(), 1u);
  EXPECT_EQ(r.statuses[0].code, rls_code::over_limit);
  ASSERT_TRUE(r.statuses[0].current_limit);
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 500u);
  EXPECT_EQ(r.statuses[0].current_limit->per, unit::second);
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
  EXPECT_EQ(r.statuses[0].duration_until_reset, 1s);
  r = h.ok(req("mongo_cps", {desc({{"database", "default"}})}), 900ms);
  EXPECT_EQ(r.overall_code, rls_code::ok);
  EXPECT_EQ(r.statuses[0].limit_remaining, 499u);
  // no rule for this value: not limited
  r = h.ok(req("mongo_cps", {desc({{"database", "other"}})}), 900ms);
  EXPECT_EQ(r.overall_code, rls_code::ok);
  EXPECT_FALSE(r.statuses[0].current_limit);
  EXPECT_FALSE(r.statuses[0].duration_until_reset);
  // the next second: a new window
  EXPECT_EQ(h.ok(req("mongo_cps", {desc({{"database", "users"}})}), 1s).overall_code, rls_code::ok);
}

TEST(ServiceReadmeExamples, Example2NestedDescriptorsAndSeveralDescriptorsInOneRequest) {
  harness h{R"(domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
)"};
  const auto both = [](const std::string& number) {
    return req("messaging",
               {desc({{"message_type", "marketing"}, {"to_number", number}}), desc({{"to_number", number}})});
  };
  for (int i = 0; i < 5; ++i) EXPECT_EQ(h.ok(both("2061111111"), 1h).overall_code, rls_code::ok);
  const rls_response r = h.ok(both("2061111111"), 2h);
  EXPECT_EQ(r.overall_code, rls_code::over_limit);
  EXPECT_EQ(r.statuses[0].code, rls_code::over_limit);
  EXPECT_EQ(r.statuses[1].code, rls_code::ok);
  EXPECT_EQ(r.statuses[1].limit_remaining, 94u);
  EXPECT_EQ(r.statuses[0].duration_until_reset, 22h);  // a day window from midnight UTC
  // another number has its own 5
  EXPECT_EQ(h.ok(both("2062222222"), 2h).overall_code, rls_code::ok);
}

TEST(ServiceReadmeExamples, Example3TheMostSpecificMatchWins) {
  harness h{R"(domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
)"};
  const rls_response blocked = h.ok(req("edge_proxy_per_ip", {desc({{"remote_address", "50.0.0.5"}})}));
  EXPECT_EQ(blocked.overall_code, rls_code::over_limit);
  EXPECT_EQ(blocked.statuses[0].current_limit->requests_per_unit, 0u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(h.ok(req("edge_proxy_per_ip", {desc({{"remote_address", "50.0.0.1"}})})).overall_code, rls_code::ok);
  }
  EXPECT_EQ(h.ok(req("edge_proxy_per_ip", {desc({{"remote_address", "50.0.0.1"}})})).overall_code,
            rls_code::over_limit);
}

TEST(ServiceReadmeExamples, Example4ARequestMatchesOnlyAtItsOwnDepth) {
  const auto two = req("example4", {desc({{"key", "value"}, {"subkey", "subvalue"}})});
  harness flat{R"(domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
)"};
  EXPECT_FALSE(flat.ok(two).statuses[0].current_limit);
  harness nested{R"(domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
)"};
  const rls_response r = nested.ok(two);
  ASSERT_TRUE(r.statuses[0].current_limit);
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 300u);
  EXPECT_EQ(r.statuses[0].limit_remaining, 299u);
}

const std::string example5 = R"(domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
)";

TEST(ServiceReadmeExamples, Example5UnlimitedIsOkWithMaxRemainingAndCountsNothing) {
  harness h{example5};
  for (int i = 0; i < 3; ++i) {
    const rls_response r = h.ok(req("internal", {desc({{"ldap", "x"}}), desc({{"azure", "y"}})}));
    EXPECT_EQ(r.overall_code, rls_code::ok);
    EXPECT_EQ(r.statuses[0].code, rls_code::ok);
    EXPECT_EQ(r.statuses[0].limit_remaining, 4294967295u);
    EXPECT_FALSE(r.statuses[0].current_limit);
    EXPECT_EQ(r.statuses[1].limit_remaining, 99u - static_cast<std::uint32_t>(i));
  }
  EXPECT_EQ(h.svc.metrics_text().find("internal.ldap"), std::string::npos);  // not passed to the counters
}

const std::string example6 = R"(domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
)";

TEST(ServiceReadmeExamples, Example6ShadowModeAnswersOkAndCountsTheBreach) {
  harness h{example6};
  const auto user = [](const std::string& u) {
    return req("example6", {desc({{"service", "auth-service"}, {"user", u}})});
  };
  for (int i = 0; i < 15; ++i) {
    const rls_response r = h.ok(user("user-a"));
    EXPECT_EQ(r.overall_code, rls_code::ok) << i;
    EXPECT_EQ(r.statuses[0].code, rls_code::ok) << i;
  }
  for (int i = 0; i < 20; ++i) EXPECT_EQ(h.ok(user("user-b")).overall_code, rls_code::ok);
  EXPECT_EQ(h.ok(user("user-b")).overall_code, rls_code::over_limit);
  const std::string m = h.svc.metrics_text();
  EXPECT_NE(m.find("admit_serve_shadow_mode_total{domain=\"example6\",rule=\"example6.service.user_user-a\"} 5\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("admit_serve_over_limit_total{domain=\"example6\",rule=\"example6.service.user_user-a\"} 5\n"),
            std::string::npos);
}

TEST(ServiceReadmeExamples, Example7ReplacesDropsTheReplacedRuleAndLeavesItsCounterAlone) {
  harness h{R"(domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
)"};
  const rls_descriptor one = desc({{"key_1", "value_1"}, {"user", "bkthomps"}});
  const rls_descriptor two = desc({{"key_2", "value_2"}, {"user", "bkthomps"}});
  for (int i = 0; i < 10; ++i) {
    const rls_response r = h.ok(req("example7", {one, two}));
    EXPECT_EQ(r.overall_code, rls_code::ok) << i;
    EXPECT_FALSE(r.statuses[0].current_limit);
    EXPECT_EQ(r.statuses[1].current_limit->requests_per_unit, 10u);
  }
  EXPECT_EQ(h.ok(req("example7", {one, two})).overall_code, rls_code::over_limit);
  // the replaced rule counted nothing: alone it still has its 5
  const rls_response alone = h.ok(req("example7", {one}));
  EXPECT_EQ(alone.overall_code, rls_code::ok);
  EXPECT_EQ(alone.statuses[0].limit_remaining, 4u);
  EXPECT_EQ(alone.statuses[0].current_limit->name, "specific_limit");
}

TEST(ServiceReadmeExamples, Example8DetailedMetricsNameTheRequestsValue) {
  harness h{R"(domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
)"};
  EXPECT_EQ(h.ok(req("example8", {desc({{"key1", "unspecified_value"}})})).statuses[0].limit_remaining, 9u);
  EXPECT_EQ(h.ok(req("example8", {desc({{"key1", "unspecified_value2"}})})).statuses[0].limit_remaining, 9u);
  EXPECT_EQ(h.ok(req("example8", {desc({{"key1", "value1"}})})).statuses[0].limit_remaining, 19u);
  const std::string m = h.svc.metrics_text();
  for (const char* series :
       {"example8.key1_unspecified_value\"", "example8.key1_unspecified_value2\"", "example8.key1_value1\""}) {
    EXPECT_NE(m.find(std::string("admit_serve_hits_total{domain=\"example8\",rule=\"") + series + "} 1\n"),
              std::string::npos)
        << series << "\n"
        << m;
  }
}

TEST(ServiceReadmeExamples, Example9WildcardValuesMatchEachWithItsOwnCounter) {
  harness h{R"(domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
)"};
  EXPECT_EQ(h.ok(req("example9", {desc({{"key1", "value1"}})})).statuses[0].limit_remaining, 1u);
  EXPECT_EQ(h.ok(req("example9", {desc({{"key1", "valueXYZ"}})})).statuses[0].limit_remaining, 1u);
  EXPECT_EQ(h.ok(req("example9", {desc({{"key1", "value1"}})})).statuses[0].limit_remaining, 0u);
  EXPECT_EQ(h.ok(req("example9", {desc({{"key1", "value1"}})})).overall_code, rls_code::over_limit);
  EXPECT_TRUE(h.ok(req("example9", {desc({{"path", "/api/123/action"}})})).statuses[0].current_limit);
  EXPECT_FALSE(h.ok(req("example9", {desc({{"path", "/api/123/other"}})})).statuses[0].current_limit);
}

TEST(ServiceReadmeExamples, Example10ValueToMetricNamesTheRuntimeValues) {
  harness h{R"(domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
)"};
  const auto call = [](const std::string& route, const std::string& method, const std::string& subject) {
    return req("example10", {desc({{"route", route}, {"http_method", method}, {"subject_id", subject}})});
  };
  EXPECT_EQ(h.ok(call("api", "GET", "123")).statuses[0].limit_remaining, 59u);
  EXPECT_EQ(h.ok(call("web", "POST", "456")).statuses[0].limit_remaining, 59u);
  const std::string m = h.svc.metrics_text();
  EXPECT_NE(m.find("rule=\"example10.route_api.http_method_GET.subject_id\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("rule=\"example10.route_web.http_method_POST.subject_id\"} 1\n"), std::string::npos);
}

TEST(ServiceReadmeExamples, Example11ShareThresholdSharesOneCounterAcrossWildcardMatches) {
  harness h{R"(domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
)"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(h.ok(req("example11", {desc({{"files", "files/a.pdf"}})})).overall_code, rls_code::ok);
    EXPECT_EQ(h.ok(req("example11", {desc({{"files", "files/b.csv"}})})).overall_code, rls_code::ok);
  }
  EXPECT_EQ(h.ok(req("example11", {desc({{"files", "files/c.txt"}})})).overall_code, rls_code::over_limit);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(h.ok(req("example11", {desc({{"files_no_share", "files_no_share/a.pdf"}})})).overall_code, rls_code::ok);
  }
  EXPECT_EQ(h.ok(req("example11", {desc({{"files_no_share", "files_no_share/a.pdf"}})})).overall_code,
            rls_code::over_limit);
  EXPECT_EQ(h.ok(req("example11", {desc({{"files_no_share", "files_no_share/b.csv"}})})).overall_code, rls_code::ok);
}

TEST(ServiceRequests, AnUnknownDomainIsNotLimited) {
  harness h{example1};
  const rls_response r = h.ok(req("nope", {desc({{"database", "users"}})}));
  EXPECT_EQ(r.overall_code, rls_code::ok);
  EXPECT_FALSE(r.statuses[0].current_limit);
}

// As envoyproxy/ratelimit: a descriptor with no entries, or with an empty key, matches nothing and is OK.
TEST(ServiceRequests, ADescriptorWithNoEntriesOrAnEmptyKeyIsNotLimited) {
  harness h{example1};
  const rls_response r = h.ok(req("mongo_cps", {desc({}), desc({{"", "users"}}), desc({{"database", "users"}})}));
  EXPECT_EQ(r.overall_code, rls_code::ok);
  ASSERT_EQ(r.statuses.size(), 3u);
  EXPECT_FALSE(r.statuses[0].current_limit);
  EXPECT_FALSE(r.statuses[1].current_limit);
  EXPECT_TRUE(r.statuses[2].current_limit);
}

TEST(ServiceRequests, HitsAddendOfTheRequestAndOfTheDescriptor) {
  harness h{example5};
  // the request's hits_addend: 30 hits each
  rls_response r = h.ok(req("internal", {desc({{"azure", "a"}})}, 30));
  EXPECT_EQ(r.statuses[0].limit_remaining, 70u);
  // the descriptor's own wins over the request's
  rls_descriptor d = desc({{"azure", "a"}});
  d.hits_addend = 50;
  r = h.ok(req("internal", {d}, 30));
  EXPECT_EQ(r.statuses[0].limit_remaining, 20u);
  // a descriptor's 0 checks without counting; the request's 0 means 1
  d.hits_addend = 0;
  EXPECT_EQ(h.ok(req("internal", {d})).statuses[0].limit_remaining, 20u);
  EXPECT_EQ(h.ok(req("internal", {desc({{"azure", "a"}})}, 0)).statuses[0].limit_remaining, 19u);
  // a big refused hit still counts (INCRBY): 19 left, 25 asked → over, and the counter is past the limit
  EXPECT_EQ(h.ok(req("internal", {desc({{"azure", "a"}})}, 25)).overall_code, rls_code::over_limit);
  EXPECT_EQ(h.ok(req("internal", {desc({{"azure", "a"}})}, 1)).overall_code, rls_code::over_limit);
}

TEST(ServiceRequests, ALimitOverrideReplacesTheRuleAndAppliesWithoutOneInAKnownDomain) {
  harness h{example6};
  rls_descriptor a = desc({{"service", "s"}, {"user", "user-a"}});  // shadow-mode rule, 10/s
  a.limit = limit_override{2, unit::second};
  EXPECT_EQ(h.ok(req("example6", {a})).overall_code, rls_code::ok);
  EXPECT_EQ(h.ok(req("example6", {a})).overall_code, rls_code::ok);
  rls_response r = h.ok(req("example6", {a}));
  EXPECT_EQ(r.overall_code, rls_code::over_limit);  // an override is never in shadow mode
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 2u);
  EXPECT_EQ(r.statuses[0].current_limit->name, "");
  // no rule for this descriptor, but a known domain: the override applies
  rls_descriptor other = desc({{"unknown", "x"}});
  other.limit = limit_override{1, unit::minute};
  EXPECT_EQ(h.ok(req("example6", {other})).overall_code, rls_code::ok);
  r = h.ok(req("example6", {other}));
  EXPECT_EQ(r.overall_code, rls_code::over_limit);
  EXPECT_EQ(r.statuses[0].current_limit->per, unit::minute);
  // an unknown domain: nothing applies
  EXPECT_EQ(h.ok(req("nope", {other})).statuses[0].current_limit, std::nullopt);
  EXPECT_NE(h.svc.metrics_text().find("rule=\"example6.unknown_x\"} 2\n"), std::string::npos);
}

// envoyproxy/ratelimit keys an override's counter by the request's own values: a share_threshold rule's pattern is
// the rule's, and the override replaces the rule, so each value matching the wildcard counts on its own.
TEST(ServiceRequests, AnOverrideOfAShareThresholdRuleCountsPerValue) {
  harness h{R"(domain: shared
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
)"};
  rls_descriptor a = desc({{"files", "files/a.pdf"}});
  rls_descriptor b = desc({{"files", "files/b.csv"}});
  a.limit = b.limit = limit_override{1, unit::hour};
  EXPECT_EQ(h.ok(req("shared", {a})).overall_code, rls_code::ok);
  rls_response r = h.ok(req("shared", {b}));
  EXPECT_EQ(r.overall_code, rls_code::ok);  // its own counter, not the wildcard's
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
  EXPECT_EQ(h.ok(req("shared", {a})).overall_code, rls_code::over_limit);
  // the rule's shared counter saw none of the overrides' hits
  EXPECT_EQ(h.ok(req("shared", {desc({{"files", "files/c.txt"}})})).statuses[0].limit_remaining, 9u);
}

TEST(ServiceHeaders, NameTheDescriptorClosestToItsLimit) {
  const std::string cfg = R"(domain: h
descriptors:
  - key: a
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: b
    rate_limit:
      unit: hour
      requests_per_unit: 3
)";
  harness ietf{cfg, {.headers = service_options::header_style::ietf}};
  rls_response r = ietf.ok(req("h", {desc({{"a", "1"}}), desc({{"b", "1"}})}), 90s);
  ASSERT_EQ(r.response_headers_to_add.size(), 3u);
  EXPECT_EQ(r.response_headers_to_add[0].key, "RateLimit-Limit");
  EXPECT_EQ(r.response_headers_to_add[0].value, "3");
  EXPECT_EQ(r.response_headers_to_add[1].key, "RateLimit-Remaining");
  EXPECT_EQ(r.response_headers_to_add[1].value, "2");
  EXPECT_EQ(r.response_headers_to_add[2].key, "RateLimit-Reset");
  EXPECT_EQ(r.response_headers_to_add[2].value, "3510");  // the hour window: 3600 − 90
  // an over-limit descriptor is named even with more remaining elsewhere
  harness envoy{cfg, {.headers = service_options::header_style::envoy}};
  for (int i = 0; i < 10; ++i) (void)envoy.ok(req("h", {desc({{"a", "1"}})}), 90s);
  r = envoy.ok(req("h", {desc({{"b", "1"}}), desc({{"a", "1"}})}), 90s);
  ASSERT_EQ(r.response_headers_to_add.size(), 3u);
  EXPECT_EQ(r.response_headers_to_add[0].key, "x-ratelimit-limit");
  EXPECT_EQ(r.response_headers_to_add[0].value, "10");
  EXPECT_EQ(r.response_headers_to_add[1].key, "x-ratelimit-remaining");
  EXPECT_EQ(r.response_headers_to_add[1].value, "0");
  EXPECT_EQ(r.response_headers_to_add[2].key, "x-ratelimit-reset");
  EXPECT_EQ(r.response_headers_to_add[2].value, "30");
  // none without a limit, none when not asked
  EXPECT_TRUE(envoy.ok(req("h", {desc({{"c", "1"}})})).response_headers_to_add.empty());
  harness none{cfg};
  EXPECT_TRUE(none.ok(req("h", {desc({{"a", "1"}})})).response_headers_to_add.empty());
}

TEST(ServiceShadowMode, TheGlobalShadowModeAnswersOkAndKeepsTheDescriptorsCodes) {
  harness h{example5, {.shadow_mode = true}};
  const rls_response r = h.ok(req("internal", {desc({{"azure", "a"}})}, 101));
  EXPECT_EQ(r.overall_code, rls_code::ok);
  EXPECT_EQ(r.statuses[0].code, rls_code::over_limit);
  EXPECT_NE(h.svc.metrics_text().find("admit_serve_global_shadow_mode_total 1\n"), std::string::npos);
}

// A backend whose every hit fails (as a Redis that is down does).
class failing_backend final : public backend {
 public:
  void decide(std::vector<hit> hits, sys::time_point, completion done) override {
    std::vector<hit_outcome> out(hits.size());
    for (auto& o : out) {
      o.result = hit_outcome::state::failed;
      o.error = "connection refused";
    }
    done(std::move(out));
  }
  void release(std::string, std::function<void(bool)> done) override { done(false); }
  void configure(const configuration&) override {}
};

TEST(ServiceFailures, ABackendFailureAnswersPerTheFailurePolicy) {
  for (const bool open : {true, false}) {
    service svc{std::make_unique<failing_backend>(), yaml(example5), {.fail_open = open}};
    std::optional<rls_result> out;
    svc.should_rate_limit_at(req("internal", {desc({{"azure", "a"}}), desc({{"ldap", "x"}})}), at(0s),
                             [&](rls_result x) { out = std::move(x); });
    ASSERT_TRUE(out);
    ASSERT_FALSE(out->failure);
    const rls_code expected = open ? rls_code::ok : rls_code::over_limit;
    EXPECT_EQ(out->response.overall_code, expected);
    EXPECT_EQ(out->response.statuses[0].code, expected);
    EXPECT_EQ(out->response.statuses[0].current_limit->requests_per_unit, 100u);
    EXPECT_EQ(out->response.statuses[1].code, rls_code::ok);  // unlimited: the backend is not asked
    EXPECT_NE(svc.metrics_text().find("admit_serve_backend_errors_total 1\n"), std::string::npos);
  }
}

// A backend that keeps its decisions and completes them as failed when destroyed (as the Redis backend completes
// the hits still queued).
class completes_when_destroyed final : public backend {
 public:
  ~completes_when_destroyed() override {
    for (auto& [n, done] : held_) {
      std::vector<hit_outcome> out(n);
      for (auto& o : out) o.result = hit_outcome::state::failed;
      done(std::move(out));
    }
  }
  void decide(std::vector<hit> hits, sys::time_point, completion done) override {
    held_.emplace_back(hits.size(), std::move(done));
  }
  void release(std::string, std::function<void(bool)> done) override { done(false); }
  void configure(const configuration&) override {}

 private:
  std::vector<std::pair<std::size_t, completion>> held_;
};

// The service outlives its backend: a decision the backend completes as it is destroyed is answered (and recorded
// in metrics that still exist; under AddressSanitizer, a use after free otherwise).
TEST(ServiceFailures, ADecisionCompletedAsTheBackendIsDestroyedIsAnswered) {
  std::optional<rls_result> out;
  {
    service svc{std::make_unique<completes_when_destroyed>(), yaml(example5), {.fail_open = false}};
    svc.should_rate_limit_at(req("internal", {desc({{"azure", "a"}})}), at(0s),
                             [&](rls_result x) { out = std::move(x); });
    EXPECT_FALSE(out);
  }
  ASSERT_TRUE(out);
  ASSERT_FALSE(out->failure);
  EXPECT_EQ(out->response.overall_code, rls_code::over_limit);
}

TEST(ServiceConcurrency, AnAdmittedLeaseIsAHeaderAndAnOverLimitRequestHoldsNone) {
  // release() reads the system clock: leases granted at the test's explicit times must not expire by then
  const in_process_options long_leases{.lease_ttl = std::chrono::hours(24 * 365 * 200)};
  harness h{R"(domain: c
descriptors:
  - key: tenant
    rate_limit:
      concurrency: 1
  - key: route
    rate_limit:
      unit: second
      requests_per_unit: 1
)",
            {},
            long_leases};
  rls_response r = h.ok(req("c", {desc({{"tenant", "t"}})}));
  ASSERT_EQ(r.overall_code, rls_code::ok);
  ASSERT_EQ(r.response_headers_to_add.size(), 1u);
  EXPECT_EQ(r.response_headers_to_add[0].key, "x-admit-lease");
  const std::string lease = r.response_headers_to_add[0].value;
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 1u);
  EXPECT_EQ(h.ok(req("c", {desc({{"tenant", "t"}})})).overall_code, rls_code::over_limit);
  bool released = false;
  h.svc.release(lease, [&](bool ok) { released = ok; });
  EXPECT_TRUE(released);
  // the route is over its limit: the tenant's lease taken in the same request is given back at once
  EXPECT_EQ(h.ok(req("c", {desc({{"route", "r"}})})).overall_code, rls_code::ok);
  r = h.ok(req("c", {desc({{"tenant", "t"}}), desc({{"route", "r"}})}));
  EXPECT_EQ(r.overall_code, rls_code::over_limit);
  EXPECT_TRUE(r.response_headers_to_add.empty());
  EXPECT_EQ(h.ok(req("c", {desc({{"tenant", "t"}})})).overall_code, rls_code::ok);
}

TEST(ServiceReload, KeepsTheCountsOfUnchangedRulesAndCountsReloads) {
  harness h{example5};
  EXPECT_EQ(h.ok(req("internal", {desc({{"azure", "a"}})}, 60)).statuses[0].limit_remaining, 40u);
  h.svc.reload(yaml(example5 + R"(  - key: extra
    rate_limit:
      unit: second
      requests_per_unit: 1
)"));
  EXPECT_EQ(h.ok(req("internal", {desc({{"azure", "a"}})}, 1), 1s).statuses[0].limit_remaining, 39u);
  EXPECT_TRUE(h.ok(req("internal", {desc({{"extra", "a"}})}), 1s).statuses[0].current_limit);
  h.svc.record_reload_failure();
  const std::string m = h.svc.metrics_text();
  EXPECT_NE(m.find("admit_serve_config_reloads_total{result=\"success\"} 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("admit_serve_config_reloads_total{result=\"failure\"} 1\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_hits_total{domain=\"internal\",rule=\"internal.azure\"} 61\n"), std::string::npos);
}

TEST(ServiceMetrics, SplitHitsAsEnvoyproxyRatelimitDoes) {
  harness h{R"(domain: m
descriptors:
  - key: k
    rate_limit:
      unit: minute
      requests_per_unit: 10
)"};
  for (int i = 0; i < 9; ++i) (void)h.ok(req("m", {desc({{"k", "v"}})}));  // 9: one above the near threshold 8
  (void)h.ok(req("m", {desc({{"k", "v"}})}, 3));                           // 12: 1 within/near, 2 over
  const std::string m = h.svc.metrics_text();
  const std::string lbl = "{domain=\"m\",rule=\"m.k\"} ";
  EXPECT_NE(m.find("admit_serve_decisions_total" + lbl + "10\n"), std::string::npos) << m;
  EXPECT_NE(m.find("admit_serve_hits_total" + lbl + "12\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_within_limit_total" + lbl + "9\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_near_limit_total" + lbl + "2\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_over_limit_total" + lbl + "2\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_requests_total{code=\"ok\"} 9\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_requests_total{code=\"over_limit\"} 1\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_decision_seconds_count 10\n"), std::string::npos);
  EXPECT_NE(m.find("admit_serve_decision_seconds_bucket{le=\"+Inf\"} 10\n"), std::string::npos);
  EXPECT_NE(m.find("# TYPE admit_serve_decision_seconds histogram\n"), std::string::npos);
}

TEST(ServiceMetrics, SplitHitsMatchesUpstreamArithmetic) {
  // within, crossing near, crossing the limit from below near, all over
  descriptor_counts c = split_hits(10, 5, 1, 0.8, false);
  EXPECT_EQ(c.within_limit, 1u);
  EXPECT_EQ(c.near_limit, 0u);
  c = split_hits(10, 10, 4, 0.8, false);  // 6 → 10: 2 near
  EXPECT_EQ(c.near_limit, 2u);
  EXPECT_EQ(c.within_limit, 4u);
  c = split_hits(10, 15, 10, 0.8, true);  // 5 → 15: 5 over, 2 near (8..10), shadowed 5
  EXPECT_EQ(c.over_limit, 5u);
  EXPECT_EQ(c.near_limit, 2u);
  EXPECT_EQ(c.shadow_mode, 5u);
  c = split_hits(10, 20, 5, 0.8, false);  // already over
  EXPECT_EQ(c.over_limit, 5u);
  EXPECT_EQ(c.near_limit, 0u);
}

}  // namespace
}  // namespace admit::serve
