// admit/adaptive/limit_algorithm.hpp — what an adaptive limit algorithm is: a small value type that reads samples
// (latency, in-flight, dropped) and moves a concurrency limit between a configured minimum and maximum.
//
//   admit::aimd_limit aimd{{.initial_limit = 10, .min_limit = 1, .max_limit = 100}};
//   aimd.update({.start = 0s, .rtt = 20ms, .in_flight = 9, .dropped = false});   // aimd.limit() grows towards 100
//
// The algorithms (aimd_limit, gradient2_limit, vegas_limit) are plain values: not thread-safe, no clock, no
// allocation; copy them to snapshot their state. admit::basic_adaptive_limiter (<admit/adaptive_limit.hpp>) calls
// update() under its own mutex, as Netflix's AbstractLimit.onSample is synchronized.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/detail/format_double.hpp"

namespace admit {

// One finished request, as the limiter reports it to the algorithm.
struct limit_sample {
  // When the permit was acquired, as time since the limiter's clock epoch. Lets an algorithm tell samples admitted
  // before its last decision from those admitted after it.
  std::chrono::nanoseconds start{0};
  // Acquire to release: the request's latency (round-trip time). Never negative (the limiter clamps it at zero).
  std::chrono::nanoseconds rtt{0};
  // Permits held just after this one was acquired, itself included (Netflix's `inflight`).
  std::int64_t in_flight = 0;
  // True for an overload signal — the request timed out, or the service answered 503 — instead of a success.
  bool dropped = false;
};

// The common shape of a limit algorithm. `limit()` is always in [min_limit(), max_limit()], and min_limit() >= 1.
// update() takes one sample and returns the new limit (the same as limit() afterwards).
template <class A>
concept limit_algorithm = std::copyable<A> && requires(A& a, const A& c, const limit_sample& s) {
  { c.limit() } -> std::same_as<std::int64_t>;
  { c.min_limit() } -> std::same_as<std::int64_t>;
  { c.max_limit() } -> std::same_as<std::int64_t>;
  { a.update(s) } -> std::same_as<std::int64_t>;
};

namespace detail {

// Limits are kept in doubles by some algorithms; up to 2^31 - 1 every integer and every step is exact.
inline constexpr std::int64_t max_adaptive_limit = 2'147'483'647;

[[noreturn]] inline void throw_bad_parameter(const char* algorithm, const char* name, const std::string& value,
                                             const char* requirement) {
  throw std::invalid_argument(std::string("admit::") + algorithm + ": " + name + " must be " + requirement + ", got " +
                              value);
}

// 1 <= min_limit <= initial_limit <= max_limit <= 2^31 - 1, each violation named with its value.
inline void check_limits(const char* algorithm, std::int64_t initial, std::int64_t min, std::int64_t max) {
  if (min < 1 || min > max_adaptive_limit) {
    throw_bad_parameter(algorithm, "min_limit", std::to_string(min), "in [1, 2147483647]");
  }
  if (max < min || max > max_adaptive_limit) {
    throw_bad_parameter(algorithm, "max_limit", std::to_string(max),
                        ("in [min_limit " + std::to_string(min) + ", 2147483647]").c_str());
  }
  if (initial < min || initial > max) {
    throw_bad_parameter(algorithm, "initial_limit", std::to_string(initial),
                        ("in [min_limit " + std::to_string(min) + ", max_limit " + std::to_string(max) + "]").c_str());
  }
}

// lo <= v <= hi (or lo < v, v < hi with the open flags); NaN always fails.
inline void check_factor(const char* algorithm, const char* name, double v, double lo, bool lo_open, double hi,
                         bool hi_open) {
  const bool above = lo_open ? v > lo : v >= lo;
  const bool below = hi_open ? v < hi : v <= hi;
  if (!(above && below)) {
    const std::string range =
        std::string(lo_open ? "(" : "[") + format_double(lo) + ", " + format_double(hi) + (hi_open ? ")" : "]");
    throw_bad_parameter(algorithm, name, format_double(v), ("in " + range).c_str());
  }
}

inline void check_count(const char* algorithm, const char* name, std::int64_t v, std::int64_t min) {
  if (v < min || v > max_adaptive_limit) {
    throw_bad_parameter(algorithm, name, std::to_string(v), ("in [" + std::to_string(min) + ", 2147483647]").c_str());
  }
}

// Netflix's Log10RootFunction for limits below 1000: max(1, floor(log10(limit))). Used above 1000 too (Netflix
// switches to sqrt there, a jump from 2 to 31 at 1000 that admit does not reproduce).
[[nodiscard]] inline std::int64_t log10_root(double limit) noexcept {
  std::int64_t r = 0;
  for (double v = limit; v >= 10.0; v /= 10.0) ++r;
  return r < 1 ? 1 : r;
}

}  // namespace detail
}  // namespace admit
