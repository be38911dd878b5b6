// serve/engine/rls.hpp — Envoy's rate-limit request and response (envoy.service.ratelimit.v3), as plain C++ values
// independent of protobuf and JSON: the gRPC and HTTP transports convert to and from these, and the engine decides on
// them. Only the fields admit serve reads or writes; field meanings as in Envoy's rls.proto.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "serve/config/configuration.hpp"

namespace admit::serve {

// RateLimitResponse.Code, with Envoy's numbers.
enum class rls_code : std::uint8_t { unknown = 0, ok = 1, over_limit = 2 };

// RateLimitDescriptor.RateLimitOverride: a limit the caller sends in place of the configured one.
struct limit_override {
  std::uint32_t requests_per_unit = 0;
  unit per = unit::unknown;
};

// A request's descriptors and their entries are kept inline up to the usual sizes (one descriptor of up to two
// entries): a decision then allocates no container of its own.
struct rls_descriptor {
  boost::container::small_vector<descriptor_entry, 2> entries;
  std::optional<limit_override> limit;
  std::optional<std::uint32_t> hits_addend;  // overrides the request's when present
};

struct rls_request {
  std::string domain;
  boost::container::small_vector<rls_descriptor, 1> descriptors;
  std::uint32_t hits_addend = 0;  // 0 means 1, as in Envoy
};

// RateLimitResponse.RateLimit: the limit a descriptor was decided against.
struct rls_current_limit {
  std::string name;
  std::uint32_t requests_per_unit = 0;
  unit per = unit::unknown;
};

struct rls_descriptor_status {
  rls_code code = rls_code::ok;
  std::optional<rls_current_limit> current_limit;  // absent when no rule applied
  std::uint32_t limit_remaining = 0;
  std::optional<std::chrono::nanoseconds> duration_until_reset;  // absent when no rule applied
};

struct rls_header {
  std::string key;
  std::string value;
};

struct rls_response {
  rls_code overall_code = rls_code::ok;
  // One per request descriptor, in order; up to two inline (a request usually carries one or two).
  boost::container::small_vector<rls_descriptor_status, 2> statuses;
  std::vector<rls_header> response_headers_to_add;
  std::vector<rls_header> request_headers_to_add;
};

}  // namespace admit::serve
