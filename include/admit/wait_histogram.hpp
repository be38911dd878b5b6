// admit/wait_histogram.hpp — a lock-free histogram of durations with bounded relative error (log-linear buckets).
//
//   admit::wait_histogram h;
//   h.record(3ms);  auto s = h.summarize();   // s.p99 is within 1/32 above the exact 99th percentile
//
// Buckets. A duration of v ns (negative durations count as 0) goes into one of `bucket_count` buckets, each an atomic
// counter: values below 64 ns each have their own bucket (exact); above, every power of two [2^e, 2^(e+1)) is split
// into 32 equal buckets of width 2^(e-5). So a bucket's width is less than 1/32 of its smallest value, for the whole
// range up to 2^63 - 1 ns (292 years) — the layout HdrHistogram calls "5 bits of sub-bucket precision".
//
// Relative error. A percentile is reported as the largest value its bucket holds, lowered to the largest value
// recorded when that is smaller: the report r of an exact percentile v (nearest rank) satisfies v <= r < v·(1 + 1/32),
// so it is never below the truth and at most 3.125% above it; values below 64 ns and the maximum are exact.
//
// Cost. record() is one relaxed fetch_add on the bucket, one on the sum and, for a new maximum, a compare-and-swap
// (a zero: the bucket's fetch_add alone); no lock, no allocation, no clock read. summarize() and percentile() read all
// 1888 counters (~15 KB, about a microsecond): they are for a metrics scrape, not for a hot path.
//
// Thread safety: every member may be called concurrently. Readers see each counter at some instant during the call;
// under concurrent record() calls a summary mixes instants (the count, the sum and the maximum are read one after
// the other), but every percentile is still computed from one copy of the buckets and lies within the bounds above
// for the values that copy holds.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "admit/detail/atomic_max.hpp"

namespace admit {

class wait_histogram {
 public:
  // Bits of precision inside each power of two: 32 buckets per doubling.
  static constexpr int sub_bucket_bits = 5;
  static constexpr std::int64_t sub_buckets = std::int64_t{1} << sub_bucket_bits;
  // Values below this many ns are kept exactly (one bucket each).
  static constexpr std::int64_t exact_below = 2 * sub_buckets;
  // Buckets in all: exact ones, then 32 per power of two up to 2^63.
  static constexpr std::size_t bucket_count = static_cast<std::size_t>((64 - sub_bucket_bits) * sub_buckets);
  // Upper bound of (reported - exact) / exact for any percentile.
  static constexpr double relative_error = 1.0 / static_cast<double>(sub_buckets);

  struct summary {
    std::uint64_t count = 0;          // durations recorded
    std::chrono::nanoseconds p50{0};  // percentiles (nearest rank), within relative_error above the exact ones
    std::chrono::nanoseconds p90{0};
    std::chrono::nanoseconds p99{0};
    std::chrono::nanoseconds max{0};   // exact
    std::chrono::nanoseconds mean{0};  // exact sum / count, rounded down
  };

  wait_histogram() = default;
  wait_histogram(const wait_histogram&) = delete;
  wait_histogram& operator=(const wait_histogram&) = delete;

  // Records one duration (negative: 0). Lock-free, wait-free but for a new maximum's compare-and-swap.
  template <class Rep, class Period>
  void record(std::chrono::duration<Rep, Period> d) noexcept {
    record_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }
  void record_ns(std::int64_t ns) noexcept {
    if (ns > 0) {  // a zero adds nothing to the sum and cannot raise the maximum: one fetch_add in all
      detail::raise_to(max_, ns, std::memory_order_relaxed);
      sum_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);  // wraps after 2^64 ns (584 years)
    }
    buckets_[bucket_of(ns < 0 ? 0 : ns)].fetch_add(1, std::memory_order_relaxed);
  }

  // Durations recorded (sums the buckets).
  std::uint64_t count() const noexcept {
    std::uint64_t n = 0;
    for (const auto& b : buckets_) n += b.load(std::memory_order_relaxed);
    return n;
  }

  // The q-th percentile (0 <= q <= 100), nearest rank: the value at rank ceil(q/100 · count) (at least 1) in sorted
  // order, reported as described above. 0 when nothing was recorded. Throws std::invalid_argument for q outside
  // [0, 100] (or NaN).
  std::chrono::nanoseconds percentile(double q) const {
    check_q(q);
    counts c;
    load(c);
    return std::chrono::nanoseconds{at_percentile(c, q)};
  }

  // The sum of the durations recorded (exact; wraps after 2^64 ns, 584 years).
  std::chrono::nanoseconds sum() const noexcept {
    return std::chrono::nanoseconds{static_cast<std::int64_t>(sum_.load(std::memory_order_relaxed))};
  }

  // Cumulative counts at fixed bounds, for a histogram exposition (Prometheus' `le`): out[i] is the number of
  // durations recorded in buckets whose largest value is <= bounds[i]. Returns the count of all durations, read in
  // the same single pass over the buckets (so out[] never exceeds it and never decreases along ascending bounds).
  // How a bound is honoured: no duration above bounds[i] is ever counted in out[i]; every duration <= bounds[i] is,
  // except those that share a bucket with values above it — then bounds[i] lies inside a bucket, and the durations
  // of that bucket below it count from the next bound up. So out[i] is the exact count of durations <= b', where b'
  // is bounds[i] itself when it is the top of its bucket, else the bottom of its bucket minus 1 ns: within 1/32
  // below bounds[i] (b' >= bounds[i] * (1 - 1/32)), and exact below 64 ns. Bounds must be ascending and out as long
  // as bounds; throws std::invalid_argument otherwise. Reads the ~1900 counters once: for a scrape.
  std::uint64_t cumulative_counts(std::span<const std::chrono::nanoseconds> bounds,
                                  std::span<std::uint64_t> out) const {
    if (out.size() != bounds.size()) {
      throw std::invalid_argument("admit::wait_histogram::cumulative_counts: out has " + std::to_string(out.size()) +
                                  " elements, must have as many as bounds (" + std::to_string(bounds.size()) + ")");
    }
    for (std::size_t j = 1; j < bounds.size(); ++j) {
      if (bounds[j] < bounds[j - 1]) {
        throw std::invalid_argument("admit::wait_histogram::cumulative_counts: bounds must be ascending, got " +
                                    std::to_string(bounds[j].count()) + "ns after " +
                                    std::to_string(bounds[j - 1].count()) + "ns");
      }
    }
    std::uint64_t seen = 0;
    std::size_t j = 0;
    for (std::size_t i = 0; i < bucket_count; ++i) {
      for (; j < bounds.size() && bucket_upper(i) > bounds[j].count(); ++j) out[j] = seen;
      seen += buckets_[i].load(std::memory_order_relaxed);
    }
    for (; j < bounds.size(); ++j) out[j] = seen;
    return seen;
  }

  // count, p50, p90, p99, max and mean from one copy of the buckets.
  summary summarize() const noexcept {
    counts c;
    load(c);
    summary s;
    s.count = c.total;
    if (c.total == 0) return s;
    s.p50 = std::chrono::nanoseconds{at_percentile(c, 50)};
    s.p90 = std::chrono::nanoseconds{at_percentile(c, 90)};
    s.p99 = std::chrono::nanoseconds{at_percentile(c, 99)};
    s.max = std::chrono::nanoseconds{c.max};
    s.mean = std::chrono::nanoseconds{static_cast<std::int64_t>(sum_.load(std::memory_order_relaxed) / c.total)};
    return s;
  }

  // The bucket of a value (>= 0), and the smallest and largest value a bucket holds.
  static constexpr std::size_t bucket_of(std::int64_t ns) noexcept {
    const auto v = static_cast<std::uint64_t>(ns);
    if (v < static_cast<std::uint64_t>(exact_below)) return static_cast<std::size_t>(v);
    const int shift = static_cast<int>(std::bit_width(v)) - 1 - sub_bucket_bits;  // v >> shift is in [32, 64)
    return static_cast<std::size_t>(shift) * static_cast<std::size_t>(sub_buckets) +
           static_cast<std::size_t>(v >> shift);
  }
  static constexpr std::int64_t bucket_lower(std::size_t i) noexcept {
    if (i < static_cast<std::size_t>(exact_below)) return static_cast<std::int64_t>(i);
    const auto sb = static_cast<std::size_t>(sub_buckets);
    const std::size_t shift = i / sb - 1;
    return static_cast<std::int64_t>((i % sb + sb) << shift);
  }
  static constexpr std::int64_t bucket_upper(std::size_t i) noexcept {
    if (i < static_cast<std::size_t>(exact_below)) return static_cast<std::int64_t>(i);
    const std::size_t shift = i / static_cast<std::size_t>(sub_buckets) - 1;
    return bucket_lower(i) + ((std::int64_t{1} << shift) - 1);
  }

 private:
  struct counts {
    std::array<std::uint64_t, bucket_count> n;
    std::uint64_t total = 0;
    std::int64_t max = 0;
  };

  void load(counts& c) const noexcept {
    c.total = 0;
    for (std::size_t i = 0; i < bucket_count; ++i) {
      c.n[i] = buckets_[i].load(std::memory_order_relaxed);
      c.total += c.n[i];
    }
    c.max = max_.load(std::memory_order_relaxed);
  }

  static std::int64_t at_percentile(const counts& c, double q) noexcept {
    if (c.total == 0) return 0;
    // q * total is exact in double for integral q and total below 2^46, so ceil() sees no rounding noise there.
    const double want = std::ceil(q * static_cast<double>(c.total) / 100.0);
    std::uint64_t rank = want < 1 ? 1 : static_cast<std::uint64_t>(want);
    if (rank > c.total) rank = c.total;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < bucket_count; ++i) {
      seen += c.n[i];
      if (seen >= rank) {
        // The bucket's largest value, or the recorded maximum when it lies inside the bucket (read apart from the
        // buckets, so kept within the bucket's bounds whatever instant it was read at).
        const std::int64_t lo = bucket_lower(i);
        const std::int64_t hi = bucket_upper(i);
        return c.max < lo ? lo : (c.max < hi ? c.max : hi);
      }
    }
    return c.max;
  }

  static void check_q(double q) {
    if (!(q >= 0 && q <= 100)) {
      throw std::invalid_argument("admit::wait_histogram::percentile: q must be in [0, 100], got " + std::to_string(q));
    }
  }

  std::array<std::atomic<std::uint64_t>, bucket_count> buckets_{};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::int64_t> max_{0};
};

}  // namespace admit
