// serve/engine/service.hpp on the in-process backend answers every example of envoyproxy/ratelimit's README as it
// does: matching, nesting, the most specific match, unlimited, shadow mode, replaces, detailed metrics, wildcards,
// value_to_metric and share_threshold. Configurations from inline YAML; times are explicit.
#include "serve/engine/service.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "serve/engine/in_process_backend.hpp"
#include "serve/engine/serve_metrics.hpp"
#include "service_testing.hpp"

namespace admit::serve {
// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace service_readme_examples_test {

using namespace std::chrono_literals;
using testing::at;
using testing::desc;
using testing::example1;
using testing::example5;
using testing::example6;
using testing::harness;
using testing::req;

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

}  // namespace service_readme_examples_test
}  // namespace admit::serve
