// cli/replay/report.hpp — what `admit replay` prints: a human summary, JSON, and one line per arrival.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "cli/common/json.hpp"
#include "cli/replay/replay.hpp"

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

// The same as one JSON object, written by nlohmann::json, pretty-printed with a two-space indent. Times are in seconds,
// as JSON numbers (doubles: exact to the nanosecond for times below about 10^6 s); strings are UTF-8 (bytes that are
// not, in a file name, become U+FFFD). `with_events` adds an "events" array.
void write_json(std::ostream& out, const report_context& ctx, const replay_result& result, bool with_events);

// One line per arrival: `<seconds> <n> admit|reject [<delay seconds>]`, the delay only when it is above zero.
void write_events(std::ostream& out, const replay_result& result);

}  // namespace admit::cli
