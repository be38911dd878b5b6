// admit/detail/format_double.hpp — a double as text for messages: the shortest decimal that reads back as the value,
// never in scientific notation (rate::parse and the other parsers accept no exponent).
#pragma once

#include <charconv>
#include <string>
#include <system_error>

namespace admit::detail {

// "100", "0.5", "100000000000000000000", "inf", "nan". Allocates the result; not for hot paths.
[[nodiscard]] inline std::string format_double(double v) {
  char buf[400];  // the longest fixed form of a double: 309 integer digits, or "0." and ~330 fractional ones
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return ec == std::errc{} ? std::string(buf, ptr) : std::string("?");
}

}  // namespace admit::detail
