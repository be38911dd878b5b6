// cli/recommend/search.hpp — the searches of `admit recommend`: the least limit that meets a target, found with a
// logarithmic number of replays, and the candidate rates it tries.
//
//   auto least = least_meeting({.min = 1, .max = 1'000'000, .start = 8, .first_step = 1},
//                              [&](std::int64_t limit) { return replay(limit).meets; });
//
// Candidates are positions on a line (whole numbers): a concurrency limit, a per-window count, or the index of a rate
// on rate_grid. The search assumes nothing about the target beyond what it tests: it brackets the answer from `start`
// (steps growing fourfold), then halves the bracket, so that it ends with a position that meets the target and the
// position just below it, which does not (both replayed) — exact even where the target is not monotone in the limit.
// Thread safety: pure functions (the predicate is called on the calling thread).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace admit::cli {

struct search_range {
  std::int64_t min = 0, max = 0;  // the positions the search may try, both included
  std::int64_t start = 0;         // where it starts (clamped to [min, max])
  std::int64_t first_step = 1;    // the first step of the bracketing (then 4, 16, ... times it)
};

// What a search found: the least position that meets (nullopt when not even `max` does), and whether the one below
// it was tried and failed (false when the least is `min`: nothing below it was tried).
struct search_result {
  std::optional<std::int64_t> least;
  bool below_fails = false;
};

[[nodiscard]] search_result least_meeting(const search_range& range, const std::function<bool(std::int64_t)>& meets);

// A non-negative decimal, mantissa × 10^exponent, exact: the form a rate is written in on the command line.
struct decimal {
  std::int64_t mantissa = 0;
  int exponent = 0;

  [[nodiscard]] double value() const noexcept;
  // "1.23", "1230", "0.000001": exact, no exponent, no trailing zeros after the point.
  [[nodiscard]] std::string text() const;
  // 99% of this value, exact (two more digits).
  [[nodiscard]] decimal tighter() const noexcept;
};

// The rates a search tries, per second: every decimal of three significant digits from 0.000001 to 999,000,000 (900
// a decade), so neighbours are at most 1% apart and a rate is written with at most three digits that are not zeros.
struct rate_grid {
  static constexpr std::int64_t per_decade = 900;
  static constexpr int min_exponent = -8;                    // position 0: 100 × 10^-8 = 0.000001
  static constexpr std::int64_t last = 15 * per_decade - 1;  // 999 × 10^6

  [[nodiscard]] static decimal at(std::int64_t position) noexcept;
  // The position of the largest grid rate at most `per_second` (0 below the grid, `last` above it).
  [[nodiscard]] static std::int64_t floor(double per_second) noexcept;
};

}  // namespace admit::cli
