// cli/common/window_limit.hpp — the per-window limit of a window algorithm (fixed-window, sliding-window, sliding-log),
// from the rate and the window the user gave: limit = rate × window, exactly.
//
//   window_limit(rate::parse("100/s"), "100/s", 500ms)  ->  50
//   window_limit(rate::parse("199/s"), "199/s", 10ms)   ->  throws: "--rate 199/s with --window 10ms gives 1.99
//       requests per window, and a window counts whole requests; use --rate 100/s or 200/s (1 or 2 per 10ms window),
//       or --window 1s (199 per window)"
//
// A window counts whole requests, so a product that is not a whole number is refused rather than rounded: the limit
// enforced is always the one asked for. The message names the nearest rates (in the unit of the rate as given) and
// the nearest window that would fit. Floating-point noise of the rate's own arithmetic (a relative 1e-9 of the
// product) is forgiven: "10/3s" with a 300ms window is 1.
// Both `admit replay` and `admit decide` get their window limits here (through resolve(), cli/replay/replay.hpp).
// `admit decide` also refuses here what Redis, counting time in whole microseconds, would round: a window that is not a
// whole number of them (require_whole_window) and a rate whose interval would round up by more than 0.1%
// (require_close_rate).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "admit/rate.hpp"

namespace admit::cli {

// rate × window when it is a whole number from 1 to max_count. Throws std::invalid_argument naming both
// options (the rate as `rate_text`, or r.to_string() when that is empty) and the values that would fit, when the
// product is not whole or is below 1; and when it is above max_count, the rate is infinite or the
// window not positive. (Each limiter's own, lower maximum is checked by resolve(), which names the algorithm.)
[[nodiscard]] std::int64_t window_limit(const admit::rate& r, std::string_view rate_text,
                                        std::chrono::nanoseconds window);

// Refuses a window that is not a whole number of `granularity` (the distributed limiters count windows in whole
// microseconds, and would round it up): throws std::invalid_argument naming the window, the unit and the two nearest
// windows that fit, e.g. "--window 1500ns is not a whole number of microseconds, which Redis counts windows in; use
// --window 1us or 2us". `where` names what imposes the unit ("Redis"). Does nothing for a granularity <= 1ns.
void require_whole_window(std::chrono::nanoseconds window, std::chrono::nanoseconds granularity,
                          std::string_view unit_name, std::string_view where);

// The most the distributed rate limiters' rounding may slow a rate before `admit decide` refuses it: 0.1%.
inline constexpr double max_rate_slowdown = 1e-3;

// Refuses a rate that a distributed rate limiter (gcra, token-bucket) would slow by more than max_rate_slowdown.
// They space requests 1/rate apart, rounded up to whole nanoseconds and then to a whole `granularity` (Redis: 1us;
// admit/redis/gcra.hpp), so the rate enforced is never above the one asked for: every rate up to 1 per
// granularity / max_rate_slowdown (1,000/s for 1us) is accepted, a faster one only when its interval is within 0.1%
// of a whole number of granularity. Throws std::invalid_argument naming the rate, what it would become and the two
// nearest rates that fit, e.g. "--rate 3000/s would be slowed to 2994.012/s: Redis spaces requests a whole number of
// microseconds apart (334, not 333.333); use --rate 1/333us or 1/334us (3003.003/s or 2994.012/s)". `rate_text` is
// the rate as the user wrote it (r.to_string() when empty); rate inf and 0 are left to the limiter. Does nothing for
// a granularity <= 1ns.
void require_close_rate(const admit::rate& r, std::string_view rate_text, std::chrono::nanoseconds granularity,
                        std::string_view unit_name, std::string_view where);

// The granularity of the limits in Redis (admit::redis's limiters and admissions count time in whole microseconds).
inline constexpr std::chrono::nanoseconds redis_granularity = std::chrono::microseconds(1);

}  // namespace admit::cli
