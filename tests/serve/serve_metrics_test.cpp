// Tests of serve/engine/serve_metrics.hpp: per-rule series by domain and rule, kept across a reconfiguration; the
// bound on extra series (detailed metrics, overrides without a rule); label values escaped and made valid UTF-8; the
// latency histogram's cumulative buckets; the families' HELP and TYPE lines.
#include "serve/engine/serve_metrics.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "serve/engine/backend.hpp"

namespace admit::serve {
namespace {

using namespace std::chrono_literals;

rate_limit_rule rule(std::string key, std::size_t index) {
  rate_limit_rule r;
  r.full_key = std::move(key);
  r.index = index;
  r.requests_per_unit = 10;
  r.per = unit::second;
  return r;
}

bool has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

TEST(ServeMetrics, CountsPerRuleAndKeepsTotalsAcrossAReconfiguration) {
  serve_metrics m;
  std::vector<rate_limit_rule> first{rule("d.a", 0), rule("d.b", 1)};
  m.configure(first);
  m.record_descriptor(first[0], "d", {}, {.hits = 3, .within_limit = 3});
  m.record_descriptor(first[1], "d", {}, {.hits = 1, .over_limit = 1});
  std::vector<rate_limit_rule> second{rule("d.b", 0), rule("d.a", 1)};
  m.configure(second);
  m.record_descriptor(second[1], "d", {}, {.hits = 2, .within_limit = 2});
  m.record_descriptor(first[1], "d", {}, {.hits = 1, .over_limit = 1});  // a decision still on the old rules
  const std::string t = m.text(false);
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"d.a\"} 5")) << t;
  EXPECT_TRUE(has(t, "admit_serve_decisions_total{domain=\"d\",rule=\"d.a\"} 2"));
  EXPECT_TRUE(has(t, "admit_serve_over_limit_total{domain=\"d\",rule=\"d.b\"} 2"));
  EXPECT_TRUE(has(t, "# TYPE admit_serve_hits_total counter"));
  EXPECT_TRUE(has(t, "# TYPE admit_serve_decision_seconds histogram"));
  EXPECT_TRUE(has(t, "admit_serve_backend_failing 0"));
  EXPECT_TRUE(has(m.text(true), "admit_serve_backend_failing 1"));
}

TEST(ServeMetrics, ExtraSeriesAreBounded) {
  serve_metrics m{2};
  std::vector<rate_limit_rule> rules{rule("d.k", 0)};
  m.configure(rules);
  for (const char* v : {"d.k_1", "d.k_2", "d.k_3"}) m.record_descriptor(rules[0], "d", v, {.hits = 1});
  rate_limit_rule made = rule("d.x_1", no_rule_index);
  m.record_descriptor(made, "d", "d.x_1", {.hits = 1});
  const std::string t = m.text(false);
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"d.k_1\"} 1")) << t;
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"d.k_2\"} 1"));
  EXPECT_EQ(t.find("d.k_3"), std::string::npos);  // beyond the bound: in the rule's own series
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"d.k\"} 1"));
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"_other\"} 1"));
}

// The names of extra series come from requests: their bytes are bounded too, whatever their number.
TEST(ServeMetrics, ExtraSeriesBytesAreBounded) {
  serve_metrics m{1000, 100};
  std::vector<rate_limit_rule> rules{rule("d.k", 0)};
  m.configure(rules);
  const std::string a = "d.k_" + std::string(60, 'a'), b = "d.k_" + std::string(60, 'b');
  m.record_descriptor(rules[0], "d", a, {.hits = 1});        // 2 + 64 bytes: within 100
  m.record_descriptor(rules[0], "d", b, {.hits = 1});        // 66 more: beyond
  m.record_descriptor(rules[0], "d", "d.k_c", {.hits = 1});  // 7 more: within
  const std::string t = m.text(false);
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"" + a + "\"} 1")) << t;
  EXPECT_EQ(t.find(b), std::string::npos);
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"d.k_c\"} 1"));
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"d.k\"} 1"));
}

TEST(ServeMetrics, LabelValuesAreEscapedAndValidUtf8) {
  serve_metrics m;
  std::vector<rate_limit_rule> rules{rule("d.k", 0)};
  m.configure(rules);
  m.record_descriptor(rules[0], "d", "d.k_a\"b\\c\nd", {.hits = 1});
  m.record_descriptor(rules[0], "d", std::string("d.k_\xff\xc3\xa9\xed\xa0\x80", 10), {.hits = 1});
  const std::string t = m.text(false);
  EXPECT_TRUE(has(t, "admit_serve_hits_total{domain=\"d\",rule=\"d.k_a\\\"b\\\\c\\nd\"} 1")) << t;
  // 0xff is invalid, é (c3 a9) is kept, an encoded surrogate (ed a0 80) is three invalid bytes
  EXPECT_TRUE(has(t,
                  "admit_serve_hits_total{domain=\"d\",rule=\"d.k_\xEF\xBF\xBD\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD"
                  "\xEF\xBF\xBD\"} 1"))
      << t;
}

TEST(ServeMetrics, RequestsAndTheLatencyHistogram) {
  serve_metrics m;
  m.record_request(rls_code::ok, false, 700ns);  // <= 1 µs
  m.record_request(rls_code::ok, false, 1us);    // <= 1 µs (le is inclusive)
  m.record_request(rls_code::over_limit, false, 3ms);
  m.record_request(rls_code::unknown, true, 20s);  // beyond the last bound
  m.record_backend_error(2);
  m.record_reload(true);
  m.record_reload(false);
  const std::string t = m.text(false);
  EXPECT_TRUE(has(t, "admit_serve_decision_seconds_bucket{le=\"1e-06\"} 2")) << t;
  EXPECT_TRUE(has(t, "admit_serve_decision_seconds_bucket{le=\"0.0025\"} 2"));
  EXPECT_TRUE(has(t, "admit_serve_decision_seconds_bucket{le=\"0.005\"} 3"));
  EXPECT_TRUE(has(t, "admit_serve_decision_seconds_bucket{le=\"10\"} 3"));
  EXPECT_TRUE(has(t, "admit_serve_decision_seconds_bucket{le=\"+Inf\"} 4"));
  EXPECT_TRUE(has(t, "admit_serve_decision_seconds_count 4"));
  EXPECT_TRUE(has(t, "admit_serve_decision_seconds_sum 20.0030017"));
  EXPECT_TRUE(has(t, "admit_serve_requests_total{code=\"ok\"} 2"));
  EXPECT_TRUE(has(t, "admit_serve_requests_total{code=\"over_limit\"} 1"));
  EXPECT_TRUE(has(t, "admit_serve_requests_total{code=\"invalid\"} 1"));
  EXPECT_TRUE(has(t, "admit_serve_backend_errors_total 2"));
  EXPECT_TRUE(has(t, "admit_serve_config_reloads_total{result=\"success\"} 1"));
  EXPECT_TRUE(has(t, "admit_serve_config_reloads_total{result=\"failure\"} 1"));
}

}  // namespace
}  // namespace admit::serve
