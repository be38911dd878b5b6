// cli/recommend/recommend.hpp — `admit recommend`: the least limit that meets a target on a recorded trace.
//
//   rate_question q{.algo = algorithm::token_bucket, .burst = 20, .max_rejected = 0.01};
//   rate_recommendation r = recommend_rate(trace, q);   // r.best->rate: the least rate rejecting at most 1%
//
// Rates (token-bucket, gcra): the least rate on rate_grid (three significant digits) that meets the target, and 99%
// of it, which does not — both replayed. Windows (fixed-window, sliding-window): the least whole number of requests
// per window, and one less. Concurrency: the least limit, and one less. Without a burst for the bucket algorithms,
// the frontier: the least rate for each burst of 1, 2, 5, 10, 20, 50, ... until a tenfold burst would lower the rate
// by less than 1% (or 19 bursts, or a burst as large as the trace's tokens), and the knee of that frontier.
// Every candidate is one pass of the same engine `admit replay` runs (recorded_trace), so replaying the answer with
// `admit replay` prints exactly what the recommendation says it achieves.
// Thread safety: one recommendation at a time per trace. The frontier's search runs two bursts at once, the second
// on a thread of its own (joined before recommend_rate returns).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/common/algorithms.hpp"
#include "cli/recommend/recorded_trace.hpp"
#include "cli/recommend/search.hpp"

namespace admit::cli {

// A share of the requests, exact: P% with up to 9 fraction digits ("1%", "0.25%"), as billionths of a percent.
struct percentage {
  std::int64_t nano_percent = 0;  // 0 to 100e9

  // Whether part / whole is at most this share (exact integer arithmetic; true when whole is 0).
  [[nodiscard]] bool admits(std::int64_t part, std::int64_t whole) const noexcept;
  [[nodiscard]] double fraction() const noexcept { return static_cast<double>(nano_percent) / 1e11; }
  [[nodiscard]] std::string text() const;  // "1%", "0.25%"
};

// What a rate limit must achieve, and its shape.
struct rate_question {
  algorithm algo = algorithm::token_bucket;  // token_bucket, gcra, fixed_window, sliding_window
  replay_mode mode = replay_mode::allow;     // reserve: token_bucket and gcra only
  std::optional<std::int64_t> burst;         // bucket algorithms; nullopt: the frontier
  std::string window;                        // window algorithms: --window as given ("1s")
  bool per_key = false;
  percentage max_rejected;                       // of the requests
  std::optional<std::int64_t> max_delay_p99_ns;  // reserve
  bool curve = false;                            // also replay a spread of rates around the answer (for --plot)
};

// One candidate and what its replay did.
struct rate_point {
  std::string rate;  // as --rate takes it: "12.3/s", or for a window "37/1s"
  double rate_per_second = 0;
  std::int64_t burst = 0;         // bucket algorithms
  std::int64_t window_limit = 0;  // window algorithms: requests per window
  std::int64_t requests = 0, rejected = 0;
  std::int64_t delay_p99_ns = 0;          // reserve
  std::int64_t keys_with_rejections = 0;  // per_key
  std::vector<key_counts> most_limited;   // per_key: the keys with the most rejections (at most 10)
  bool meets = false;
  std::string refused;  // not empty: the limiter refuses this configuration (why), and nothing was replayed

  [[nodiscard]] double rejected_fraction() const noexcept {
    return requests == 0 ? 0 : static_cast<double>(rejected) / static_cast<double>(requests);
  }
};

struct rate_recommendation {
  std::optional<rate_point> best;     // the least rate that meets (nullopt: none up to the grid's top does)
  std::optional<rate_point> tighter;  // 99% of best (one less per window), which does not; nullopt when best is the
                                      // least rate tried (0/s, or 1 per window)
  std::optional<rate_point> highest;  // when no rate meets: the highest tried, and what it did
  std::vector<rate_point> frontier;   // without a burst: the best of each burst (bursts where none meets left out)
  std::vector<std::int64_t> unmet_bursts;  // ... and the bursts tried for which no rate meets
  std::vector<rate_point> curve;           // every replayed candidate of the answer's burst, by rate
  std::int64_t replays = 0;
};

// The knee of a frontier, the burst recommended without --burst: on log scales of burst and rate, the point farthest
// below the straight line from the frontier's first point to its last (past it, more burst buys less rate). Points
// whose burst holds the whole trace (`trace_tokens` or more; their rate is whatever the least the search tries, say
// 0.00000217/s) or whose rate is 0 take no part: they would set the line's end far below the rest. nullptr for an
// empty frontier.
[[nodiscard]] const rate_point* frontier_knee(const std::vector<rate_point>& frontier,
                                              std::int64_t trace_tokens = std::numeric_limits<std::int64_t>::max());

// Told of each replay as it ends (for a progress line), on the thread that ran it: the frontier's search runs two at
// once, so it must be thread-safe.
using replay_observer = std::function<void()>;

[[nodiscard]] rate_recommendation recommend_rate(const recorded_trace& trace, const rate_question& question,
                                                 const replay_observer& replayed = {});

// What a concurrency limit must achieve (FIFO queue; unbounded unless max_waiters or timeout).
struct concurrency_question {
  std::optional<std::int64_t> max_wait_p99_ns;
  std::optional<std::int64_t> max_waiters;
  std::optional<std::int64_t> timeout_ns;
  percentage max_turned_away;  // queue full, timed out, or more permits than the limit
  bool curve = false;
};

struct concurrency_point {
  std::int64_t limit = 0;
  std::int64_t requests = 0, admitted = 0, queue_full = 0, timed_out = 0, exceeds_capacity = 0;
  std::int64_t wait_p99_ns = 0;
  bool meets = false;
  // Why this limit has no answer (not empty: the rest is not filled in): its replay would pass the end of the replay's
  // clock (requests ending centuries on), as rate_point's refused.
  std::string refused;

  [[nodiscard]] double turned_away_fraction() const noexcept {
    return requests == 0 ? 0 : static_cast<double>(requests - admitted) / static_cast<double>(requests);
  }
};

struct concurrency_recommendation {
  std::optional<concurrency_point> best, tighter, highest;  // as rate_recommendation's
  std::vector<concurrency_point> curve;
  std::int64_t replays = 0;
};

[[nodiscard]] concurrency_recommendation recommend_concurrency(const recorded_trace& trace,
                                                               const concurrency_question& question,
                                                               const replay_observer& replayed = {});

}  // namespace admit::cli
