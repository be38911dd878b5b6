// cli/replay/report.hpp — what `admit replay` prints: a human summary, JSON, and one line per arrival.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>

#include "cli/common/json.hpp"
#include "cli/replay/replay.hpp"

namespace admit::cli {

// What was replayed, for the report's header.
struct report_context {
  report_context(replay_settings replayed, std::string from) : settings(std::move(replayed)), source(std::move(from)) {}

  replay_settings settings;
  std::string source;              // the trace's file name, or "stdin"
  std::string per_key;             // --per-key as given (empty: one limiter for the whole trace)
  std::int64_t skipped_lines = 0;  // --skip-bad-lines: lines left out because they did not parse
  std::int64_t reordered = 0;      // access logs: arrivals earlier than the one before, replayed at its time
};

// Human summary: settings, counts and shares, delay percentiles (reserve mode), and the offered vs admitted rate over
// time as a small table with bars (at most ~15 rows). With `comment` every line starts with "# ", so that the output
// of --events stays a valid trace-like stream.
void write_summary(std::ostream& out, const report_context& ctx, const replay_result& result, bool comment = false);

// The same as one JSON object, written by nlohmann::json, pretty-printed with a two-space indent. Times are in seconds,
// as JSON numbers (doubles: exact to the nanosecond for times below about 10^6 s); strings are UTF-8 (bytes that are
// not, in a file name, become U+FFFD). `with_events` adds an "events" array (result.events).
void write_json(std::ostream& out, const report_context& ctx, const replay_result& result, bool with_events);
// The same with an "events" array whose elements (format_event_json, joined by ",\n") `write_events` writes: a
// streamed replay's events, kept in a file until the summary, which comes first, is known.
void write_json(std::ostream& out, const report_context& ctx, const replay_result& result,
                const std::function<void(std::ostream&)>& write_events);

// One line per arrival: `<seconds> <n> admit|reject [<delay seconds>]`, the delay only when it is above zero
// (result.events).
void write_events(std::ostream& out, const replay_result& result);
// One such line, with its newline; with a key (--per-key), the key follows as a comment: `0.5 1 reject # "10.0.0.1"`.
[[nodiscard]] std::string format_event(const event& e, std::string_view key = {});
// One element of the JSON "events" array: {"t", "n", "admitted", "delay" (when above zero), "key" (when not empty)}.
[[nodiscard]] std::string format_event_json(const event& e, std::string_view key = {});

}  // namespace admit::cli
