#include "cli/common/text.hpp"

#include <cstdio>
#include <cstdlib>

namespace admit::cli {

std::string plural(std::int64_t n, std::string_view one, std::string_view many) {
  std::string out = std::to_string(n);
  out += ' ';
  out += n == 1 ? one : many;
  return out;
}

std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string share(std::int64_t part, std::int64_t whole) {
  if (whole == 0) return "-";
  // One decimal; more where it would round a share short of all to 100.0% or more than none to 0.0% (6658 of 6659:
  // "99.98%", not "100.0%").
  const double p = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  char buf[32];
  for (int decimals = 1; decimals <= 9; ++decimals) {
    std::snprintf(buf, sizeof buf, "%.*f%%", decimals, p);
    const double shown = std::strtod(buf, nullptr);  // (the number as printed, rounded)
    if ((part == whole || shown < 100) && (part == 0 || shown > 0)) break;
  }
  return buf;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

}  // namespace admit::cli
