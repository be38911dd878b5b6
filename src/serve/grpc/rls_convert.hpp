// serve/grpc/rls_convert.hpp — Envoy's RateLimitRequest / RateLimitResponse as protobuf messages (generated from
// proto/) to and from the engine's plain values (engine/rls.hpp), with the bounds a request must keep. Shared by the
// gRPC server and HTTP's POST /json (which parses the same message from its JSON form).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "serve/engine/rls.hpp"

namespace admit::serve {

namespace rls_pb = ::envoy::service::ratelimit::v3;

// What one request may hold. A request beyond any bound is refused whole (gRPC INVALID_ARGUMENT, HTTP 400) with a
// message naming the bound; nothing of it is counted. Envoy sends a handful of descriptors of a few short entries,
// so the defaults leave room for any real gateway while keeping one request's work and memory small.
struct request_limits {
  std::size_t max_descriptors = 1000;   // descriptors per request
  std::size_t max_entries = 64;         // entries per descriptor
  std::size_t max_string_bytes = 4096;  // the domain, and each entry's key and value, in bytes
};

// Converts `in` into `out`. Returns why the request is refused (a bound passed, an unknown unit in a limit override,
// a hits_addend above 2^32-1, a missing domain, no descriptors), or nothing when `out` holds the request.
[[nodiscard]] std::optional<std::string> from_proto(const rls_pb::RateLimitRequest& in, const request_limits& limits,
                                                    rls_request& out);

// Converts the engine's response into the wire message.
void to_proto(const rls_response& in, rls_pb::RateLimitResponse& out);

}  // namespace admit::serve
