// admit/redis/client/detail/backoff.hpp — reconnection delays: exponential, capped, jittered ("equal jitter": uniform
// in [d/2, d]), so that many clients that lost the same server do not come back in lockstep.
#pragma once

#include <chrono>
#include <cstdint>

namespace admit::redis::detail {

class backoff {
 public:
  backoff(std::chrono::nanoseconds initial, std::chrono::nanoseconds max) noexcept : initial_(initial), max_(max) {}

  // The ceiling d of the next delay: min(max, initial * 2^failures).
  std::chrono::nanoseconds ceiling() const noexcept {
    std::chrono::nanoseconds d = initial_;
    for (unsigned i = 0; i < failures_ && d < max_; ++i) d = d > max_ / 2 ? max_ : d * 2;
    return d < max_ ? d : max_;
  }

  // The next delay, in [d/2, d] chosen by `random` (any 64-bit value; uniform in, uniform out); counts a failure.
  std::chrono::nanoseconds next(std::uint64_t random) noexcept {
    const std::chrono::nanoseconds d = ceiling();
    if (failures_ < 64) ++failures_;
    const auto half = d.count() / 2;
    const auto span = static_cast<std::uint64_t>(d.count() - half) + 1;
    return std::chrono::nanoseconds(half + static_cast<std::int64_t>(random % span));
  }

  // After a successful connection.
  void reset() noexcept { failures_ = 0; }
  unsigned failures() const noexcept { return failures_; }

 private:
  std::chrono::nanoseconds initial_;
  std::chrono::nanoseconds max_;
  unsigned failures_ = 0;
};

// splitmix64: a small, well-mixed generator for jitter (not for anything secret).
inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace admit::redis::detail
