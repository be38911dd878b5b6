// admit/clock.hpp — what admit asks of a clock, and a coarse steady clock for the fastest decisions.
//
// Every limiter is `basic_x<Clock>`; `Clock` must be a steady std::chrono clock whose duration converts to
// nanoseconds without loss of range for the next ~290 years (std::chrono::steady_clock on Linux, the manual clock of
// <admit/testing/manual_clock.hpp>, coarse_steady_clock below).
//
//   admit::basic_token_bucket<admit::coarse_steady_clock> fast{admit::rate::per_second(1000), 10};
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>

namespace admit {

template <class C>
concept steady_clock_like = std::chrono::is_clock_v<C> && C::is_steady;

// Nanoseconds since the clock's epoch, the unit of every limiter's state.
template <steady_clock_like Clock>
[[nodiscard]] constexpr std::int64_t to_ns(typename Clock::time_point tp) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
}

template <steady_clock_like Clock>
[[nodiscard]] constexpr typename Clock::time_point from_ns(std::int64_t ns) noexcept {
  return typename Clock::time_point{std::chrono::duration_cast<typename Clock::duration>(std::chrono::nanoseconds{ns})};
}

// A steady clock read from CLOCK_MONOTONIC_COARSE: a few nanoseconds per read instead of ~20, at the price of
// resolution — it advances once per kernel tick (1–4 ms on Debian's kernels, see clock_getres). Limits: a limiter on
// this clock sees time move in tick-sized steps, so within one tick it admits at most the tokens that had accrued by
// the tick's start (it never over-admits), and rates above ~1 token per tick are served in bursts of one tick's worth
// rather than evenly. Use it for rates whose interval is well above the tick and where ns per decision matter.
// Same epoch as CLOCK_MONOTONIC (std::chrono::steady_clock on Linux), but a different type: do not mix time points.
struct coarse_steady_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<coarse_steady_clock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return time_point{duration{std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec}};
  }

  // The clock's resolution (the kernel tick), as clock_getres reports it.
  static duration resolution() noexcept {
    timespec ts{};
    ::clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
    return duration{std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec};
  }
};

}  // namespace admit
