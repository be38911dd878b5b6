// admit/detail/saturating.hpp — int64 arithmetic that clamps instead of overflowing, for nanosecond time values.
#pragma once

#include <cstdint>
#include <limits>

namespace admit::detail {

inline constexpr std::int64_t ns_max = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t ns_min = std::numeric_limits<std::int64_t>::min();

[[nodiscard]] constexpr std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? ns_max : ns_min;
  return r;
}

[[nodiscard]] constexpr std::int64_t sat_sub(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? ns_max : ns_min;
  return r;
}

// a · b, clamped to ns_min / ns_max by the sign of the true product.
[[nodiscard]] constexpr std::int64_t sat_mul(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? ns_min : ns_max;
  return r;
}

}  // namespace admit::detail
