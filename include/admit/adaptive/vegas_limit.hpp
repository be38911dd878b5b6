// admit/adaptive/vegas_limit.hpp — TCP Vegas applied to concurrency, as Netflix's VegasLimit: estimate how many
// requests are queued from the latency above the no-load latency, and keep that queue between alpha and beta.
//
//   admit::vegas_limit vegas{{.initial_limit = 10, .max_limit = 500}};
//   admit::adaptive_limiter<admit::vegas_limit> limiter{vegas};
//
// Per successful sample, with l = max(1, floor(log10(limit))) (Netflix's Log10RootFunction below 1000):
//   every ~probe_multiplier * limit samples (jittered by a factor in [0.5, 1)): rtt_noload = rtt, stop — a probe,
//     so that a service whose base latency has really grown is not judged against a stale minimum
//   if rtt < rtt_noload (or none yet): rtt_noload = rtt, stop
//   if in_flight * 2 < limit: stop                         (the caller does not use its limit)
//   queue = ceil(limit * (1 - rtt_noload / rtt))           (Little's law: requests waiting rather than served)
//   queue <= l:          target = limit + beta * l          (no queue: grow fast)
//   queue <  alpha * l:  target = limit + l
//   queue >  beta * l:   target = limit - l
//   otherwise:           no change                          (the sweet spot)
//   limit = (1 - smoothing) * limit + smoothing * target, within [min_limit, max_limit]
// Once per round trip: a sample acquired before the limit last moved (before the release of the sample that moved
// it) reflects the old limit and moves nothing — TCP Vegas adjusts once per RTT. (Netflix adjusts on every sample:
// a round trip of samples that all still see the old queue moves the limit by a whole limit's worth, which in
// admit's simulation dipped the limit to half the capacity.) It still feeds rtt_noload and the probe count.
// A dropped sample sets target = limit - l, whatever the in-flight; its rtt does not enter rtt_noload (Netflix
// feeds it, so one fast 503 could become the no-load latency) and it does not count towards the next probe.
// Under a steady overload the queue estimate settles between alpha * l and beta * l: the limit settles a few above
// the service's capacity. Deterministic: the probe jitter comes from `seed`. Thread safety: a value; not
// thread-safe. update() costs O(1), no allocation.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include "admit/adaptive/limit_algorithm.hpp"

namespace admit {

struct vegas_options {
  // The limit before any sample. Default 20 (Netflix's). In [min_limit, max_limit].
  std::int64_t initial_limit = 20;
  // Lowest limit. Default 1 (Netflix's). In [1, 2^31 - 1].
  std::int64_t min_limit = 1;
  // Highest limit. Default 1000 (Netflix's). In [min_limit, 2^31 - 1].
  std::int64_t max_limit = 1000;
  // Below alpha * l queued requests the limit grows. Default 3 (Netflix's). In (0, beta].
  double alpha = 3;
  // Above beta * l queued requests the limit shrinks; with no queue it grows by beta * l. Default 6 (Netflix's).
  // In [alpha, 2^31 - 1].
  double beta = 6;
  // Weight of each new target in the limit. Default 1 (Netflix's: no smoothing). In (0, 1].
  double smoothing = 1.0;
  // A probe every probe_multiplier * limit samples, jittered. Default 30 (Netflix's). In [1, 2^31 - 1].
  std::int64_t probe_multiplier = 30;
  // Seed of the probe jitter. Default 0.
  std::uint64_t seed = 0;
};

class vegas_limit {
 public:
  // Throws std::invalid_argument naming the first bad parameter and its value.
  explicit vegas_limit(vegas_options options = {}) : options_(options), rng_(options.seed) {
    constexpr const char* name = "vegas_limit";
    detail::check_limits(name, options.initial_limit, options.min_limit, options.max_limit);
    detail::check_factor(name, "alpha", options.alpha, 0.0, true, static_cast<double>(detail::max_adaptive_limit),
                         false);
    if (options.beta < options.alpha) {  // named as such: a beta left at its default is below an alpha given above it
      detail::throw_bad_parameter(name, "beta", detail::format_double(options.beta),
                                  ("at least alpha (" + detail::format_double(options.alpha) + "; beta is " +
                                   detail::format_double(vegas_options{}.beta) + " unless given)")
                                      .c_str());
    }
    detail::check_factor(name, "beta", options.beta, options.alpha, false,
                         static_cast<double>(detail::max_adaptive_limit), false);
    detail::check_factor(name, "smoothing", options.smoothing, 0.0, true, 1.0, false);
    detail::check_count(name, "probe_multiplier", options.probe_multiplier, 1);
    estimate_ = static_cast<double>(options.initial_limit);
    limit_ = options.initial_limit;
    jitter_ = next_jitter();
  }

  // Applies one sample (see the header comment) and returns the new limit.
  std::int64_t update(const limit_sample& s) noexcept {
    const double l = static_cast<double>(detail::log10_root(estimate_));
    const bool stale = changed_ && s.start < changed_at_;  // acquired before the last change: already acted on
    if (s.dropped) return stale ? limit_ : move_towards(estimate_ - l, s);
    const std::int64_t rtt = std::max<std::int64_t>(s.rtt.count(), 1);
    ++probe_count_;
    if (static_cast<double>(probe_count_) >= jitter_ * static_cast<double>(options_.probe_multiplier) * estimate_) {
      jitter_ = next_jitter();
      probe_count_ = 0;
      rtt_noload_ = rtt;
      return limit_;
    }
    if (rtt_noload_ == 0 || rtt < rtt_noload_) {
      rtt_noload_ = rtt;
      return limit_;
    }
    if (stale || static_cast<double>(s.in_flight) * 2 < estimate_) return limit_;
    const double queue = std::ceil(estimate_ * (1.0 - static_cast<double>(rtt_noload_) / static_cast<double>(rtt)));
    if (queue <= l) return move_towards(estimate_ + options_.beta * l, s);
    if (queue < options_.alpha * l) return move_towards(estimate_ + l, s);
    if (queue > options_.beta * l) return move_towards(estimate_ - l, s);
    return limit_;
  }

  std::int64_t limit() const noexcept { return limit_; }
  std::int64_t min_limit() const noexcept { return options_.min_limit; }
  std::int64_t max_limit() const noexcept { return options_.max_limit; }
  const vegas_options& options() const noexcept { return options_; }
  // The limit before rounding down (limit() is its floor).
  double estimate() const noexcept { return estimate_; }
  // The no-load latency in use (0 before the first sample).
  std::chrono::nanoseconds rtt_noload() const noexcept { return std::chrono::nanoseconds(rtt_noload_); }

 private:
  std::int64_t move_towards(double target, const limit_sample& s) noexcept {
    changed_ = true;
    changed_at_ = s.start + s.rtt;
    const double lo = static_cast<double>(options_.min_limit);
    const double hi = static_cast<double>(options_.max_limit);
    const double next = (1 - options_.smoothing) * estimate_ + options_.smoothing * std::clamp(target, lo, hi);
    estimate_ = std::clamp(next, lo, hi);
    limit_ = static_cast<std::int64_t>(estimate_);
    return limit_;
  }

  // splitmix64, mapped to [0.5, 1): portable and deterministic, unlike the standard distributions.
  double next_jitter() noexcept {
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return 0.5 + 0.5 * static_cast<double>(z >> 11) * 0x1.0p-53;
  }

  vegas_options options_;
  std::uint64_t rng_;
  double estimate_ = 0;
  std::int64_t limit_ = 0;
  double jitter_ = 1;
  std::int64_t probe_count_ = 0;
  std::int64_t rtt_noload_ = 0;  // nanoseconds
  bool changed_ = false;
  std::chrono::nanoseconds changed_at_{0};  // release time of the sample that last moved the limit
};

}  // namespace admit
