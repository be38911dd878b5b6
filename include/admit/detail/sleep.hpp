// admit/detail/sleep.hpp — sleep until a time point of any steady clock, waking early when a stop is requested.
//
// A clock may provide its own `static bool sleep_until(time_point, std::stop_token)` (the manual clock does: its
// sleepers wake when a test advances it); otherwise the thread sleeps on a condition variable against
// std::chrono::steady_clock, never polling.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>

#include "admit/clock.hpp"

namespace admit::detail {

template <class Clock>
concept clock_with_sleep = requires(typename Clock::time_point tp, std::stop_token st) {
  { Clock::sleep_until(tp, st) } -> std::same_as<bool>;
};

// Blocks the calling thread until `Clock::now() >= deadline` (returns true) or `stop` is requested (returns false;
// checked first, so a stop requested before the call returns false at once). A deadline in the past returns at once.
template <steady_clock_like Clock>
bool sleep_until(typename Clock::time_point deadline, std::stop_token stop) {
  if (stop.stop_requested()) return false;
  if constexpr (clock_with_sleep<Clock>) {
    return Clock::sleep_until(deadline, std::move(stop));
  } else {
    for (;;) {
      const auto remaining = deadline - Clock::now();
      if (remaining <= Clock::duration::zero()) return true;
      // Sleep against steady_clock for the remaining time, then re-check on Clock (they may tick differently). A day
      // at most at a time, so that a deadline near time_point::max() ("never") cannot overflow steady_clock's range.
      const std::chrono::nanoseconds day = std::chrono::hours(24);
      const auto step = std::chrono::ceil<std::chrono::steady_clock::duration>(
          remaining < day ? std::chrono::ceil<std::chrono::nanoseconds>(remaining) : day);
      const auto until = std::chrono::steady_clock::now() + step;
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      if (cv.wait_until(lock, stop, until, [] { return false; }) || stop.stop_requested()) return false;
    }
  }
}

}  // namespace admit::detail
