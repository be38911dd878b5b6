// admit/detail/floor_div.hpp — integer division rounding towards negative infinity, for aligning time points to
// windows (a window [k·w, (k+1)·w) holds t iff k == floor_div(t, w), before the epoch too).
#pragma once

#include <cstdint>

namespace admit::detail {

// floor(a / b), for b != 0 of either sign (and not ns_min / −1).
[[nodiscard]] constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a % b < 0) != (b < 0)) ? q - 1 : q;
}

// a − floor_div(a, b)·b: in [0, b) for b > 0.
[[nodiscard]] constexpr std::int64_t floor_mod(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t r = a % b;
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

}  // namespace admit::detail
