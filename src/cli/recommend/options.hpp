// cli/recommend/options.hpp — the `admit recommend` options as text, checked into a question, and the command itself.
//
// The command line layer (cli/recommend/recommend_command.cpp, CLI11) collects strings; they are checked here, so that
// the checks and messages are testable without a process. The trace options (--format and its fields, --per-key,
// --skip-bad-lines) are `admit replay`'s, checked by the same code.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <variant>

#include "cli/recommend/recommend.hpp"
#include "cli/replay/access_log.hpp"

namespace admit::cli {

struct recommend_options {
  std::string algorithm;
  std::optional<std::string> burst, window, mode;                                // the rate algorithms
  std::optional<std::string> max_rejected, max_delay_p99;                        // their targets
  std::optional<std::string> max_wait_p99, max_waiters, timeout, max_timed_out;  // concurrency
  std::string format = "plain";
  std::optional<std::string> time_field, key_field, cost_field, duration_field, per_key;
  bool skip_bad_lines = false;
  bool json = false;
  std::optional<std::string> plot;  // SVG file to write
  std::string trace = "-";          // file name, or "-" for standard input
  bool stdin_is_terminal = false;
  bool stderr_is_terminal = false;  // the replays' progress is shown there
};

// "token-bucket|gcra|fixed-window|sliding-window|concurrency"
[[nodiscard]] std::string recommend_algorithm_names();

// The checked question: a rate one or a concurrency one. Throws usage_error naming the option and value.
[[nodiscard]] std::variant<rate_question, concurrency_question> to_question(const recommend_options& options);

// How the trace is read (--format and the rest, as `admit replay` checks them). Throws usage_error.
[[nodiscard]] log_request to_trace_reading(const recommend_options& options);

// The exit status of `admit recommend` when no limit meets the target (the report says what the highest tried did).
inline constexpr int exit_no_limit = 3;

// Runs `admit recommend`: reads the trace (options.trace, or `in` for "-") once, searches, writes the report to `out`
// and the chart to options.plot. Returns the exit status: 0 with a recommendation, exit_no_limit (3) when no limit
// meets the target, 2 for bad input, 1 for a failure of the machine (a write error, no temporary file); messages go
// to `err` ("admit recommend: ...").
int run_recommend(const recommend_options& options, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace admit::cli
