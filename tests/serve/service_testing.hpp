// tests/serve/service_testing.hpp — what the tests of serve/engine/service.hpp share: explicit times from the start of
// a Unix day, a configuration from inline YAML, requests, a service on the in-process backend that answers inline, and
// envoyproxy/ratelimit's README examples 1, 5 and 6 (which other tests use too).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "serve/engine/in_process_backend.hpp"
#include "serve/engine/service.hpp"

namespace admit::serve::testing {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;

// A whole day of Unix time (so a whole hour, minute and second): windows of those units start here.
inline constexpr std::int64_t base_s = 1'699'920'000;
static_assert(base_s % 86400 == 0);
inline sys::time_point at(std::chrono::nanoseconds t) {
  return sys::time_point{std::chrono::duration_cast<sys::duration>(std::chrono::seconds{base_s} + t)};
}

inline std::shared_ptr<const configuration> yaml(std::string text) {
  std::vector<std::pair<std::string, std::string>> files{{"config.yaml", std::move(text)}};
  return configuration::load(files);
}

inline rls_descriptor desc(std::vector<descriptor_entry> entries) {
  rls_descriptor d;
  d.entries.assign(std::make_move_iterator(entries.begin()), std::make_move_iterator(entries.end()));
  return d;
}

inline rls_request req(std::string domain, std::vector<rls_descriptor> ds, std::uint32_t hits = 0) {
  rls_request r;
  r.domain = std::move(domain);
  r.descriptors.assign(std::make_move_iterator(ds.begin()), std::make_move_iterator(ds.end()));
  r.hits_addend = hits;
  return r;
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

inline const std::string example1 = R"(domain: mongo_cps
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

inline const std::string example5 = R"(domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
)";

inline const std::string example6 = R"(domain: example6
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

}  // namespace admit::serve::testing
