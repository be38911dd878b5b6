// admit/detail/sliding_window_math.hpp — the sliding window counter's rule as pure functions of its limit and window
// (nanoseconds): admit::sliding_window and admit serve's keyed sliding window decide with these, so both answer the
// same and say the same wait. Exact in 128-bit integers; no floating point.
//
// The estimate `elapsed` ns into a window is cur + prev · (window − elapsed) / window; n fits iff it stays <= limit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "admit/detail/saturating.hpp"

namespace admit::detail {

struct sliding_window_math {
  __extension__ typedef unsigned __int128 u128;

  std::int64_t limit;   // >= 1
  std::int64_t window;  // ns, >= 1

  // ceil(prev · (window − elapsed) / window): the previous window's share of the estimate, rounded up.
  [[nodiscard]] std::int64_t ceil_weighted(std::int64_t prev, std::int64_t elapsed) const noexcept {
    const u128 num = static_cast<u128>(prev) * static_cast<u128>(window - elapsed);
    const u128 w = static_cast<u128>(window);
    return static_cast<std::int64_t>((num + w - 1) / w);
  }

  // Does n fit with these counters `elapsed` ns into the window? prev·(w − e) + (cur + n)·w <= limit·w, exactly.
  // n == 0 always fits, even when a `now` behind the newest window makes the estimate exceed the limit.
  [[nodiscard]] bool fits(std::int64_t prev, std::int64_t cur, std::int64_t elapsed, std::int64_t n) const noexcept {
    if (n == 0) return true;
    if (n > limit - cur) return false;
    const u128 room = static_cast<u128>(limit - cur - n) * static_cast<u128>(window);
    return static_cast<u128>(prev) * static_cast<u128>(window - elapsed) <= room;
  }

  // The earliest e in [0, w) with prev·(w − e) <= room·w, or w when there is none. prev > 0.
  [[nodiscard]] std::int64_t first_fit(std::int64_t prev, std::int64_t room) const noexcept {
    const u128 q = static_cast<u128>(room) * static_cast<u128>(window) / static_cast<u128>(prev);
    if (q >= static_cast<u128>(window)) return 0;
    return window - static_cast<std::int64_t>(q);
  }

  // ns from t until n fits, for a request refused at t with these counters in the window starting at `start`, if
  // nothing else is admitted meanwhile; ns_max when n > limit (it never fits).
  [[nodiscard]] std::int64_t retry_ns(std::int64_t start, std::int64_t prev, std::int64_t cur, std::int64_t n,
                                      std::int64_t t) const noexcept {
    if (n > limit) return ns_max;
    std::int64_t at = 0;
    if (n <= limit - cur && prev > 0 && first_fit(prev, limit - cur - n) < window) {
      // Later in this window, as the previous window's weight decays.
      at = sat_add(start, first_fit(prev, limit - cur - n));
    } else if (cur == 0 || first_fit(cur, limit - n) < window) {
      // In the next window, where this window's count becomes the previous one.
      const std::int64_t e = cur == 0 ? 0 : first_fit(cur, limit - n);
      at = sat_add(sat_add(start, window), e);
    } else {
      // n == limit and this window has counts: the window after the next starts empty.
      at = sat_add(sat_add(start, window), window);
    }
    return std::max<std::int64_t>(0, sat_sub(at, t));
  }
};

}  // namespace admit::detail
