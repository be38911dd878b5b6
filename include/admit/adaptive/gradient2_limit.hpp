// admit/adaptive/gradient2_limit.hpp — Netflix's Gradient2: compares the latency now (a short window) with its
// long-term average (a long window) and shrinks the limit in proportion when the short one rises above it.
//
//   admit::gradient2_limit g{{.initial_limit = 20, .max_limit = 500, .rtt_tolerance = 2.0}};
//   admit::adaptive_limiter<admit::gradient2_limit> limiter{g};
//
// Per successful sample (all latencies in nanoseconds, as doubles):
//   short = EMA over short_window samples of rtt      (short_window 1: the last sample, as Netflix since 2018)
//   long  = EMA over long_window samples of rtt, the first warmup_samples averaged plainly
//   if long > 2 * short: long *= 0.95                 (load has gone: let the baseline come down quickly)
//   if in_flight < limit / 2: stop                    (the caller does not use its limit: learn nothing about it)
//   gradient = clamp(rtt_tolerance * long / short, 0.5, 1)
//   target   = limit * gradient + (gradient == 1 ? queue_size : 0)
//   limit    = limit * (1 - smoothing) + target * smoothing, within [min_limit, max_limit]
// A dropped sample is the strongest overload signal: gradient 0.5, smoothed the same way (each drop: limit * 0.9 with
// the default smoothing); its rtt does not enter the averages (a fast 503 says nothing about service time). Two
// deliberate departures from Netflix's code, both proposed upstream (Netflix/concurrency-limits PR #134, issue #137):
// Netflix ignores drops, and adds queue_size even while it is shrinking; with either, a steady overload whose latency
// no longer changes lets the limit creep up to max_limit, because the long average follows the latency up. What this
// means: Gradient2 reacts to latency *rising*, not to a latency level. Under a steady overload it rises until something
// — drops, or a fresh rise in latency — pushes it back (see docs/adaptive_limits.md). Thread safety: a value; not
// thread-safe. update() costs O(1), no allocation.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "admit/adaptive/limit_algorithm.hpp"

namespace admit {

struct gradient2_options {
  // The limit before any sample. Default 20 (Netflix's). In [min_limit, max_limit].
  std::int64_t initial_limit = 20;
  // Lowest limit. Default 1 (Netflix: 20). In [1, 2^31 - 1].
  std::int64_t min_limit = 1;
  // Highest limit. Default 1000 (Netflix: 200). In [min_limit, 2^31 - 1].
  std::int64_t max_limit = 1000;
  // Weight of each new target in the limit. Default 0.2 (Netflix's). In (0, 1].
  double smoothing = 0.2;
  // How far the short latency may rise above the long one before the limit shrinks. Default 1.5 (Netflix's).
  // At least 1, finite.
  double rtt_tolerance = 1.5;
  // Samples in the long-term latency average. Default 600 (Netflix's). In [1, 2^31 - 1].
  std::int64_t long_window = 600;
  // Samples in the short-term latency average. Default 1 (the last sample). In [1, 2^31 - 1].
  std::int64_t short_window = 1;
  // First samples of the long average taken as a plain mean. Default 10 (Netflix's). In [1, 2^31 - 1].
  std::int64_t warmup_samples = 10;
  // Headroom added while latency is not rising, so the limit can grow. Default 4 (Netflix's). In [0, 2^31 - 1].
  std::int64_t queue_size = 4;
};

class gradient2_limit {
 public:
  // Throws std::invalid_argument naming the first bad parameter and its value.
  explicit gradient2_limit(gradient2_options options = {}) : options_(options) {
    constexpr const char* name = "gradient2_limit";
    detail::check_limits(name, options.initial_limit, options.min_limit, options.max_limit);
    detail::check_factor(name, "smoothing", options.smoothing, 0.0, true, 1.0, false);
    detail::check_factor(name, "rtt_tolerance", options.rtt_tolerance, 1.0, false, 1e9, false);
    detail::check_count(name, "long_window", options.long_window, 1);
    detail::check_count(name, "short_window", options.short_window, 1);
    detail::check_count(name, "warmup_samples", options.warmup_samples, 1);
    detail::check_count(name, "queue_size", options.queue_size, 0);
    estimate_ = static_cast<double>(options.initial_limit);
    limit_ = options.initial_limit;
    long_ = ema(options.long_window, options.warmup_samples);
    short_ = ema(options.short_window, 1);
  }

  // Applies one sample (see the header comment) and returns the new limit.
  std::int64_t update(const limit_sample& s) noexcept {
    if (s.dropped) return move_towards(estimate_ * 0.5);
    const double rtt = static_cast<double>(std::max<std::int64_t>(s.rtt.count(), 1));
    const double shortv = short_.add(rtt);
    double longv = long_.add(rtt);
    if (longv > 2 * shortv) longv = long_.scale(0.95);
    if (static_cast<double>(s.in_flight) < estimate_ / 2) return limit_;
    const double gradient = std::clamp(options_.rtt_tolerance * longv / shortv, 0.5, 1.0);
    const double queue = gradient >= 1.0 ? static_cast<double>(options_.queue_size) : 0.0;
    return move_towards(estimate_ * gradient + queue);
  }

  std::int64_t limit() const noexcept { return limit_; }
  std::int64_t min_limit() const noexcept { return options_.min_limit; }
  std::int64_t max_limit() const noexcept { return options_.max_limit; }
  const gradient2_options& options() const noexcept { return options_; }
  // The limit before rounding down (limit() is its floor).
  double estimate() const noexcept { return estimate_; }
  // The latency averages, in nanoseconds (0 before the first sample).
  double short_rtt() const noexcept { return short_.value; }
  double long_rtt() const noexcept { return long_.value; }

 private:
  // An exponential moving average over `window` samples (weight 2 / (window + 1)), the first `warmup` averaged.
  struct ema {
    ema() = default;
    ema(std::int64_t window, std::int64_t warmup_count)
        : factor(2.0 / (static_cast<double>(window) + 1.0)), warmup(warmup_count) {}
    double add(double x) noexcept {
      if (count < warmup) {
        ++count;
        sum += x;
        value = sum / static_cast<double>(count);
      } else {
        value += (x - value) * factor;
      }
      return value;
    }
    double scale(double f) noexcept { return value *= f; }
    double factor = 1;
    std::int64_t warmup = 1;
    std::int64_t count = 0;
    double sum = 0;
    double value = 0;
  };

  std::int64_t move_towards(double target) noexcept {
    const double next = estimate_ * (1 - options_.smoothing) + target * options_.smoothing;
    estimate_ = std::clamp(next, static_cast<double>(options_.min_limit), static_cast<double>(options_.max_limit));
    limit_ = static_cast<std::int64_t>(estimate_);
    return limit_;
  }

  gradient2_options options_;
  double estimate_ = 0;
  std::int64_t limit_ = 0;
  ema long_;
  ema short_;
};

}  // namespace admit
