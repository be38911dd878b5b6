// cli/report.hpp — what `admit replay` prints: a human summary, JSON, and one line per arrival.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "cli/replay.hpp"

namespace admit::cli {

// What was replayed, for the report's header.
struct report_context {
  replay_settings settings;
  std::string source;  // the trace's file name, or "stdin"
};

// Human summary: settings, counts and shares, delay percentiles (reserve mode), and the offered vs admitted rate over
// time as a small table with bars (at most ~15 rows). With `comment` every line starts with "# ", so that the output
// of --events stays a valid trace-like stream.
void write_summary(std::ostream& out, const report_context& ctx, const replay_result& result, bool comment = false);

// The same as one JSON object (times in seconds as exact decimals). `with_events` adds an "events" array.
void write_json(std::ostream& out, const report_context& ctx, const replay_result& result, bool with_events);

// One line per arrival: `<seconds> <n> admit|reject [<delay seconds>]`, the delay only when it is above zero.
void write_events(std::ostream& out, const replay_result& result);

// A short human form of a duration in ns: "0s", "850ns", "12.5us", "3.25ms", "1.5s", "2m05s".
[[nodiscard]] std::string human_duration(std::int64_t ns);

// `text` as a JSON string literal, quotes included.
[[nodiscard]] std::string json_string(std::string_view text);

}  // namespace admit::cli
