#include "cli/replay/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/common/duration.hpp"
#include "cli/common/json.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string percent(std::int64_t part, std::int64_t whole) {
  if (whole == 0) return "-";
  return fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 1) + "%";
}

std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

double per_second(std::int64_t tokens, std::int64_t width_ns) {
  return static_cast<double>(tokens) * 1e9 / static_cast<double>(width_ns);
}

}  // namespace

void write_summary(std::ostream& out, const report_context& ctx, const replay_result& r, bool comment) {
  const std::string p = comment ? "# " : "";
  const auto& s = ctx.settings;
  out << p << "admit replay: " << s.describe() << "\n";
  out << p << "trace:    " << ctx.source << ": " << r.arrivals << " arrivals, " << r.tokens << " tokens";
  if (r.arrivals > 0) {
    out << ", " << format_seconds(r.first_ns) << "s to " << format_seconds(r.last_ns) << "s";
    const std::int64_t span = r.last_ns - r.first_ns;
    if (span > 0) out << " (" << fixed(per_second(r.tokens, span), 1) << " tokens/s on average)";
  }
  out << "\n";
  const std::size_t w = std::to_string(r.arrivals).size();
  const std::size_t tw = std::to_string(r.tokens).size();
  out << p << "admitted: " << pad_left(std::to_string(r.admitted), w) << " arrivals, "
      << pad_left(std::to_string(r.admitted_tokens), tw) << " tokens  "
      << pad_left(percent(r.admitted_tokens, r.tokens), 6) << "\n";
  out << p << "rejected: " << pad_left(std::to_string(r.rejected), w) << " arrivals, "
      << pad_left(std::to_string(r.rejected_tokens), tw) << " tokens  "
      << pad_left(percent(r.rejected_tokens, r.tokens), 6) << "\n";
  if (s.mode == replay_mode::reserve) {
    out << p << "delayed:  " << pad_left(std::to_string(r.delayed), w) << " arrivals admitted after a wait ("
        << percent(r.delayed, r.admitted) << " of admitted)\n";
    out << p << "delay:    p50 " << human_duration(r.delay.p50) << ", p90 " << human_duration(r.delay.p90) << ", p99 "
        << human_duration(r.delay.p99) << ", max " << human_duration(r.delay.max) << ", mean "
        << human_duration(static_cast<std::int64_t>(std::llround(r.delay.mean))) << "\n";
  }
  if (r.arrivals == 0) return;

  const std::int64_t end = std::max(r.last_ns, r.last_admission_ns);
  const std::int64_t width = choose_bucket_width(end, 15);
  const auto buckets = bucketize(r, width);
  double peak = 0;
  for (const auto& b : buckets) peak = std::max(peak, static_cast<double>(std::max(b.offered, b.admitted)));
  constexpr int bar = 32;
  out << p << "rate over time, tokens/s per " << format_duration(std::chrono::nanoseconds{width})
      << " (bar: # admitted, - offered but not admitted in the bucket):\n";
  out << p << pad_left("from", 10) << pad_left("offered/s", 12) << pad_left("admitted/s", 12) << "\n";
  for (const auto& b : buckets) {
    const auto cells = [&](std::int64_t v) {
      return peak > 0 ? static_cast<int>(std::lround(static_cast<double>(v) * bar / peak)) : 0;
    };
    const int a = cells(b.admitted);
    const int o = std::max(a, cells(b.offered));
    out << p << pad_left(format_seconds(b.start_ns) + "s", 10) << pad_left(fixed(per_second(b.offered, width), 1), 12)
        << pad_left(fixed(per_second(b.admitted, width), 1), 12);
    if (o > 0) {
      out << "  " << std::string(static_cast<std::size_t>(a), '#') << std::string(static_cast<std::size_t>(o - a), '-');
    }
    out << "\n";
  }
}

void write_json(std::ostream& out, const report_context& ctx, const replay_result& r, bool with_events) {
  const auto& s = ctx.settings;
  nlohmann::ordered_json j;
  j["algorithm"] = to_string(s.algo);
  j["rate"] = s.shown_rate();
  j["rate_per_second"] = json_number(s.limit.per_second());
  if (takes(s.algo, parameter::burst)) j["burst"] = s.burst;
  if (takes(s.algo, parameter::slack)) j["slack"] = s.slack;
  if (takes(s.algo, parameter::window)) {
    j["window_seconds"] = json_seconds(s.window.count());
    j["window_limit"] = s.window_limit;
  }
  if (takes(s.algo, parameter::warmup)) {
    j["warmup_seconds"] = json_seconds(s.warmup.count());
    j["cold_factor"] = json_number(s.cold_factor);
  }
  j["mode"] = to_string(s.mode);
  j["trace"] = {{"source", ctx.source},
                {"arrivals", r.arrivals},
                {"tokens", r.tokens},
                {"first_seconds", json_seconds(r.first_ns)},
                {"last_seconds", json_seconds(r.last_ns)}};
  j["admitted"] = {{"arrivals", r.admitted}, {"tokens", r.admitted_tokens}};
  j["rejected"] = {{"arrivals", r.rejected}, {"tokens", r.rejected_tokens}};
  j["delayed"] = {{"arrivals", r.delayed}};
  j["delay_seconds"] = {{"p50", json_seconds(r.delay.p50)},
                        {"p90", json_seconds(r.delay.p90)},
                        {"p99", json_seconds(r.delay.p99)},
                        {"max", json_seconds(r.delay.max)},
                        {"mean", json_mean_seconds(r.delay.mean)}};
  const std::int64_t end = std::max(r.last_ns, r.last_admission_ns);
  const std::int64_t width = choose_bucket_width(end, 120);
  auto rows = nlohmann::ordered_json::array();
  if (r.arrivals > 0) {
    for (const auto& b : bucketize(r, width)) {
      rows.push_back({json_seconds(b.start_ns), b.offered, b.admitted, b.rejected});
    }
  }
  j["buckets"] = {{"width_seconds", json_seconds(width)},
                  {"columns", {"start_seconds", "offered", "admitted", "rejected"}},
                  {"rows", std::move(rows)}};
  if (with_events) {
    auto events = nlohmann::ordered_json::array();
    for (const auto& e : r.events) {
      nlohmann::ordered_json event = {{"t", json_seconds(e.t_ns)}, {"n", e.n}, {"admitted", e.admitted}};
      if (e.delay_ns > 0) event["delay"] = json_seconds(e.delay_ns);
      events.push_back(std::move(event));
    }
    j["events"] = std::move(events);
  }
  write_json_document(out, j);
}

void write_events(std::ostream& out, const replay_result& r) {
  std::string line;
  for (const auto& e : r.events) {
    line = format_seconds(e.t_ns);
    line += ' ';
    line += std::to_string(e.n);
    line += e.admitted ? " admit" : " reject";
    if (e.delay_ns > 0) {
      line += ' ';
      line += format_seconds(e.delay_ns);
    }
    line += '\n';
    out << line;
  }
}

}  // namespace admit::cli
