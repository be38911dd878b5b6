// cli/common/algorithms.hpp — the rate algorithms of `admit replay` and `admit decide`, in one table: the parameters
// each takes besides --rate (--burst, --window, --slack, --warmup), their defaults, the rates it accepts, whether it
// can reserve, whether it has a distributed form, and its largest per-window limit (the bound of the library's packed
// state, asked of the library). resolve() checks a configuration against the table and fills in the defaults.
//
//   auto settings = admit::cli::resolve({.algo = algorithm::token_bucket, .limit = admit::rate::parse("100/s")});
//   settings.describe();   // "token-bucket rate=100/s burst=1 mode=allow"
//
// The subcommands add what is theirs: replay builds its in-process limiter from the settings (cli/replay/replay.cpp),
// decide its distributed one (cli/decide/decide.cpp); neither asks the algorithm again what it takes.
// Thread safety: pure functions over constant data.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "admit/rate.hpp"

namespace admit::cli {

enum class algorithm { token_bucket, gcra, pacer, fixed_window, sliding_window, sliding_log, warmup };
enum class replay_mode { allow, reserve };

// The parameters an algorithm may take besides --rate, as bits of algorithm_info::takes.
enum class parameter : unsigned { burst = 1, window = 2, slack = 4, warmup = 8 };

// What the rate of an algorithm must be.
enum class rate_bound {
  any,                // zero (never refills) and inf (no limit) included
  above_zero,         // pacer: a zero rate would never pace anything out
  finite,             // the windows: limit = rate * window must be a number
  finite_above_zero,  // warmup: its cold rate is a multiple of the stable interval
};

// One row of the table.
struct algorithm_info {
  algorithm algo;
  std::string_view name;  // as --algorithm spells it
  unsigned takes;         // the parameters it takes (bits of `parameter`)
  rate_bound rate;
  bool can_reserve;          // --mode reserve (replay checks its limiters agree)
  replay_mode default_mode;  // when --mode is not given
  bool distributed;          // `admit decide` has its form on Redis (admit::redis::*)
  // The windows: the largest per-window limit the library's limiter takes for a window (its packed state's bound).
  std::int64_t (*max_window_limit)(std::chrono::nanoseconds window) noexcept;
};

// Every algorithm, in the order --help and messages list them.
[[nodiscard]] std::span<const algorithm_info> all_algorithms() noexcept;
[[nodiscard]] const algorithm_info& info(algorithm a) noexcept;
[[nodiscard]] bool takes(algorithm a, parameter p) noexcept;

// "token-bucket" -> algorithm::token_bucket, ...; nullopt for an unknown name.
[[nodiscard]] std::optional<algorithm> parse_algorithm(std::string_view name) noexcept;
[[nodiscard]] std::string_view to_string(algorithm a) noexcept;
[[nodiscard]] std::string_view to_string(replay_mode m) noexcept;
// "token-bucket|gcra|pacer|fixed-window|sliding-window|sliding-log|warmup"; with `distributed_only`, the ones
// `admit decide` has: "token-bucket|gcra|fixed-window|sliding-window|sliding-log".
[[nodiscard]] std::string algorithm_names(bool distributed_only = false);
[[nodiscard]] bool is_window(algorithm a) noexcept;
// The largest per-window limit the window algorithm `a` accepts for `window` (the bound of its packed state): for
// fixed-window it depends on the window (the window in ns must be larger than the limit, with a little margin:
// 999,999,998 for 1s), for sliding-window and sliding-log it is 16,777,215 (2^24 - 1). 0 for the other algorithms and
// for a window <= 0.
[[nodiscard]] std::int64_t max_window_limit(algorithm a, std::chrono::nanoseconds window) noexcept;

// What the user asked for; unset options take the algorithm's defaults in resolve().
struct replay_config {
  algorithm algo = algorithm::token_bucket;
  admit::rate limit = admit::rate::per_second(1);
  std::string rate_text;                           // --rate as the user wrote it (for messages); may be empty
  std::optional<std::int64_t> burst;               // token-bucket, gcra (default 1)
  std::optional<std::chrono::nanoseconds> window;  // window algorithms (default 1s)
  std::optional<std::int64_t> slack;               // pacer (default 10; 0 = without slack)
  std::optional<std::chrono::nanoseconds> warmup;  // warmup (default 10s)
  std::optional<double> cold_factor;               // warmup (default 3); not on the command line
  std::optional<replay_mode> mode;                 // default: the algorithm's default_mode
};

// A complete, checked configuration.
struct replay_settings {
  algorithm algo = algorithm::token_bucket;
  admit::rate limit;
  std::string rate_text;               // --rate as the user wrote it; empty: limit.to_string()
  std::int64_t burst = 0;              // token-bucket, gcra
  std::chrono::nanoseconds window{0};  // window algorithms
  std::int64_t window_limit = 0;       // window algorithms: requests per window = rate * window
  std::int64_t slack = 0;              // pacer
  std::chrono::nanoseconds warmup{0};  // warmup
  double cold_factor = 3;              // warmup
  replay_mode mode = replay_mode::allow;

  // "token-bucket rate=100/s burst=10 mode=allow" (the rate as the user wrote it)
  [[nodiscard]] std::string describe() const;
  // The rate as the user wrote it, else limit.to_string().
  [[nodiscard]] std::string shown_rate() const { return rate_text.empty() ? limit.to_string() : rate_text; }
};

// Checks `config` against the table and fills in defaults. Throws std::invalid_argument whose message names the
// offending option and value: an option that does not apply to the algorithm, a burst or slack out of range, a zero
// window, a rate the algorithm refuses, a window whose limit (rate * window) is not a whole number, below 1 or above
// max_window_limit (cli/common/window_limit.hpp: never rounded), reserve mode for an algorithm that cannot reserve.
[[nodiscard]] replay_settings resolve(const replay_config& config);

// The options of a rate algorithm as the command line gives them (text), shared by replay and decide.
struct rate_limit_options {
  std::string algorithm;
  std::optional<std::string> rate, burst, window, slack, warmup, mode;
};

// Parses the text of `options` (cli/common/values.hpp: each message names the option and the value) into a
// replay_config; resolve() then checks what depends on the algorithm. Throws usage_error for an unknown algorithm
// (listing `known`, "a|b|c"), a missing --rate, and a value that does not parse.
[[nodiscard]] replay_config to_config(const rate_limit_options& options, std::string_view known);

}  // namespace admit::cli
