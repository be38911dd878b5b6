// cli/replay/rate_timeline.hpp — the tokens offered, admitted and rejected over time in a rate replay, kept in a
// bounded number of time buckets, so that the report's table, the JSON `buckets` and the chart need no list of
// arrivals.
//
//   rate_timeline t;
//   t.add_offered(500'000'000, 3, /*rejected=*/false);   // 3 tokens offered at 0.5 s and not rejected
//   t.add_admitted(700'000'000, 3);                      // ...admitted at 0.7 s (after a 0.2 s delay)
//   auto rows = t.buckets(1'000'000'000);                // per second: offered 3, admitted 3, rejected 0
//
// Exact for the widths the reports use. The timeline counts in a grid of `grid_ns()` buckets from 0 to the latest time
// added, the grid width a step of 1 ms, 10 ms, 100 ms, 1 s, 5 s, 1 min, 1 h, 1 d, 2 d, 4 d... — each a multiple of the
// one before, so when the span grows the grid coarsens by adding neighbours, losing nothing. The grid is the largest
// such step that divides choose_bucket_width(span, min_grid_buckets) (cli/replay/replay.hpp); every "nice" width that
// choose_bucket_width gives for at most min_grid_buckets buckets over the same span is a multiple of it, so buckets()
// of such a width is exact. Memory: at most about 30 × min_grid_buckets grid buckets (24 bytes each, under 1 MB).
//
// Thread safety: none (one replay per timeline).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace admit::cli {

// Tokens per time bucket [start_ns, start_ns + width): offered by arrival time, admitted by admission time
// (arrival + delay), rejected by arrival time.
struct bucket {
  std::int64_t start_ns = 0;
  std::int64_t offered = 0, admitted = 0, rejected = 0;
};

class rate_timeline {
 public:
  // The grid never has fewer buckets than about min_grid_buckets / 2.5 over the span (the chart's resolution).
  static constexpr std::int64_t min_grid_buckets = 1024;

  // n tokens arriving at t_ns (>= 0), rejected or not.
  void add_offered(std::int64_t t_ns, std::int64_t n, bool rejected);
  // n tokens admitted at t_ns (>= 0; arrival + delay).
  void add_admitted(std::int64_t t_ns, std::int64_t n);

  // The latest time added (0 when none).
  [[nodiscard]] std::int64_t end_ns() const noexcept { return end_; }
  [[nodiscard]] std::int64_t grid_ns() const noexcept { return grid_; }

  // Buckets of `width_ns` from 0 to end_ns(). Exact when width_ns is a multiple of grid_ns() (every width
  // choose_bucket_width gives over end_ns() for at most min_grid_buckets buckets); otherwise each grid bucket counts
  // in the bucket holding its start. At most 1,000,000 buckets (the last one holds the rest). Throws
  // std::invalid_argument for width_ns <= 0.
  [[nodiscard]] std::vector<bucket> buckets(std::int64_t width_ns) const;

  // Cumulative tokens offered (or admitted) at or before t_ns, interpolated linearly inside the grid bucket holding
  // t_ns: exact at grid boundaries, off by at most that bucket's tokens between them.
  [[nodiscard]] double offered_until(std::int64_t t_ns) const;
  [[nodiscard]] double admitted_until(std::int64_t t_ns) const;

  // Grid buckets held now, for tests of the memory bound.
  [[nodiscard]] std::size_t size() const noexcept { return grid_buckets_.size(); }

 private:
  struct cell {
    std::int64_t offered = 0, admitted = 0, rejected = 0;
  };
  void cover(std::int64_t t_ns);  // extends the grid (coarsening it when needed) so that t_ns falls inside
  [[nodiscard]] double until(std::int64_t t_ns, std::int64_t cell::*field) const;

  std::vector<cell> grid_buckets_;
  std::int64_t grid_ = 1'000'000;  // ns per grid bucket
  std::int64_t end_ = 0;
};

}  // namespace admit::cli
