// admit/detail/ceil_ns.hpp — rounding time up to whole nanoseconds (or clock ticks), saturating instead of
// overflowing. Up, because a limiter that rounds a wait or a cost down would let a caller through early.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>

#include "admit/detail/saturating.hpp"

namespace admit::detail {

// ceil(ns) as an int64: 0 for zero, negative or NaN, ns_max from ~9.2e18 (+infinity included).
[[nodiscard]] inline std::int64_t ceil_ns(double ns) noexcept {
  if (!(ns > 0)) return 0;
  if (!(ns < 9.2e18)) return ns_max;
  return static_cast<std::int64_t>(std::ceil(ns));
}

// A duration of any representation in whole nanoseconds, rounded up: 0 for zero, negative or NaN, ns_max when it
// does not fit. Converts through long double, so every int64 count is exact and no conversion overflows.
template <class Rep, class Period>
[[nodiscard]] std::int64_t ceil_ns(std::chrono::duration<Rep, Period> d) noexcept {
  const long double ns = std::chrono::duration<long double, std::nano>(d).count();
  if (!(ns > 0)) return 0;
  if (ns >= 9.2e18L) return ns_max;
  return static_cast<std::int64_t>(std::ceil(ns));
}

// The first time point of TimePoint's clock at or after `ns` nanoseconds since its epoch (clock.hpp's from_ns
// truncates instead), so that sleeping until it never wakes a caller before its time.
template <class TimePoint>
[[nodiscard]] constexpr TimePoint ceil_time_point(std::int64_t ns) noexcept {
  return TimePoint{std::chrono::ceil<typename TimePoint::duration>(std::chrono::nanoseconds{ns})};
}

}  // namespace admit::detail
