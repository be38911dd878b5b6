#include "cli/recommend/search.hpp"

#include <algorithm>
#include <cmath>

namespace admit::cli {

search_result least_meeting(const search_range& range, const std::function<bool(std::int64_t)>& meets) {
  const std::int64_t start = std::clamp(range.start, range.min, range.max);
  std::int64_t step = std::max<std::int64_t>(range.first_step, 1);
  std::int64_t lo = 0, hi = 0;  // lo fails, hi meets
  if (meets(start)) {
    hi = start;
    for (;;) {
      if (hi == range.min) return {hi, false};
      const std::int64_t next = hi - std::min(step, hi - range.min);
      if (!meets(next)) {
        lo = next;
        break;
      }
      hi = next;
      step *= 4;
    }
  } else {
    lo = start;
    for (;;) {
      if (lo == range.max) return {std::nullopt, false};
      const std::int64_t next = lo + std::min(step, range.max - lo);
      if (meets(next)) {
        hi = next;
        break;
      }
      lo = next;
      step *= 4;
    }
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (meets(mid) ? hi : lo) = mid;
  }
  return {hi, true};
}

// The double nearest the decimal: the mantissa and 10^k (k <= 22) are exact doubles, and one division or
// multiplication of exact operands is rounded once. (mantissa × 10^-k took two roundings: 1.15 was 1.1500000000000001,
// where `admit replay --rate 1.15/s` reads 1.15.)
double decimal::value() const noexcept {
  const double m = static_cast<double>(mantissa);
  return exponent >= 0 ? m * std::pow(10.0, exponent) : m / std::pow(10.0, -exponent);
}

std::string decimal::text() const {
  const std::string digits = std::to_string(mantissa);
  if (exponent >= 0) return mantissa == 0 ? digits : digits + std::string(static_cast<std::size_t>(exponent), '0');
  // Built whole rather than by insert(), which GCC 12 at -O3 misreads as an overlapping copy (-Wrestrict).
  const auto point = static_cast<std::size_t>(-exponent);
  const std::string padded = digits.size() <= point ? std::string(point - digits.size() + 1, '0') + digits : digits;
  std::string whole = padded.substr(0, padded.size() - point);
  std::string fraction = padded.substr(padded.size() - point);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return fraction.empty() ? whole : whole + "." + fraction;
}

decimal decimal::tighter() const noexcept { return {mantissa * 99, exponent - 2}; }

decimal rate_grid::at(std::int64_t position) noexcept {
  position = std::clamp<std::int64_t>(position, 0, last);
  return {100 + position % per_decade, min_exponent + static_cast<int>(position / per_decade)};
}

std::int64_t rate_grid::floor(double per_second) noexcept {
  if (!(per_second >= at(0).value())) return 0;
  if (per_second >= at(last).value()) return last;
  // The estimate from the logarithm can be one off either way (rounding); step to the exact answer.
  const int e = static_cast<int>(std::floor(std::log10(per_second))) - 2;
  auto m = static_cast<std::int64_t>(per_second / std::pow(10.0, e));
  std::int64_t p = std::clamp<std::int64_t>((e - min_exponent) * per_decade + (m - 100), 0, last);
  while (p > 0 && at(p).value() > per_second) --p;
  while (p < last && at(p + 1).value() <= per_second) ++p;
  return p;
}

}  // namespace admit::cli
