// Decimal numbers on the command line and in traces, parsed exactly (see decimal.hpp).
#include "cli/common/decimal.hpp"

#include "cli/common/duration.hpp"

#include <limits>

namespace admit::cli {

namespace {

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Parses a non-empty run of decimal digits into a non-negative int64; false on overflow or a non-digit.
bool parse_digits(std::string_view text, std::int64_t& out) noexcept {
  if (text.empty()) return false;
  std::int64_t v = 0;
  for (char c : text) {
    if (!is_digit(c)) return false;
    const int d = c - '0';
    if (v > (std::numeric_limits<std::int64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

}  // namespace

std::optional<std::int64_t> parse_whole_number(std::string_view text) noexcept {
  std::int64_t v = 0;
  if (!parse_digits(text, v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_seconds(std::string_view text) noexcept {
  const auto dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  std::int64_t seconds = 0;
  if (!parse_digits(whole, seconds)) return std::nullopt;
  std::int64_t fraction_ns = 0;
  if (dot != std::string_view::npos) {
    const std::string_view fraction = text.substr(dot + 1);
    if (fraction.empty() || fraction.size() > 9) return std::nullopt;
    if (!parse_digits(fraction, fraction_ns)) return std::nullopt;
    for (std::size_t i = fraction.size(); i < 9; ++i) fraction_ns *= 10;
  }
  if (seconds > (std::numeric_limits<std::int64_t>::max() - fraction_ns) / ns_per_second) return std::nullopt;
  return seconds * ns_per_second + fraction_ns;
}

std::string format_seconds(std::int64_t ns) {
  std::string out;
  // Work on the magnitude as unsigned so that INT64_MIN is representable.
  std::uint64_t magnitude = static_cast<std::uint64_t>(ns);
  if (ns < 0) {
    out.push_back('-');
    magnitude = ~magnitude + 1;
  }
  const std::uint64_t seconds = magnitude / ns_per_second;
  std::uint64_t fraction = magnitude % ns_per_second;
  out += std::to_string(seconds);
  if (fraction != 0) {
    char digits[10] = {};
    for (int i = 8; i >= 0; --i) {
      digits[i] = static_cast<char>('0' + fraction % 10);
      fraction /= 10;
    }
    int len = 9;
    while (len > 1 && digits[len - 1] == '0') --len;
    out.push_back('.');
    out.append(digits, static_cast<std::size_t>(len));
  }
  return out;
}

}  // namespace admit::cli
