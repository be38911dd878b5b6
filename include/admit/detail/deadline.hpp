// admit/detail/deadline.hpp — `start + timeout` on a clock, for the try_acquire_for family: a zero or negative
// timeout is `start` (do not wait), and a timeout beyond the clock's range saturates at time_point::max() ("never")
// instead of overflowing.
#pragma once

#include <chrono>

namespace admit::detail {

template <class Clock, class Rep, class Period>
typename Clock::time_point deadline_after(typename Clock::time_point start,
                                          std::chrono::duration<Rep, Period> timeout) noexcept {
  using time_point = typename Clock::time_point;
  if (timeout <= timeout.zero()) return start;
  // Compared in double seconds so that no duration conversion can overflow.
  if (std::chrono::duration<double>(timeout) >= std::chrono::duration<double>(time_point::max() - start)) {
    return time_point::max();
  }
  return start + std::chrono::ceil<typename Clock::duration>(timeout);
}

}  // namespace admit::detail
