// cli/replay/replay.hpp — runs a trace of arrivals through a limiter in virtual time (the engine of `admit replay`).
//
// Each arrival is offered to the limiter at its own time point through the limiter's `*_at(now, n)` members, so a
// replay is exact and deterministic: no clock is read and nothing sleeps. Time point zero of the trace is a fixed
// point on replay_clock (replay_base_ns, rounded up to a multiple of the window for the window algorithms, so their
// windows start with the trace).
//
//   auto settings = admit::cli::resolve(   // cli/common/algorithms.hpp
//       {.algo = algorithm::token_bucket, .limit = admit::rate::parse("100/s")});
//   auto result = admit::cli::replay(settings, admit::cli::read_trace(std::cin));
//
// Modes: `allow` asks for an immediate answer (decide_at): admitted now or rejected. `reserve` books the request
// (reserve_at; for gcra, which has none, an exactly equivalent decide_at at the time the request fits) and lets it
// through when the limiter says so: admitted after a delay, or rejected only when it can never be served (n larger
// than the burst). Window algorithms cannot reserve.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "admit/rate.hpp"
#include "cli/common/algorithms.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

// The answer for one arrival.
struct outcome {
  bool admitted = false;
  std::int64_t delay_ns = 0;  // reserve mode: how long after its arrival the request may start
};

// A limiter as the replay sees it: offer(t, n) decides for n tokens arriving t ns after the trace start.
class replay_limiter {
 public:
  virtual ~replay_limiter() = default;
  virtual outcome offer(std::int64_t t_ns, std::int64_t n) = 0;
};

// Builds the limiter `settings` describe. Throws std::invalid_argument when the limiter refuses the configuration.
[[nodiscard]] std::unique_ptr<replay_limiter> make_limiter(const replay_settings& settings);

// One arrival and what the limiter did with it.
struct event {
  std::int64_t t_ns = 0;
  std::int64_t n = 1;
  bool admitted = false;
  std::int64_t delay_ns = 0;
};

// Nearest-rank percentiles of the delays of admitted arrivals (zero delays included), in ns.
struct delay_stats {
  std::int64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
  double mean = 0;
};

struct replay_result {
  std::vector<event> events;
  std::int64_t arrivals = 0, tokens = 0;           // offered
  std::int64_t admitted = 0, admitted_tokens = 0;  // admitted (now or after a delay)
  std::int64_t rejected = 0, rejected_tokens = 0;
  std::int64_t delayed = 0;  // admitted with a delay > 0
  delay_stats delay;
  std::int64_t first_ns = 0, last_ns = 0;  // first and last arrival
  std::int64_t last_admission_ns = 0;      // latest arrival + delay among admitted
};

// Replays `trace` (times non-decreasing) through `limiter`.
[[nodiscard]] replay_result replay(replay_limiter& limiter, std::span<const arrival> trace);
// Replays `trace` through a fresh limiter built from `settings`.
[[nodiscard]] replay_result replay(const replay_settings& settings, std::span<const arrival> trace);

// Tokens per time bucket [start_ns, start_ns + width): offered by arrival time, admitted by admission time
// (arrival + delay), rejected by arrival time.
struct bucket {
  std::int64_t start_ns = 0;
  std::int64_t offered = 0, admitted = 0, rejected = 0;
};

// Buckets of `width_ns` from 0 to the last arrival or admission, whichever is later.
[[nodiscard]] std::vector<bucket> bucketize(const replay_result& result, std::int64_t width_ns);

// A "nice" bucket width (1, 2 or 5 times a power of ten ns, or 1/2/5/10/15/30 s, 1/2/5/10/15/30 min, 1 h...) that
// splits [0, span_ns] into at most `max_buckets` buckets. At least 1 ms.
[[nodiscard]] std::int64_t choose_bucket_width(std::int64_t span_ns, std::int64_t max_buckets);

// The nearest-rank `percent` percentile of ascending `sorted` values (0 when empty): the value at rank
// ceil(percent/100 · n), at least the first.
[[nodiscard]] std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, int percent);

}  // namespace admit::cli
