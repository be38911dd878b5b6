// admit/detail/host_port.hpp — an endpoint written as "host:port" for messages, logs and addresses: an IPv6 literal in
// brackets ("[::1]:6379"), so its last group cannot be read as the port. A host already in brackets is kept as it is.
#pragma once

#include <string>
#include <string_view>

namespace admit::detail {

inline std::string host_port(std::string_view host, unsigned port) {
  const bool bare_ipv6 = host.find(':') != std::string_view::npos && !host.starts_with('[');
  std::string s;
  s.reserve(host.size() + 8);
  if (bare_ipv6) s += '[';
  s += host;
  if (bare_ipv6) s += ']';
  s += ':';
  s += std::to_string(port);
  return s;
}

}  // namespace admit::detail
