#include "serve/grpc/rls_convert.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <string_view>

namespace admit::serve {
namespace {

std::string too_long(std::string_view what, std::size_t size, std::size_t max) {
  return std::string(what) + " is " + std::to_string(size) + " bytes long; at most " + std::to_string(max) +
         " bytes are accepted";
}

std::string where(int d, int e) { return "descriptor " + std::to_string(d) + " entry " + std::to_string(e); }

}  // namespace

std::optional<std::string> from_proto(const rls_pb::RateLimitRequest& in, const request_limits& limits,
                                      rls_request& out) {
  if (in.domain().empty()) return "the request has no domain";
  if (in.domain().size() > limits.max_string_bytes) {
    return too_long("the domain", in.domain().size(), limits.max_string_bytes);
  }
  if (in.descriptors().empty()) return "the request has no descriptors";
  if (static_cast<std::size_t>(in.descriptors_size()) > limits.max_descriptors) {
    return "the request has " + std::to_string(in.descriptors_size()) + " descriptors; at most " +
           std::to_string(limits.max_descriptors) + " are accepted in one request";
  }
  out.domain = in.domain();
  out.hits_addend = in.hits_addend();
  out.descriptors.clear();
  out.descriptors.reserve(static_cast<std::size_t>(in.descriptors_size()));
  for (int d = 0; d < in.descriptors_size(); ++d) {
    const auto& pd = in.descriptors(d);
    // A descriptor with no entries, or an entry with an empty key, matches no rule and is answered OK without a
    // limit, as envoyproxy/ratelimit answers it.
    if (static_cast<std::size_t>(pd.entries_size()) > limits.max_entries) {
      return "descriptor " + std::to_string(d) + " has " + std::to_string(pd.entries_size()) + " entries; at most " +
             std::to_string(limits.max_entries) + " are accepted in one descriptor";
    }
    rls_descriptor& rd = out.descriptors.emplace_back();
    rd.entries.reserve(static_cast<std::size_t>(pd.entries_size()));
    for (int e = 0; e < pd.entries_size(); ++e) {
      const auto& pe = pd.entries(e);
      if (pe.key().size() > limits.max_string_bytes) {
        return too_long(where(d, e) + ": the key", pe.key().size(), limits.max_string_bytes);
      }
      if (pe.value().size() > limits.max_string_bytes) {
        return too_long(where(d, e) + ": the value", pe.value().size(), limits.max_string_bytes);
      }
      rd.entries.push_back(descriptor_entry{pe.key(), pe.value()});
    }
    if (pd.has_limit()) {
      const int u = pd.limit().unit();
      if (u < static_cast<int>(unit::second) || u > static_cast<int>(unit::year)) {
        return "descriptor " + std::to_string(d) + ": the limit override's unit " + std::to_string(u) +
               " is not one of SECOND (1), MINUTE, HOUR, DAY, MONTH, YEAR (6)";
      }
      rd.limit = limit_override{pd.limit().requests_per_unit(), static_cast<unit>(u)};
    }
    if (pd.has_hits_addend()) {
      const std::uint64_t n = pd.hits_addend().value();
      if (n > std::numeric_limits<std::uint32_t>::max()) {
        return "descriptor " + std::to_string(d) + ": hits_addend " + std::to_string(n) + " is above the most " +
               "accepted, 4294967295";
      }
      rd.hits_addend = static_cast<std::uint32_t>(n);
    }
  }
  return std::nullopt;
}

void to_proto(const rls_response& in, rls_pb::RateLimitResponse& out) {
  out.set_overall_code(static_cast<rls_pb::RateLimitResponse::Code>(in.overall_code));
  for (const rls_descriptor_status& s : in.statuses) {
    auto* ps = out.add_statuses();
    ps->set_code(static_cast<rls_pb::RateLimitResponse::Code>(s.code));
    if (s.current_limit) {
      auto* limit = ps->mutable_current_limit();
      limit->set_name(s.current_limit->name);
      limit->set_requests_per_unit(s.current_limit->requests_per_unit);
      limit->set_unit(static_cast<rls_pb::RateLimitResponse::RateLimit::Unit>(s.current_limit->per));
    }
    ps->set_limit_remaining(s.limit_remaining);
    if (s.duration_until_reset) {
      const auto ns = s.duration_until_reset->count();
      auto* d = ps->mutable_duration_until_reset();
      d->set_seconds(ns / 1'000'000'000);
      d->set_nanos(static_cast<std::int32_t>(ns % 1'000'000'000));
    }
  }
  for (const rls_header& h : in.response_headers_to_add) {
    auto* ph = out.add_response_headers_to_add();
    ph->set_key(h.key);
    ph->set_value(h.value);
  }
  for (const rls_header& h : in.request_headers_to_add) {
    auto* ph = out.add_request_headers_to_add();
    ph->set_key(h.key);
    ph->set_value(h.value);
  }
}

}  // namespace admit::serve
