#include "cli/common/duration.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "cli/common/decimal.hpp"

namespace admit::cli {

namespace {

struct unit {
  std::string_view name;
  std::int64_t ns;
};
// Longest suffix first where one is a suffix of another ("ms"/"s", "min"/...).
constexpr unit units[] = {{"ns", 1},
                          {"us", 1'000},
                          {"ms", 1'000'000},
                          {"min", 60'000'000'000},
                          {"h", 3'600'000'000'000},
                          {"d", 86'400'000'000'000},
                          {"s", 1'000'000'000}};

bool is_number_char(char c) noexcept { return (c >= '0' && c <= '9') || c == '.'; }

}  // namespace

duration_parse parse_duration_diagnosed(std::string_view text) noexcept {
  std::size_t k = 0;
  while (k < text.size() && is_number_char(text[k])) ++k;
  const std::string_view number = text.substr(0, k);
  const std::string_view suffix = text.substr(k);
  if (number.empty()) return {std::nullopt, duration_problem::malformed};
  const unit* u = nullptr;
  for (const auto& candidate : units) {
    if (candidate.name == suffix) u = &candidate;
  }
  if (suffix.empty()) return {std::nullopt, duration_problem::missing_unit};
  if (u == nullptr) return {std::nullopt, duration_problem::unknown_unit};
  // parse_seconds reads the number as "count of 1e-9": value_e9 = number * 1e9, exactly.
  const auto value_e9 = parse_seconds(number);
  if (!value_e9) {
    const auto dot = number.find('.');
    const bool one_dot = dot == std::string_view::npos || number.find('.', dot + 1) == std::string_view::npos;
    const bool well_formed = one_dot && number.front() != '.' && number.back() != '.';
    if (!well_formed) return {std::nullopt, duration_problem::malformed};
    if (dot != std::string_view::npos && number.size() - dot - 1 > 9)
      return {std::nullopt, duration_problem::too_precise};
    return {std::nullopt, duration_problem::too_large};  // digits enough to overflow int64
  }
  constexpr std::int64_t e9 = 1'000'000'000;
  const std::int64_t whole = *value_e9 / e9;
  const std::int64_t frac = *value_e9 % e9;  // in units of 1e-9
  constexpr std::int64_t limit = max_duration_seconds * e9;
  if (whole > limit / u->ns) return {std::nullopt, duration_problem::too_large};
  std::int64_t ns = whole * u->ns;
  // frac * u.ns / 1e9 must be a whole number of ns; frac < 1e9 and u.ns <= 8.64e13 would overflow, so split.
  const std::int64_t g = u->ns >= e9 ? e9 : u->ns;  // u.ns is either a divisor or a multiple of 1e9
  const std::int64_t frac_ns_num = frac * g;        // <= 1e18
  if (frac_ns_num % e9 != 0) return {std::nullopt, duration_problem::too_precise};
  const std::int64_t frac_ns = frac_ns_num / e9 * (u->ns / g);
  if (ns > limit - frac_ns) return {std::nullopt, duration_problem::too_large};
  ns += frac_ns;
  return {std::chrono::nanoseconds{ns}, duration_problem::none};
}

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) noexcept {
  return parse_duration_diagnosed(text).value;
}

std::string_view duration_units() noexcept { return "ns, us, ms, s, min, h, d"; }

std::string format_duration(std::chrono::nanoseconds d) {
  const std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  constexpr unit order[] = {{"d", 86'400'000'000'000},
                            {"h", 3'600'000'000'000},
                            {"min", 60'000'000'000},
                            {"s", 1'000'000'000},
                            {"ms", 1'000'000},
                            {"us", 1'000},
                            {"ns", 1}};
  // The largest unit that holds the duration whole, with a count parse_duration accepts (at most 1e9)...
  for (const auto& u : order) {
    if (ns % u.ns == 0 && ns / u.ns <= 1'000'000'000) return std::to_string(ns / u.ns) + std::string(u.name);
  }
  // ...else exact decimal seconds ("10050.005001s"; found by fuzz/rate_parse_fuzz: "10050005001us" did not parse).
  std::string fraction = std::to_string(ns % 1'000'000'000 + 1'000'000'000).substr(1);
  while (fraction.back() == '0') fraction.pop_back();
  return std::to_string(ns / 1'000'000'000) + "." + fraction + "s";
}

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string human_duration(std::int64_t ns) {
  if (ns == 0) return "0s";
  const double v = static_cast<double>(ns);
  const auto trim = [](double x, const char* unit) {
    std::string s = x >= 100 ? fixed(x, 0) : x >= 10 ? fixed(x, 1) : fixed(x, 2);
    if (s.find('.') != std::string::npos) {
      while (s.back() == '0') s.pop_back();
      if (s.back() == '.') s.pop_back();
    }
    return s + unit;
  };
  if (ns < 0) {
    // Not `"-" + human_duration(...)`: g++ 12 at -O3 reports a false -Wrestrict on it (GCC bug 105651).
    std::string positive = human_duration(ns == INT64_MIN ? INT64_MAX : -ns);
    positive.insert(positive.begin(), '-');
    return positive;
  }
  // Each unit up to where its rounded figure would reach the next unit (999.6us is "1ms", 59.96s is "1min", not
  // "1000us" and "60s").
  if (ns < 1'000) return std::to_string(ns) + "ns";
  if (ns < 999'500) return trim(v / 1e3, "us");
  if (ns < 999'500'000) return trim(v / 1e6, "ms");
  if (ns < 59'950'000'000) return trim(v / 1e9, "s");
  if (ns < 3'597'000'000'000) return trim(v / 60e9, "min");
  if (ns < 86'220'000'000'000) return trim(v / 3600e9, "h");
  return trim(v / 86400e9, "d");
}

}  // namespace admit::cli
