#include "cli/replay/trace.hpp"

#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/replay/arrival_source.hpp"

#include <istream>
#include <limits>

namespace admit::cli {

namespace {

bool is_blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\r'; }

// For a line that is no trace line but looks like an access log's: which --format reads it (empty: none seems to).
std::string format_hint(std::string_view line) {
  if (line.find(" [") != std::string_view::npos && line.find("] \"") != std::string_view::npos) {
    return " (it looks like an nginx access log: --format nginx reads one)";
  }
  if (!line.empty() && line.front() == '{') return " (it looks like JSON lines: --format jsonl reads them)";
  if (line.size() > 4 && line.front() == '[' && line[1] >= '0' && line[1] <= '9') {
    return " (it looks like an Envoy access log: --format envoy reads one)";
  }
  if (line.find(',') != std::string_view::npos) return " (it looks like CSV: --format csv reads it)";
  return {};
}

}  // namespace

std::size_t split_trace_line(std::string_view line, std::span<std::string_view> fields) noexcept {
  const auto hash = line.find('#');
  if (hash != std::string_view::npos) line = line.substr(0, hash);
  std::size_t count = 0;
  std::size_t i = 0;
  while (i < line.size() && count < fields.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    if (i == line.size()) break;
    const std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    fields[count++] = line.substr(start, i - start);
  }
  return count;
}

trace_error::trace_error(std::size_t line, const std::string& message)
    : std::runtime_error("line " + std::to_string(line) + ": " + message), line_(line), message_(message) {}

std::optional<arrival> trace_parser::feed(std::string_view line) {
  if (++line_ == 1) line = without_bom(line);
  std::string_view fields[3];
  const std::size_t count = split_trace_line(line, fields);
  if (count == 0) return std::nullopt;
  if (count > 2) {
    throw trace_error(line_, "unexpected text " + quote_excerpt(fields[2]) + ": expected `<seconds since start> [n]`" +
                                 format_hint(line));
  }

  const auto t = parse_seconds(fields[0]);
  if (!t) {
    throw trace_error(line_, "invalid time " + quote_excerpt(fields[0]) +
                                 ": expected seconds since start, a decimal with up to 9 fraction digits" +
                                 format_hint(line));
  }
  if (*t > max_trace_seconds * ns_per_second) {
    throw trace_error(line_, "time " + quote_excerpt(fields[0]) + " is beyond the largest supported time, " +
                                 std::to_string(max_trace_seconds) + " s");
  }
  std::int64_t n = 1;
  if (count == 2) {
    const auto v = parse_whole_number(fields[1]);
    if (v) n = *v;
    if (!v || n < 1 || n > max_tokens_per_arrival) {
      throw trace_error(line_, "invalid count " + quote_excerpt(fields[1]) +
                                   ": expected a whole number of tokens from 1 to " +
                                   std::to_string(max_tokens_per_arrival));
    }
  }
  if (last_line_ != 0 && *t < last_ns_) {
    throw trace_error(line_, "time " + quote_excerpt(fields[0]) + " goes back in time (line " +
                                 std::to_string(last_line_) + " is at " + format_seconds(last_ns_) + ")");
  }
  last_ns_ = *t;
  last_line_ = line_;
  return arrival{*t, n, line_};
}

std::vector<arrival> read_trace(std::istream& in) {
  trace_parser parser;
  std::vector<arrival> out;
  std::string line;
  while (std::getline(in, line)) {
    if (auto a = parser.feed(line)) out.push_back(*a);
  }
  if (in.bad()) throw trace_error(parser.lines() + 1, "read error");
  return out;
}

bool trace_source::read(keyed_arrival& next) {
  while (std::getline(in_, line_)) {
    if (auto a = parser_.feed(line_)) {
      next = {*a, {}};
      return true;
    }
  }
  if (in_.bad()) throw trace_error(parser_.lines() + 1, "read error");
  return false;
}

std::vector<arrival> read_trace(std::string_view text) {
  trace_parser parser;
  std::vector<arrival> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    if (auto a = parser.feed(line)) out.push_back(*a);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace admit::cli
