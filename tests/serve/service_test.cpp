// Tests of serve/engine/service.hpp on the in-process backend, with configurations loaded from inline YAML: request
// validation, hits_addend at both levels, limit overrides, the rate-limit headers, the global shadow mode, the failure
// policy (with a backend that fails), concurrency leases, reloads, and the metrics the decisions leave. Times are
// explicit.
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
namespace service_test {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;
using testing::at;
using testing::desc;
using testing::example1;
using testing::example5;
using testing::example6;
using testing::harness;
using testing::req;
using testing::yaml;

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

// Domain "h": key "a" 10 a minute, key "b" 3 an hour.
const std::string two_limits = R"(domain: h
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

TEST(ServiceHeaders, NameTheDescriptorClosestToItsLimit) {
  harness ietf{two_limits, {.headers = service_options::header_style::ietf}};
  rls_response r = ietf.ok(req("h", {desc({{"a", "1"}}), desc({{"b", "1"}})}), 90s);
  ASSERT_EQ(r.response_headers_to_add.size(), 3u);
  EXPECT_EQ(r.response_headers_to_add[0].key, "RateLimit-Limit");
  EXPECT_EQ(r.response_headers_to_add[0].value, "3");
  EXPECT_EQ(r.response_headers_to_add[1].key, "RateLimit-Remaining");
  EXPECT_EQ(r.response_headers_to_add[1].value, "2");
  EXPECT_EQ(r.response_headers_to_add[2].key, "RateLimit-Reset");
  EXPECT_EQ(r.response_headers_to_add[2].value, "3510");  // the hour window: 3600 − 90
  // an over-limit descriptor is named even with more remaining elsewhere
  harness envoy{two_limits, {.headers = service_options::header_style::envoy}};
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
  harness none{two_limits};
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
  void decide(std::shared_ptr<pending_decision> call) override {
    for (auto& o : call->outcomes) {
      o.result = hit_outcome::state::failed;
      o.error = "connection refused";
    }
    call->complete();
  }
  void release(std::string, std::function<void(admit::serve::release_result)> done) override { done({}); }
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

// A backend whose first hit fails (Redis down) and whose other hits are answered from this process alone (a
// prefetched stock), until told that the store answers again.
class stock_backend final : public backend {
 public:
  void decide(std::shared_ptr<pending_decision> call) override {
    for (std::size_t i = 0; i < call->outcomes.size(); ++i) {
      hit_outcome& o = call->outcomes[i];
      o.limit = 100;
      o.reset_after = reset;
      if (i == 0 && !store_back) {
        o.result = hit_outcome::state::failed;
        o.error = "connection refused";
      } else {
        o.consulted = store_back;
      }
    }
    call->complete();
  }
  void release(std::string, std::function<void(admit::serve::release_result)> done) override { done({}); }
  void configure(const configuration&) override {}
  bool store_back = false;
  std::chrono::nanoseconds reset{0};
};

// The rate-limit headers say a count and when it resets: a status the failure policy decided has neither (it said
// "RateLimit-Remaining: 0" and "RateLimit-Reset: 0", come back at once, on an answer of fail-closed). A request's
// other statuses, counted, still give them.
TEST(ServiceFailures, AFailurePolicyAnswerCarriesNoRateLimitHeaders) {
  for (const bool open : {true, false}) {
    service svc{std::make_unique<failing_backend>(),
                yaml(two_limits),
                {.headers = service_options::header_style::ietf, .fail_open = open}};
    std::optional<rls_result> out;
    svc.should_rate_limit_at(req("h", {desc({{"a", "1"}}), desc({{"b", "1"}})}), at(0s),
                             [&](rls_result x) { out = std::move(x); });
    ASSERT_TRUE(out);
    EXPECT_EQ(out->response.overall_code, open ? rls_code::ok : rls_code::over_limit);
    EXPECT_TRUE(out->response.response_headers_to_add.empty()) << "fail_open " << open;
  }
  // The first hit fails, the second is answered (from a stock): the headers are the second's.
  auto store = std::make_unique<stock_backend>();
  store->reset = 20s;
  service svc{std::move(store), yaml(two_limits), {.headers = service_options::header_style::ietf, .fail_open = false}};
  std::optional<rls_result> out;
  svc.should_rate_limit_at(req("h", {desc({{"a", "1"}}), desc({{"b", "1"}})}), at(0s),
                           [&](rls_result x) { out = std::move(x); });
  ASSERT_TRUE(out);
  EXPECT_EQ(out->response.overall_code, rls_code::over_limit);
  const auto& h = out->response.response_headers_to_add;
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].value, "3");   // b's limit
  EXPECT_EQ(h[2].value, "20");  // b's reset
}

// The health events follow the store: an answer decided from a local stock while the store fails does not say the
// outage is over (it would log "counting again" and "failing" for every such request).
TEST(ServiceFailures, AnAnswerFromALocalStockDoesNotEndAnOutage) {
  auto store = std::make_unique<stock_backend>();
  stock_backend& b = *store;
  std::vector<backend_event::kind> events;
  service svc{std::move(store), yaml(example5), {.on_backend_event = [&](const backend_event& e) {
                events.push_back(e.what);
              }}};
  const auto both = [] { return req("internal", {desc({{"azure", "a"}}), desc({{"azure", "b"}})}); };
  for (int i = 0; i < 3; ++i) svc.should_rate_limit_at(both(), at(0s), [](rls_result) {});
  EXPECT_EQ(events, std::vector<backend_event::kind>{backend_event::kind::failing});
  b.store_back = true;
  svc.should_rate_limit_at(both(), at(0s), [](rls_result) {});
  EXPECT_EQ(events, (std::vector<backend_event::kind>{backend_event::kind::failing, backend_event::kind::counting}));
}

// Whatever a backend's reset says (a Redis limiter's µs, a --lease-ttl of 1500ms), the answer's is in whole seconds,
// rounded up, as envoyproxy/ratelimit's are.
TEST(ServiceRequests, DurationUntilResetIsInWholeSecondsRoundedUp) {
  auto store = std::make_unique<stock_backend>();
  store->store_back = true;
  store->reset = 1500ms;
  service svc{std::move(store), yaml(example5), {}};
  std::optional<rls_result> out;
  svc.should_rate_limit_at(req("internal", {desc({{"azure", "a"}})}), at(0s),
                           [&](rls_result x) { out = std::move(x); });
  ASSERT_TRUE(out);
  ASSERT_EQ(out->response.statuses.size(), 1u);
  EXPECT_EQ(out->response.statuses[0].duration_until_reset, 2s);
}

// A backend that keeps its decisions and completes them as failed when destroyed (as the Redis backend completes
// the hits still queued).
class completes_when_destroyed final : public backend {
 public:
  ~completes_when_destroyed() override {
    for (auto& call : held_) {
      for (auto& o : call->outcomes) o.result = hit_outcome::state::failed;
      call->complete();
    }
  }
  void decide(std::shared_ptr<pending_decision> call) override { held_.push_back(std::move(call)); }
  void release(std::string, std::function<void(admit::serve::release_result)> done) override { done({}); }
  void configure(const configuration&) override {}

 private:
  std::vector<std::shared_ptr<pending_decision>> held_;
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

// A backend that throws from decide(): after keeping the call, or after completing it.
class throwing_backend final : public backend {
 public:
  explicit throwing_backend(bool complete_first) : complete_first_(complete_first) {}
  void decide(std::shared_ptr<pending_decision> call) override {
    if (complete_first_) call->complete();
    kept = std::move(call);
    throw std::runtime_error("the backend broke");
  }
  void release(std::string, std::function<void(admit::serve::release_result)> done) override { done({}); }
  void configure(const configuration&) override {}
  std::shared_ptr<pending_decision> kept;

 private:
  bool complete_first_;
};

// should_rate_limit either calls its completion once or throws and never calls it: the transports answer once.
TEST(ServiceFailures, ABackendThatThrowsEitherAnswersOnceOrThrows) {
  for (const bool complete_first : {false, true}) {
    auto store = std::make_unique<throwing_backend>(complete_first);
    throwing_backend& b = *store;
    service svc{std::move(store), yaml(example5), {}};
    int answers = 0;
    const auto call = [&] {
      svc.should_rate_limit_at(req("internal", {desc({{"azure", "a"}})}), at(0s), [&](rls_result) { ++answers; });
    };
    if (complete_first) {
      EXPECT_NO_THROW(call());  // answered before the backend threw: the answer stands
    } else {
      EXPECT_THROW(call(), std::runtime_error);
    }
    ASSERT_TRUE(b.kept);
    b.kept->complete();  // a completion that comes after the throw is dropped
    EXPECT_EQ(answers, complete_first ? 1 : 0) << "complete_first " << complete_first;
  }
}

// Domain "c": a tenant's concurrency limit of `permits`, and a route's rate of one request a second.
std::string tenant_and_route(int permits) {
  return R"(domain: c
descriptors:
  - key: tenant
    rate_limit:
      concurrency: )" +
         std::to_string(permits) + R"(
  - key: route
    rate_limit:
      unit: second
      requests_per_unit: 1
)";
}

TEST(ServiceConcurrency, AnAdmittedLeaseIsAHeaderAndAnOverLimitRequestHoldsNone) {
  // release() reads the system clock: leases granted at the test's explicit times must not expire by then
  const in_process_options long_leases{.lease_ttl = std::chrono::hours(24 * 365 * 200)};
  harness h{tenant_and_route(1), {}, long_leases};
  rls_response r = h.ok(req("c", {desc({{"tenant", "t"}})}));
  ASSERT_EQ(r.overall_code, rls_code::ok);
  ASSERT_EQ(r.response_headers_to_add.size(), 1u);
  EXPECT_EQ(r.response_headers_to_add[0].key, "x-admit-lease");
  const std::string lease = r.response_headers_to_add[0].value;
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 1u);
  EXPECT_EQ(h.ok(req("c", {desc({{"tenant", "t"}})})).overall_code, rls_code::over_limit);
  bool released = false;
  h.svc.release(lease, [&](const release_result& out) { released = out.result == release_result::state::released; });
  EXPECT_TRUE(released);
  // the route is over its limit: the tenant's lease taken in the same request is given back at once
  EXPECT_EQ(h.ok(req("c", {desc({{"route", "r"}})})).overall_code, rls_code::ok);
  r = h.ok(req("c", {desc({{"tenant", "t"}}), desc({{"route", "r"}})}));
  EXPECT_EQ(r.overall_code, rls_code::over_limit);
  EXPECT_TRUE(r.response_headers_to_add.empty());
  // The tenant's status says what is held once its lease is back: nothing, so its permit is free and nothing resets.
  EXPECT_EQ(r.statuses[0].code, rls_code::ok);
  EXPECT_EQ(r.statuses[0].limit_remaining, 1u);
  EXPECT_EQ(r.statuses[0].duration_until_reset, std::chrono::nanoseconds{0});
  EXPECT_EQ(h.ok(req("c", {desc({{"tenant", "t"}})})).overall_code, rls_code::ok);
}

TEST(ServiceConcurrency, ALeaseGivenBackLeavesTheOthersHeldInItsStatus) {
  const in_process_options leases{.lease_ttl = std::chrono::hours(24 * 365 * 200)};
  harness h{tenant_and_route(3), {}, leases};
  ASSERT_EQ(h.ok(req("c", {desc({{"tenant", "t"}})})).overall_code, rls_code::ok);  // one permit held by another
  ASSERT_EQ(h.ok(req("c", {desc({{"route", "r"}})})).overall_code, rls_code::ok);   // the route's second is spent
  // Two permits asked with the route over: both go back, and one permit stays held by the first request.
  rls_request both = req("c", {desc({{"tenant", "t"}}), desc({{"route", "r"}})});
  both.descriptors[0].hits_addend = 2;
  const rls_response r = h.ok(both);
  EXPECT_EQ(r.overall_code, rls_code::over_limit);
  EXPECT_EQ(r.statuses[0].limit_remaining, 2u);
  EXPECT_EQ(r.statuses[0].duration_until_reset, std::chrono::nanoseconds{leases.lease_ttl});
  EXPECT_EQ(r.statuses[1].code, rls_code::over_limit);
  // The same counter twice in one request: each of its statuses counts every permit the request gave back.
  const rls_response twice = h.ok(req("c", {desc({{"tenant", "t"}}), desc({{"tenant", "t"}}), desc({{"route", "r"}})}));
  EXPECT_EQ(twice.overall_code, rls_code::over_limit);
  EXPECT_EQ(twice.statuses[0].limit_remaining, 2u);
  EXPECT_EQ(twice.statuses[1].limit_remaining, 2u);
  // ... and they are free indeed: two more fit, a third does not.
  rls_request two = req("c", {desc({{"tenant", "t"}})});
  two.descriptors[0].hits_addend = 2;
  EXPECT_EQ(h.ok(two).overall_code, rls_code::ok);
  EXPECT_EQ(h.ok(req("c", {desc({{"tenant", "t"}})})).overall_code, rls_code::over_limit);
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

}  // namespace service_test
}  // namespace admit::serve
