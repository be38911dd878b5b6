// The reports of `admit replay --algorithm concurrency` (declared in cli/replay/concurrency_replay.hpp).
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/common/duration.hpp"
#include "cli/common/json.hpp"
#include "cli/common/text.hpp"
#include "cli/replay/concurrency_replay.hpp"
#include "cli/replay/report.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

void write_concurrency_summary(std::ostream& out, const concurrency_settings& s, const std::string& source,
                               const concurrency_result& r, bool comment) {
  const std::string p = comment ? "# " : "";
  out << p << "admit replay: " << s.describe() << "\n";
  out << p << "trace:            " << source << ": " << plural(r.requests, "request", "requests") << ", "
      << plural(r.permits, "permit", "permits");
  if (r.requests > 0) {
    out << ", " << format_seconds(r.first_ns) << "s to " << format_seconds(r.last_ns) << "s, mean duration "
        << human_duration(
               static_cast<std::int64_t>(std::llround(r.total_duration_ns / static_cast<double>(r.requests))));
  }
  out << "\n";
  if (r.skipped_lines > 0) {
    out << p << "skipped:          " << plural(r.skipped_lines, "line", "lines")
        << " that did not parse (--skip-bad-lines)\n";
  }
  if (r.reordered > 0) {
    out << p << "order:            " << plural(r.reordered, "request was", "requests were")
        << " earlier than the line before; replayed in file order, at that line's time\n";
  }
  const std::size_t w = std::to_string(r.requests).size();
  const auto line = [&](const char* label, std::int64_t n, const std::string& note) {
    out << p << label << pad_left(std::to_string(n), w) << "  " << pad_left(share(n, r.requests), 6) << "  " << note
        << "\n";
  };
  // Notes built by appending: `"literal" + std::string` trips g++ 12's false -Wrestrict at -O3 (GCC bug 105651).
  const auto note = [](std::initializer_list<std::string_view> parts) {
    std::string text;
    for (auto part : parts) text.append(part);
    return text;
  };
  line("admitted:         ", r.admitted,
       note({"(", std::to_string(r.admitted_at_once), " at once, ", std::to_string(r.admitted_after_wait),
             " after waiting)"}));
  line("queue full:       ", r.queue_full,
       s.max_waiters
           ? note({"(rejected at once: ", plural(*s.max_waiters, "request was", "requests were"), " waiting)"})
           : std::string("(rejected at once: the queue is unbounded, never)"));
  line("timed out:        ", r.timed_out,
       s.timeout ? note({"(waited ", human_duration(s.timeout->count()), " without a permit)"})
                 : std::string("(no --timeout: never)"));
  line("exceeds capacity: ", r.exceeds_capacity,
       note({"(needed more than the limit of ", std::to_string(s.limit), ")"}));
  out << p << "wait:             p50 " << human_duration(r.wait.p50) << ", p90 " << human_duration(r.wait.p90)
      << ", p99 " << human_duration(r.wait.p99) << ", max " << human_duration(r.wait.max) << ", mean "
      << human_duration(static_cast<std::int64_t>(std::llround(r.wait.mean)))
      << (r.wait_exact ? " (admitted requests, exact)\n"
                       : " (admitted requests; percentiles within 0.4%, never below)\n");
  out << p << "peak:             " << r.peak_in_flight << " in flight (limit " << s.limit << "), " << r.peak_waiting
      << " waiting";
  if (s.max_waiters) out << " (max-waiters " << *s.max_waiters << ")";
  out << "\n";
  out << p << "done at:          " << format_seconds(r.end_ns) << "s (last completion)\n";
}

namespace {

nlohmann::ordered_json concurrency_json(const concurrency_settings& s, const std::string& source,
                                        const concurrency_result& r) {
  nlohmann::ordered_json j;
  j["algorithm"] = concurrency_algorithm_name;
  j["limit"] = s.limit;
  j["max_waiters"] = s.max_waiters ? nlohmann::ordered_json(*s.max_waiters) : nullptr;
  j["timeout_seconds"] = s.timeout ? json_seconds(s.timeout->count()) : nullptr;
  j["trace"] = {{"source", source},
                {"requests", r.requests},
                {"permits", r.permits},
                {"first_seconds", json_seconds(r.first_ns)},
                {"last_seconds", json_seconds(r.last_ns)}};
  if (r.skipped_lines > 0) j["trace"]["skipped_lines"] = r.skipped_lines;
  if (r.reordered > 0) j["trace"]["reordered"] = r.reordered;
  j["admitted"] = {{"requests", r.admitted}, {"at_once", r.admitted_at_once}, {"after_wait", r.admitted_after_wait}};
  j["queue_full"] = r.queue_full;
  j["timed_out"] = r.timed_out;
  j["exceeds_capacity"] = r.exceeds_capacity;
  j["wait_seconds"] = {{"p50", json_seconds(r.wait.p50)},        {"p90", json_seconds(r.wait.p90)},
                       {"p99", json_seconds(r.wait.p99)},        {"max", json_seconds(r.wait.max)},
                       {"mean", json_mean_seconds(r.wait.mean)}, {"exact", r.wait_exact}};
  j["peak"] = {{"in_flight", r.peak_in_flight}, {"waiting", r.peak_waiting}};
  j["end_seconds"] = json_seconds(r.end_ns);
  return j;
}

nlohmann::ordered_json event_json(const request_event& e) {
  return {{"t", json_seconds(e.t_ns)},
          {"duration", json_seconds(e.duration_ns)},
          {"n", e.n},
          {"outcome", to_string(e.outcome)},
          {"wait", json_seconds(e.wait_ns)}};
}

}  // namespace

void write_concurrency_json(std::ostream& out, const concurrency_settings& s, const std::string& source,
                            const concurrency_result& r, bool with_events) {
  auto j = concurrency_json(s, source, r);
  if (with_events) {
    auto events = nlohmann::ordered_json::array();
    for (const auto& e : r.events) events.push_back(event_json(e));
    j["events"] = std::move(events);
  }
  write_json_document(out, j);
}

std::string format_concurrency_event_json(const request_event& e) { return json_array_element(event_json(e)); }

void write_concurrency_json(std::ostream& out, const concurrency_settings& s, const std::string& source,
                            const concurrency_result& r, const std::function<void(std::ostream&)>& write_events) {
  auto j = concurrency_json(s, source, r);
  j["events"] = nlohmann::ordered_json::array();
  write_json_document_streaming(out, j, r.requests > 0, write_events);
}

std::string format_concurrency_event(const request_event& e) {
  std::string line = format_seconds(e.t_ns);
  line += ' ';
  line += format_seconds(e.duration_ns);
  line += ' ';
  line += std::to_string(e.n);
  line += ' ';
  line += to_string(e.outcome);
  if (e.wait_ns > 0) {
    line += ' ';
    line += format_seconds(e.wait_ns);
  }
  line += '\n';
  return line;
}

void write_concurrency_events(std::ostream& out, const concurrency_result& r) {
  for (const auto& e : r.events) out << format_concurrency_event(e);
}

}  // namespace admit::cli
