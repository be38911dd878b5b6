// cli/replay/options.hpp — the `admit replay` options as text, checked into a replay_config, and the command itself.
//
// The command line layer (cli/replay/replay_command.cpp, CLI11) collects strings; their values are checked here through
// cli/common/values.hpp, and what depends on more than one option here and in resolve(), so that the checks and
// messages are testable without a process.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "cli/common/message.hpp"
#include "cli/replay/access_log.hpp"
#include "cli/replay/concurrency_replay.hpp"
#include "cli/replay/replay.hpp"

namespace admit::cli {

struct replay_options {
  std::string algorithm;
  std::optional<std::string> rate;  // required by the rate algorithms
  std::optional<std::string> burst, window, slack, warmup, mode;
  std::optional<std::string> cold_factor;                  // warmup
  std::optional<std::string> limit, max_waiters, timeout;  // --algorithm concurrency (limit required)
  std::string format = "plain";                            // plain|nginx|envoy|csv|jsonl (cli/replay/access_log.hpp)
  std::optional<std::string> time_field, key_field, cost_field, duration_field;  // csv, jsonl
  std::optional<std::string> per_key;  // "client" or a field: one limiter per key
  bool skip_bad_lines = false;
  bool events = false;
  bool json = false;
  std::optional<std::string> plot;  // SVG file to write
  std::string trace = "-";          // file name, or "-" for standard input
  bool stdin_is_terminal = false;   // reading "-" from a terminal: say so on stderr (nothing else would)
};

// Checks the options of a rate algorithm and builds the configuration. Throws usage_error naming the option and value.
[[nodiscard]] replay_config to_config(const replay_options& options);

// Checks the options of `--algorithm concurrency` (--limit N, --max-waiters M, --timeout T). Throws usage_error naming
// the option and value, and for options of the rate algorithms (--rate, --burst, ...), which do not apply.
[[nodiscard]] concurrency_settings to_concurrency_settings(const replay_options& options);

// Checks --format and the options that go with it (--time-field, --key-field, --cost-field, --duration-field,
// --per-key, --skip-bad-lines) against each other and the algorithm. Throws usage_error naming the option and value.
[[nodiscard]] log_request to_log_request(const replay_options& options);

// "token-bucket|gcra|...|warmup|concurrency": every --algorithm.
[[nodiscard]] std::string all_algorithm_names();

// Runs `admit replay`: reads the trace (options.trace, or `in` for "-"; for --algorithm concurrency its lines are
// `<arrival> <duration> [n]`, see cli/replay/concurrency_replay.hpp; with --format, an access log, see
// cli/replay/access_log.hpp), replays it as it reads it, writes the report to `out` and the
// plot to options.plot. Returns the exit status; error messages go to `err` ("admit replay: ..."). Refused with
// exit_bad_input: a trace without a single arrival, a --plot name that does not end in .svg (the only format written).
// Reading standard input from a terminal (stdin_is_terminal), it first says so on `err`.
int run_replay(const replay_options& options, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace admit::cli
