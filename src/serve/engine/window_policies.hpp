// serve/engine/window_policies.hpp — the clock and the two keyed policies (admit/keyed_policy.hpp) the in-process
// backend adds to admit's own: envoyproxy/ratelimit's fixed window, and a sliding window counter per key.
//
//   admit::keyed<upstream_fixed_window> counters{upstream_fixed_window::config_type{60'000'000'000}};
//   admit::decision d = counters.decide_at(key, unix_clock::from_system(now), hits);   // d.remaining: the count
//
// The clock. admit's limiters take a steady_clock_like Clock; `admit serve` is handed system_clock time (Unix time,
// because envoyproxy/ratelimit's fixed windows are aligned to it: a minute window starts at each minute of the
// calendar). unix_clock is a clock type whose epoch is the Unix epoch and whose times are always passed explicitly
// (decide_at): it claims is_steady only so that admit's keyed store accepts it. That is acceptable because every
// policy here, like admit's own, treats a time earlier than one it has seen as that latest time (a backwards step of
// the system clock is counted against the newest window: it never admits more than the newest time would), and
// forward steps only move windows on, as they move envoyproxy/ratelimit's Redis keys on.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

#include "admit/decision.hpp"
#include "admit/detail/floor_div.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/sliding_window_math.hpp"

namespace admit::serve {

struct unix_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<unix_clock>;
  static constexpr bool is_steady = true;  // not so (it is the system clock); see the header comment
  static time_point now() noexcept { return from_system(std::chrono::system_clock::now()); }
  static time_point from_system(std::chrono::system_clock::time_point t) noexcept {
    return time_point{std::chrono::duration_cast<duration>(t.time_since_epoch())};
  }
};

// envoyproxy/ratelimit's fixed window (INCRBY + EXPIRE on a key named after the window's start): windows of
// `window_ns` aligned to the Unix epoch; every hit is added to its window's counter, admitted or not (INCRBY counts a
// refused hit too), so whether a hit is over the limit depends only on the count after it — and the limit is not part
// of the counter (a caller's override of the limit shares the counter, as there). So this policy does not decide: its
// decision is always `admitted` (the hit is counted) and carries the count after the hit in `remaining` (saturated to
// int64) and the time to the window's end in `reset_after`; the backend compares the count with the limit. (keyed
// stores a state only when a decision admits; here every hit must be stored, which this makes so.) Under
// over_limit_hits: drop (config `drop`, with the rule's limit) a hit that would take the count over the limit is
// refused instead and counts nothing; `remaining` is then the count it would have made, above the limit.
//
// A time before the state's window (a backwards clock step, a stale time) is counted in the state's window.
// full_at: the window's end (after it the counter is gone, as the Redis key expires). full_since(at): for any now >=
// at a new window; for an earlier now a window already at its maximum count — never more room than a dropped key had.
struct upstream_fixed_window {
  using clock_type = unix_clock;
  struct config_type {
    std::int64_t window_ns = 1'000'000'000;  // > 0
    bool drop = false;                       // over_limit_hits: drop — a hit over `limit` is not counted
    std::uint64_t limit = 0;                 // with drop: the rule's limit
  };
  struct state_type {
    std::int64_t window_start = admit::detail::ns_min;  // ns_min: no window yet
    std::uint64_t count = 0;
    friend bool operator==(const state_type&, const state_type&) = default;
  };
  static constexpr std::uint64_t saturated = std::numeric_limits<std::uint64_t>::max() / 2;

  static decision decide(const config_type& c, state_type& s, std::int64_t now_ns, std::int64_t n) noexcept {
    const std::int64_t start = now_ns - admit::detail::floor_mod(now_ns, c.window_ns);
    if (start > s.window_start) s = {start, 0};
    const auto add = static_cast<std::uint64_t>(n);
    const std::uint64_t after = s.count > saturated - add ? saturated : s.count + add;
    decision d;
    d.admitted = !c.drop || after <= c.limit;
    if (d.admitted) s.count = after;
    d.limit = 1;  // not a key-cap refusal (limit 0)
    d.remaining = static_cast<std::int64_t>(after);
    d.reset_after =
        std::chrono::nanoseconds{admit::detail::sat_sub(admit::detail::sat_add(s.window_start, c.window_ns), now_ns)};
    return d;
  }
  static std::int64_t full_at(const config_type& c, const state_type& s) noexcept {
    return s.window_start == admit::detail::ns_min ? admit::detail::ns_min
                                                   : admit::detail::sat_add(s.window_start, c.window_ns);
  }
  static state_type full_since(const config_type& c, std::int64_t at) noexcept {
    if (at == admit::detail::ns_min) return {};
    return {admit::detail::sat_sub(at, c.window_ns), saturated};
  }
};

// The sliding window counter per key, with admit::sliding_window's rule: windows of `window_ns` aligned to the epoch,
// n admitted iff previous · (window − elapsed) / window + current + n <= limit, computed exactly in integers; a
// refusal counts nothing. `remaining` is what size-1 requests would still be admitted right after; retry_after, of a
// refusal, when this request would fit if nothing else came (nanoseconds::max() when n > limit), as
// admit::sliding_window says it (detail/sliding_window_math.hpp); reset_after is when both counts have left the
// estimate. A time before the state's window is judged at the start of that window.
struct keyed_sliding_window {
  using clock_type = unix_clock;
  struct config_type {
    std::int64_t limit = 1;  // >= 1
    std::int64_t window_ns = 1'000'000'000;
  };
  struct state_type {
    std::int64_t window = admit::detail::ns_min;  // index of the current window; ns_min: none
    std::int64_t current = 0;
    std::int64_t previous = 0;
    friend bool operator==(const state_type&, const state_type&) = default;
  };

  static decision decide(const config_type& c, state_type& s, std::int64_t now_ns, std::int64_t n) noexcept {
    const std::int64_t w = admit::detail::floor_div(now_ns, c.window_ns);
    state_type next = s;
    if (w > s.window) {
      next.previous = w == s.window + 1 ? s.current : 0;
      next.current = 0;
      next.window = w;
    }
    const std::int64_t start = admit::detail::sat_mul(next.window, c.window_ns);
    const std::int64_t elapsed = w < next.window ? 0 : now_ns - start;
    const admit::detail::sliding_window_math m{c.limit, c.window_ns};
    const auto room = [&](std::int64_t current) {
      return std::max<std::int64_t>(0, c.limit - current - m.ceil_weighted(next.previous, elapsed));
    };
    decision d;
    d.limit = c.limit;
    if (m.fits(next.previous, next.current, elapsed, n)) {
      d.admitted = true;
      next.current += n;
      if (n > 0) s = next;  // n == 0 leaves the stored state as it was (keyed then stores nothing new)
    } else {
      d.retry_after = std::chrono::nanoseconds{m.retry_ns(start, next.previous, next.current, n, now_ns)};
    }
    // `next` is the state at now (rolled to now's window; with the hit when admitted)
    d.remaining = room(next.current);
    const std::int64_t clear = next.current > 0    ? admit::detail::sat_mul(next.window + 2, c.window_ns)
                               : next.previous > 0 ? admit::detail::sat_mul(next.window + 1, c.window_ns)
                                                   : now_ns;
    d.reset_after = std::chrono::nanoseconds{std::max<std::int64_t>(0, admit::detail::sat_sub(clear, now_ns))};
    return d;
  }
  static std::int64_t full_at(const config_type& c, const state_type& s) noexcept {
    if (s.window == admit::detail::ns_min) return admit::detail::ns_min;
    if (s.current > 0) return admit::detail::sat_mul(s.window + 2, c.window_ns);
    if (s.previous > 0) return admit::detail::sat_mul(s.window + 1, c.window_ns);
    return admit::detail::ns_min;
  }
  // Full from `at` on; before it, the windows just before `at` are at the limit: no more room than a dropped key.
  static state_type full_since(const config_type& c, std::int64_t at) noexcept {
    if (at == admit::detail::ns_min) return {};
    return {admit::detail::floor_div(at, c.window_ns) - 2, c.limit, c.limit};
  }
};

}  // namespace admit::serve
