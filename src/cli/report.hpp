// cli/report.hpp — what `admit replay` prints: a human summary, JSON, and one line per arrival.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

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

// The same as one JSON object, written by nlohmann::json, pretty-printed with a two-space indent. Times are in seconds,
// as JSON numbers (doubles: exact to the nanosecond for times below about 10^6 s); strings are UTF-8 (bytes that are
// not, in a file name, become U+FFFD). `with_events` adds an "events" array.
void write_json(std::ostream& out, const report_context& ctx, const replay_result& result, bool with_events);

// One line per arrival: `<seconds> <n> admit|reject [<delay seconds>]`, the delay only when it is above zero.
void write_events(std::ostream& out, const replay_result& result);

// A short human form of a duration in ns, three significant digits at most, in the units durations are written in
// everywhere in admit (cli/duration.hpp): "0s", "850ns", "12.5us", "3.25ms", "1.5s", "2.08min", "2.02h", "1.5d".
[[nodiscard]] std::string human_duration(std::int64_t ns);

// `text` as a JSON string literal, quotes included, by nlohmann::json (UTF-8 kept; invalid bytes become U+FFFD).
[[nodiscard]] std::string json_string(std::string_view text);

// JSON numbers: a whole value as an integer ("5", not "5.0"), a non-finite one as null; nanoseconds as seconds; a mean
// in ns rounded to the nanosecond, as seconds.
[[nodiscard]] nlohmann::ordered_json json_number(double v);
[[nodiscard]] nlohmann::ordered_json json_seconds(std::int64_t ns);
[[nodiscard]] nlohmann::ordered_json json_mean_seconds(double mean_ns);

// `document` pretty-printed (two-space indent) and a newline.
void write_json_document(std::ostream& out, const nlohmann::ordered_json& document);

// `document` on one line, members separated by ", " and keys by ": " (one record a line, for log collectors), and a
// newline. Strings and numbers are written by nlohmann::json (invalid UTF-8 becomes U+FFFD).
void write_json_line(std::ostream& out, const nlohmann::ordered_json& document);

}  // namespace admit::cli
