// admit/adaptive/aimd_limit.hpp — additive increase, multiplicative decrease: the loss-based limit of TCP Reno, as
// Netflix's AIMDLimit applies it to concurrency.
//
//   admit::aimd_limit aimd{{.initial_limit = 10, .backoff_ratio = 0.8, .timeout = 200ms}};
//   admit::adaptive_limiter<admit::aimd_limit> limiter{aimd};
//
// Behaviour, per sample:
// - Overload — a dropped sample, or a success slower than `timeout` — multiplies the limit by `backoff_ratio`
//   (rounded down, and by at least 1), once per round trip: samples acquired before the last cut was decided carry
//   news the cut has already acted on, and do not cut again. (Netflix cuts on every such sample, so one round trip
//   of late responses compounds 0.9^L and collapses the limit to its minimum; admit's simulation showed it.)
// - Otherwise, when the service is used (in_flight * 2 >= limit), the limit grows by `increase` per limit's worth
//   of samples — `increase / limit` per sample, so about `increase` per round trip at full load, TCP's congestion
//   avoidance. (Netflix adds 1 per sample, doubling the limit every round trip and overshooting by as much.)
// - Otherwise (the caller is not using its limit) nothing changes.
// The limit stays in [min_limit, max_limit]. Thread safety: a value; not thread-safe. update() costs O(1), no
// allocation.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include "admit/adaptive/limit_algorithm.hpp"

namespace admit {

struct aimd_options {
  // The limit before any sample. Default 20 (Netflix's). In [min_limit, max_limit].
  std::int64_t initial_limit = 20;
  // Lowest limit. Default 1. In [1, 2^31 - 1].
  std::int64_t min_limit = 1;
  // Highest limit. Default 1000. In [min_limit, 2^31 - 1].
  std::int64_t max_limit = 1000;
  // Factor applied on overload. Default 0.9 (Netflix's). In [0.5, 1).
  double backoff_ratio = 0.9;
  // Limit added per limit's worth of used samples (about per round trip). Default 1. In (0, 2^31 - 1].
  double increase = 1.0;
  // A success slower than this counts as overload. Default 5 s (Netflix's). Positive.
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
};

class aimd_limit {
 public:
  // Throws std::invalid_argument naming the first bad parameter and its value.
  explicit aimd_limit(aimd_options options = {}) : options_(options) {
    detail::check_limits("aimd_limit", options.initial_limit, options.min_limit, options.max_limit);
    detail::check_factor("aimd_limit", "backoff_ratio", options.backoff_ratio, 0.5, false, 1.0, true);
    detail::check_factor("aimd_limit", "increase", options.increase, 0.0, true,
                         static_cast<double>(detail::max_adaptive_limit), false);
    if (options.timeout <= std::chrono::nanoseconds::zero()) {
      detail::throw_bad_parameter("aimd_limit", "timeout", std::to_string(options.timeout.count()) + "ns", "positive");
    }
    estimate_ = static_cast<double>(options.initial_limit);
    limit_ = options.initial_limit;
  }

  // Applies one sample (see the header comment) and returns the new limit.
  std::int64_t update(const limit_sample& s) noexcept {
    if (s.dropped || s.rtt > options_.timeout) {
      if (cut_ && s.start < recovery_until_) return limit_;  // admitted before the last cut: already acted on
      const auto reduced = static_cast<std::int64_t>(std::floor(static_cast<double>(limit_) * options_.backoff_ratio));
      set(static_cast<double>(std::min(reduced, limit_ - 1)));
      cut_ = true;
      recovery_until_ = s.start + s.rtt;
    } else if (s.in_flight * 2 >= limit_) {
      // The sum of a limit's worth of steps falls short of the whole by a rounding error (ten steps of 0.1 from 10 make
      // 10.999...): an estimate within half a step of the next whole number (and within a billionth of it) takes it,
      // so that a limit's worth of used samples grows the limit by exactly `increase`.
      const double step = options_.increase / static_cast<double>(limit_);
      double next = estimate_ + step;
      if (const double whole = std::ceil(next); whole - next <= std::min(1e-9 * whole, step / 2)) next = whole;
      set(next);
    }
    return limit_;
  }

  std::int64_t limit() const noexcept { return limit_; }
  std::int64_t min_limit() const noexcept { return options_.min_limit; }
  std::int64_t max_limit() const noexcept { return options_.max_limit; }
  const aimd_options& options() const noexcept { return options_; }
  // The limit with its fractional growth (limit() is its floor).
  double estimate() const noexcept { return estimate_; }

 private:
  void set(double estimate) noexcept {
    estimate_ = std::clamp(estimate, static_cast<double>(options_.min_limit), static_cast<double>(options_.max_limit));
    limit_ = static_cast<std::int64_t>(estimate_);
  }

  aimd_options options_;
  double estimate_ = 0;  // the limit with its fractional growth
  std::int64_t limit_ = 0;
  bool cut_ = false;
  std::chrono::nanoseconds recovery_until_{0};  // release time of the sample that caused the last cut
};

}  // namespace admit
