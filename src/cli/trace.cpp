#include "cli/trace.hpp"

#include <istream>
#include <limits>

namespace admit::cli {

namespace {

constexpr std::int64_t ns_per_second = 1'000'000'000;

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
bool is_blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\r'; }

// Parses a non-empty run of decimal digits into a non-negative int64; false on overflow or a non-digit.
bool parse_digits(std::string_view text, std::int64_t& out) noexcept {
  if (text.empty()) return false;
  std::int64_t v = 0;
  for (char c : text) {
    if (!is_digit(c)) return false;
    const int d = c - '0';
    if (v > (std::numeric_limits<std::int64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

}  // namespace

std::optional<std::int64_t> parse_whole_number(std::string_view text) noexcept {
  std::int64_t v = 0;
  if (!parse_digits(text, v)) return std::nullopt;
  return v;
}

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
    : std::runtime_error("line " + std::to_string(line) + ": " + message), line_(line) {}

std::optional<std::int64_t> parse_seconds(std::string_view text) noexcept {
  const auto dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  std::int64_t seconds = 0;
  if (!parse_digits(whole, seconds)) return std::nullopt;
  std::int64_t fraction_ns = 0;
  if (dot != std::string_view::npos) {
    const std::string_view fraction = text.substr(dot + 1);
    if (fraction.empty() || fraction.size() > 9) return std::nullopt;
    if (!parse_digits(fraction, fraction_ns)) return std::nullopt;
    for (std::size_t i = fraction.size(); i < 9; ++i) fraction_ns *= 10;
  }
  if (seconds > (std::numeric_limits<std::int64_t>::max() - fraction_ns) / ns_per_second) return std::nullopt;
  return seconds * ns_per_second + fraction_ns;
}

std::string format_seconds(std::int64_t ns) {
  std::string out;
  // Work on the magnitude as unsigned so that INT64_MIN is representable.
  std::uint64_t magnitude = static_cast<std::uint64_t>(ns);
  if (ns < 0) {
    out.push_back('-');
    magnitude = ~magnitude + 1;
  }
  const std::uint64_t seconds = magnitude / ns_per_second;
  std::uint64_t fraction = magnitude % ns_per_second;
  out += std::to_string(seconds);
  if (fraction != 0) {
    char digits[10] = {};
    for (int i = 8; i >= 0; --i) {
      digits[i] = static_cast<char>('0' + fraction % 10);
      fraction /= 10;
    }
    int len = 9;
    while (len > 1 && digits[len - 1] == '0') --len;
    out.push_back('.');
    out.append(digits, static_cast<std::size_t>(len));
  }
  return out;
}

std::optional<arrival> trace_parser::feed(std::string_view line) {
  ++line_;
  std::string_view fields[3];
  const std::size_t count = split_trace_line(line, fields);
  if (count == 0) return std::nullopt;
  if (count > 2) {
    throw trace_error(line_, "unexpected text " + quote_excerpt(fields[2]) + ": expected `<seconds since start> [n]`");
  }

  const auto t = parse_seconds(fields[0]);
  if (!t) {
    throw trace_error(line_, "invalid time " + quote_excerpt(fields[0]) +
                                 ": expected seconds since start, a decimal with up to 9 fraction digits");
  }
  if (*t > max_trace_seconds * ns_per_second) {
    throw trace_error(line_, "time " + quote_excerpt(fields[0]) + " is beyond the largest supported time, " +
                                 std::to_string(max_trace_seconds) + " s");
  }
  std::int64_t n = 1;
  if (count == 2) {
    if (!parse_digits(fields[1], n) || n < 1 || n > max_tokens_per_arrival) {
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

std::string too_many_entries(std::size_t most, std::string_view what) {
  return "more than " + std::to_string(most) + " " + std::string(what) +
         ": admit replay holds the whole trace in memory and stops there; replay a part of it (split -l " +
         std::to_string(most) + ")";
}

std::vector<arrival> read_trace(std::istream& in, std::size_t max_arrivals) {
  trace_parser parser;
  std::vector<arrival> out;
  std::string line;
  while (std::getline(in, line)) {
    if (auto a = parser.feed(line)) {
      if (out.size() == max_arrivals) throw trace_error(parser.lines(), too_many_entries(max_arrivals, "arrivals"));
      out.push_back(*a);
    }
  }
  if (in.bad()) throw trace_error(parser.lines() + 1, "read error");
  return out;
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
