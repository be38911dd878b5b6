#include "cli/replay/concurrency_replay.hpp"

#include <istream>
#include <stdexcept>

#include "cli/common/duration.hpp"

namespace admit::cli {

namespace {

// Seconds field of a trace line: exact ns, at most max_trace_seconds.
std::int64_t parse_time_field(std::size_t line, std::string_view text, const char* what, const char* expected) {
  const auto t = parse_seconds(text);
  if (!t) {
    throw trace_error(line, std::string("invalid ") + what + " " + quote_excerpt(text) + ": expected " + expected +
                                ", a decimal with up to 9 fraction digits");
  }
  if (*t > max_trace_seconds * ns_per_second) {
    throw trace_error(line, std::string(what) + " " + quote_excerpt(text) + " is beyond the largest supported time, " +
                                std::to_string(max_trace_seconds) + " s");
  }
  return *t;
}

}  // namespace

std::optional<request> request_trace_parser::feed(std::string_view line) {
  if (++line_ == 1) line = without_bom(line);
  std::string_view fields[4];
  const std::size_t count = split_trace_line(line, fields);
  if (count == 0) return std::nullopt;
  constexpr const char* shape = "`<arrival seconds> <duration seconds> [n]`";
  if (count > 3) throw trace_error(line_, "unexpected text " + quote_excerpt(fields[3]) + ": expected " + shape);
  const std::int64_t t = parse_time_field(line_, fields[0], "arrival time", "seconds since start");
  if (count == 1) {
    throw trace_error(line_, "missing duration after " + quote_excerpt(fields[0]) + ": expected " + shape);
  }
  const std::int64_t d = parse_time_field(line_, fields[1], "duration", "seconds");
  std::int64_t n = 1;
  if (count == 3) {
    const auto& f = fields[2];
    const auto parsed = f.size() <= 10 ? parse_whole_number(f) : std::nullopt;
    n = parsed.value_or(0);
    if (!parsed || n < 1 || n > max_tokens_per_arrival) {
      throw trace_error(line_, "invalid count " + quote_excerpt(f) + ": expected a whole number of permits from 1 to " +
                                   std::to_string(max_tokens_per_arrival));
    }
  }
  if (last_line_ != 0 && t < last_ns_) {
    throw trace_error(line_, "arrival time " + quote_excerpt(fields[0]) + " goes back in time (line " +
                                 std::to_string(last_line_) + " is at " + format_seconds(last_ns_) + ")");
  }
  last_ns_ = t;
  last_line_ = line_;
  return request{t, d, n, line_};
}

std::vector<request> read_requests(std::istream& in) {
  request_trace_parser parser;
  std::vector<request> out;
  std::string line;
  std::size_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    if (auto r = parser.feed(line)) out.push_back(*r);
  }
  if (in.bad()) throw trace_error(lines + 1, "read error");
  return out;
}

std::vector<request> read_requests(std::string_view text) {
  request_trace_parser parser;
  std::vector<request> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    if (auto r = parser.feed(text.substr(0, nl))) out.push_back(*r);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::string concurrency_settings::describe() const {
  std::string out(concurrency_algorithm_name);
  out += " limit=" + std::to_string(limit);
  if (max_waiters) out += " max-waiters=" + std::to_string(*max_waiters);
  if (timeout) out += " timeout=" + format_duration(*timeout);
  return out;
}

std::string_view to_string(request_outcome o) noexcept {
  switch (o) {
    case request_outcome::admitted:
      return "admit";
    case request_outcome::queue_full:
      return "queue-full";
    case request_outcome::timeout:
      return "timeout";
    case request_outcome::exceeds_capacity:
      return "exceeds-capacity";
  }
  return "?";
}

}  // namespace admit::cli
