// cli/replay/trace.hpp — the trace format of `admit replay`: one arrival a line.
//
//   # comment (a '#' starts a comment anywhere on a line; blank lines are ignored)
//   0.000000001        one request at 1 ns after the start of the trace
//   1.5 3              a request for 3 tokens at 1.5 s
//
// Each line is `<seconds since start> [n]`, fields separated by spaces or tabs. Seconds is a non-negative decimal
// with up to 9 fraction digits ("12", "12.5", "0.000000001"; no sign, no exponent, no leading or trailing '.'),
// parsed exactly into integer nanoseconds — no floating point is involved, so "0.1" is exactly 100000000 ns — and
// at most max_trace_seconds.
// n is a positive integer (default 1, at most max_tokens_per_arrival). Times never go back: each line's time is at
// least the previous arrival's. A trailing '\r' (CRLF files) is ignored.
//
// Errors are trace_error exceptions whose message names the line number and the offending text, e.g.
//   line 12: invalid time "1.5.2": expected seconds since start, a decimal with up to 9 fraction digits
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common/decimal.hpp"
#include "cli/common/message.hpp"

namespace admit::cli {

// The largest `n` one trace line may ask for (keeps every limiter's arithmetic far from overflow).
inline constexpr std::int64_t max_tokens_per_arrival = max_count;
// The latest time a trace line may hold, in seconds (~31.7 years): leaves every replay far from int64 overflow.
inline constexpr std::int64_t max_trace_seconds = 1'000'000'000;

// One line of a trace.
struct arrival {
  std::int64_t t_ns = 0;  // nanoseconds since the start of the trace
  std::int64_t n = 1;     // tokens requested
  std::size_t line = 0;   // 1-based line number in the source

  friend bool operator==(const arrival&, const arrival&) = default;
};

// A malformed trace: the message names the line and the offending text. line() is the 1-based line number.
class trace_error : public std::runtime_error {
 public:
  trace_error(std::size_t line, const std::string& message);
  [[nodiscard]] std::size_t line() const noexcept { return line_; }
  // The words without "line N: ", which what() begins with.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::size_t line_;
  std::string message_;
};

// A replay that would need a time past the end of its clock, 2^63 - 1 ns (about 292 years) after the trace's start:
// a request that would start (a reservation's delay) or end (a concurrency permit held) beyond it. Its numbers cannot
// be told, so the replay stops there instead of capping them. line() is the request's.
class clock_range_error : public trace_error {
 public:
  using trace_error::trace_error;
};

// The first line of a file without the UTF-8 byte order mark an editor may put before it (a trace or a log saved on
// Windows): invisible, it made the first time "invalid".
[[nodiscard]] inline std::string_view without_bom(std::string_view first_line) noexcept {
  constexpr std::string_view bom = "\xEF\xBB\xBF";
  return first_line.starts_with(bom) ? first_line.substr(bom.size()) : first_line;
}

// Splits one trace line into fields separated by spaces, tabs or '\r', after dropping a '#' comment. Stores at most
// fields.size() fields and returns how many it stored: a format of at most k fields passes k + 1 slots and reads a
// result of k + 1 as unexpected text in fields[k]. 0 means a blank or comment-only line.
[[nodiscard]] std::size_t split_trace_line(std::string_view line, std::span<std::string_view> fields) noexcept;

// Reads a trace line by line, checking that times never go back.
// Thread safety: none (one parser per thread); no shared state.
class trace_parser {
 public:
  // Parses the next line (without its '\n'). Returns the arrival, or nullopt for a blank or comment-only line.
  // Throws trace_error naming this line when it does not parse or goes back in time.
  std::optional<arrival> feed(std::string_view line);

  // Lines fed so far.
  [[nodiscard]] std::size_t lines() const noexcept { return line_; }

 private:
  std::size_t line_ = 0;
  std::int64_t last_ns_ = 0;
  std::size_t last_line_ = 0;
};

// Reads a whole trace into memory (tests and small inputs: the replay itself streams, see
// cli/replay/arrival_source.hpp). Throws trace_error (see trace_parser::feed).
[[nodiscard]] std::vector<arrival> read_trace(std::istream& in);

// Same, from a string (tests and fuzzing).
[[nodiscard]] std::vector<arrival> read_trace(std::string_view text);

}  // namespace admit::cli
