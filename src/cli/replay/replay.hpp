// cli/replay/replay.hpp — runs a trace of arrivals through a limiter in virtual time (the engine of `admit replay`).
//
// Each arrival is offered to the limiter at its own time point through the limiter's `*_at(now, n)` members, so a
// replay is exact and deterministic: no clock is read and nothing sleeps. Time point zero of the trace is a fixed
// point on replay_clock (replay_base_ns, rounded up to a multiple of the window for the window algorithms, so their
// windows start with the trace).
//
//   auto settings = admit::cli::resolve(   // cli/common/algorithms.hpp
//       {.algo = algorithm::token_bucket, .limit = admit::rate::parse("100/s")});
//   admit::cli::trace_source arrivals(std::cin);   // cli/replay/arrival_source.hpp: `<seconds> [n]` lines, streamed
//   auto result = admit::cli::replay(settings, arrivals);
//
// Modes: `allow` asks for an immediate answer (decide_at): admitted now or rejected. `reserve` books the request
// (reserve_at; for gcra, which has none, an exactly equivalent decide_at at the time the request fits) and lets it
// through when the limiter says so: admitted after a delay, or rejected only when it can never be served (n larger
// than the burst). Window algorithms cannot reserve.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "admit/rate.hpp"
#include "cli/common/algorithms.hpp"
#include "cli/replay/arrival_source.hpp"
#include "cli/replay/delay_percentiles.hpp"
#include "cli/replay/rate_timeline.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

// The answer for one arrival.
struct outcome {
  bool admitted = false;
  std::int64_t delay_ns = 0;  // reserve mode: how long after its arrival the request may start
  bool beyond_clock = false;  // reserve mode: it could start only past the end of the replay's clock (not admitted)
};

// A limiter as the replay sees it: offer(t, n) decides for n tokens arriving t ns after the trace start.
class replay_limiter {
 public:
  virtual ~replay_limiter() = default;
  virtual outcome offer(std::int64_t t_ns, std::int64_t n) = 0;
  // Whether the limiter starts cold and warms up (warmup): then stable_since() says when it first served at its stable
  // rate — just after a decision, its stored permits down to the threshold (Guava's SmoothWarmingUp) — in ns since
  // the trace start, nullopt while it never has.
  [[nodiscard]] virtual bool warms_up() const noexcept { return false; }
  [[nodiscard]] virtual std::optional<std::int64_t> stable_since() const noexcept { return std::nullopt; }
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

// One key's counts in a --per-key replay.
struct key_counts {
  std::string key;
  std::int64_t arrivals = 0, tokens = 0;
  std::int64_t rejected = 0, rejected_tokens = 0;
};

// What a --per-key replay adds: how many keys there were, how many had a rejection, and the keys limited most (most
// rejected arrivals first; ties: more arrivals, then the key's text).
struct per_key_result {
  std::int64_t keys = 0, keys_with_rejections = 0;
  std::vector<key_counts> most_limited;
};

struct replay_result {
  std::vector<event>
      events;  // only from the replay() overloads over a span (tests, small traces): the stream keeps none
  std::int64_t arrivals = 0, tokens = 0;           // offered
  std::int64_t admitted = 0, admitted_tokens = 0;  // admitted (now or after a delay)
  std::int64_t rejected = 0, rejected_tokens = 0;
  std::int64_t delayed = 0;                // admitted with a delay > 0
  delay_stats delay;                       // see cli/replay/delay_percentiles.hpp for how exact
  bool delay_exact = true;                 // false: the percentiles come from the histogram (within 1/256, never below)
  std::int64_t first_ns = 0, last_ns = 0;  // first and last arrival
  std::int64_t last_admission_ns = 0;      // latest arrival + delay among admitted
  rate_timeline timeline;                  // tokens offered, admitted and rejected over time (bounded)
  // warmup: when the limiter first served at its stable rate (nullopt: the trace never brought it there); with
  // per_key, the earliest of any key's, and how many keys' limiters got there.
  std::optional<std::int64_t> stable_since;
  std::int64_t stable_limiters = 0;
  std::optional<per_key_result> per_key;  // set by a --per-key replay
};

// How a rate replay runs besides its limiter.
struct rate_replay_options {
  bool per_key = false;  // one limiter per key (keyed_arrival::key), each made fresh on the key's first arrival
  std::size_t most_limited = 10;  // per_key: how many keys per_key_result::most_limited lists
  // Called for each arrival as soon as it is decided, in order; the key is the arrival's (empty without per_key).
  std::function<void(const event&, std::string_view key)> on_event;
};

// The streaming engine of every rate replay: arrivals go in one at a time, in time order, and are decided at once;
// nothing is kept per arrival. Memory: the timeline (under 1 MB), the delay percentiles (at most 8 MB, see
// cli/replay/delay_percentiles.hpp), and with per_key one limiter and its counts per distinct key (a few hundred
// bytes and the key's text). As admit::keyed runs its limiters: every key's limiter has the same configuration and
// starts full on its key's first arrival (admit::keyed's exact eviction never changes a decision, so keeping every key,
// as here, decides the same). Thread safety: none (one replay per thread; replays on different threads are
// independent).
class rate_replayer {
 public:
  // Throws std::invalid_argument when the limiter refuses the configuration.
  explicit rate_replayer(const replay_settings& settings, rate_replay_options options = {});
  // A replay through `limiter` (tests with limiters of known answers); per_key is refused with std::invalid_argument.
  rate_replayer(replay_limiter& limiter, rate_replay_options options = {});
  ~rate_replayer();
  rate_replayer(const rate_replayer&) = delete;
  rate_replayer& operator=(const rate_replayer&) = delete;

  // Decides one arrival (a.t_ns at least the previous arrival's; std::invalid_argument otherwise) of `key`.
  outcome add(const arrival& a, std::string_view key = {});
  // The result; call once, after the last add().
  [[nodiscard]] replay_result finish();

 private:
  class engine;
  std::unique_ptr<engine> engine_;
};

// Replays every arrival of `source` through a limiter built from `settings` (one per key with options.per_key).
// Throws what the source throws (trace_error) and std::invalid_argument for a configuration the limiter refuses.
[[nodiscard]] replay_result replay(const replay_settings& settings, arrival_source& source,
                                   const rate_replay_options& options = {});

// Replays `trace` (times non-decreasing) through `limiter`, keeping each arrival's event in the result.
[[nodiscard]] replay_result replay(replay_limiter& limiter, std::span<const arrival> trace);
// Replays `trace` through a fresh limiter built from `settings`, keeping each arrival's event in the result.
[[nodiscard]] replay_result replay(const replay_settings& settings, std::span<const arrival> trace);

// The timeline's buckets of `width_ns` (result.timeline.buckets): from 0 to the last arrival or admission.
[[nodiscard]] std::vector<bucket> bucketize(const replay_result& result, std::int64_t width_ns);

// A "nice" bucket width (1, 2 or 5 times a power of ten ns, or 1/2/5/10/15/30 s, 1/2/5/10/15/30 min, 1 h...) that
// splits [0, span_ns] into at most `max_buckets` buckets. At least 1 ms.
[[nodiscard]] std::int64_t choose_bucket_width(std::int64_t span_ns, std::int64_t max_buckets);

}  // namespace admit::cli
