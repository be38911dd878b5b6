// cli/common/json.hpp — how `admit` writes JSON: by nlohmann::json, strings UTF-8 (invalid bytes become U+FFFD, so the
// output is always valid JSON), whole numbers as integers, times in seconds. Every subcommand's --json goes through
// these, so the forms are the same everywhere.
//
//   write_json_line(std::cerr, {{"event", "waiting"}, {"waited_s", json_seconds(1'500'000'000)}});
//   // {"event": "waiting", "waited_s": 1.5}
//
// Thread safety: pure functions (writing to the stream given).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace admit::cli {

// `text` as a JSON string literal, quotes included, by nlohmann::json (UTF-8 kept; invalid bytes become U+FFFD).
[[nodiscard]] std::string json_string(std::string_view text);

// JSON numbers: a whole value as an integer ("5", not "5.0"), a non-finite one as null; nanoseconds as seconds; a mean
// in ns rounded to the nanosecond, as seconds.
[[nodiscard]] nlohmann::ordered_json json_number(double v);
[[nodiscard]] nlohmann::ordered_json json_seconds(std::int64_t ns);
[[nodiscard]] nlohmann::ordered_json json_mean_seconds(double mean_ns);

// `document` pretty-printed (two-space indent) and a newline.
void write_json_document(std::ostream& out, const nlohmann::ordered_json& document);

// A streamed array: `document` as write_json_document writes it, its last member an empty array whose elements
// `write_elements` writes in place — each made by json_array_element, joined by ",\n" — so that a long list (a
// replay's events) can come from a file or be produced as it is written, never held in memory. `any`: whether
// write_elements writes at least one element (otherwise the array stays `[]`). Throws std::logic_error when
// `document`'s last member is not an empty array.
void write_json_document_streaming(std::ostream& out, const nlohmann::ordered_json& document, bool any,
                                   const std::function<void(std::ostream&)>& write_elements);
// One element of that array, pretty-printed and indented for its place (four spaces), without a comma.
[[nodiscard]] std::string json_array_element(const nlohmann::ordered_json& element);

// `document` on one line, members separated by ", " and keys by ": " (one record a line, for log collectors), and a
// newline. Strings and numbers are written by nlohmann::json (invalid UTF-8 becomes U+FFFD).
void write_json_line(std::ostream& out, const nlohmann::ordered_json& document);

}  // namespace admit::cli
