// admit/detail/deadline.hpp — `start + timeout` on a clock, for the try_acquire_for family and every other deadline
// computed from a timeout: a zero or negative timeout is `start` (do not wait), and a timeout beyond the clock's range
// saturates at time_point::max() ("never") instead of overflowing. The only place such a sum is written.
#pragma once

#include <chrono>
#include <optional>

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

// The same where "never" is std::nullopt (the Redis client's deadlines).
template <class Clock, class Rep, class Period>
std::optional<typename Clock::time_point> optional_deadline_after(typename Clock::time_point start,
                                                                  std::chrono::duration<Rep, Period> timeout) noexcept {
  const auto deadline = deadline_after<Clock>(start, timeout);
  if (deadline == Clock::time_point::max()) return std::nullopt;
  return deadline;
}

}  // namespace admit::detail
