#include "cli/replay/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/common/duration.hpp"
#include "cli/common/json.hpp"
#include "cli/common/message.hpp"
#include "cli/common/text.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double per_second(std::int64_t tokens, std::int64_t width_ns) {
  return static_cast<double>(tokens) * 1e9 / static_cast<double>(width_ns);
}

// "p50 1ms, p90 ..., mean ..." and, when the percentiles come from the histogram, what that means.
std::string delay_line(const replay_result& r) {
  std::string line = "p50 " + human_duration(r.delay.p50) + ", p90 " + human_duration(r.delay.p90) + ", p99 " +
                     human_duration(r.delay.p99) + ", max " + human_duration(r.delay.max) + ", mean " +
                     human_duration(static_cast<std::int64_t>(std::llround(r.delay.mean)));
  if (!r.delay_exact) line += " (percentiles within 0.4%, never below)";
  return line;
}

// Whether the warm-up limiter ever served at its stable rate: a trace that never brought it there shows only its cold
// start, and says so.
std::string warmup_line(const report_context& ctx, const replay_result& r) {
  const auto& s = ctx.settings;
  const std::string stable = s.shown_rate();
  if (r.per_key) {
    return std::to_string(r.stable_limiters) + " of " + plural(r.per_key->keys, "key's limiter", "keys' limiters") +
           " reached the stable rate of " + stable +
           (r.stable_since ? ", the first at " + format_seconds(*r.stable_since) + "s" : "");
  }
  if (r.stable_since) return "reached the stable rate of " + stable + " at " + format_seconds(*r.stable_since) + "s";
  char cold[32];
  std::snprintf(cold, sizeof cold, "%g", s.cold_factor);
  return "the trace never brought the limiter to its stable rate of " + stable +
         ": it stayed warming up, admitting at between 1/" + cold + " of it (--cold-factor " + cold +
         ") and it; only admitted requests warm it up";
}

void write_keys(std::ostream& out, const std::string& p, const report_context& ctx, const per_key_result& k) {
  out << p << "keys:     " << plural(k.keys, "key", "keys") << " (--per-key " << ctx.per_key << "), "
      << k.keys_with_rejections << " with rejections\n";
  if (k.most_limited.empty()) return;
  out << p << "most limited keys:\n";
  std::size_t kw = 3;
  for (const auto& e : k.most_limited) kw = std::max(kw, quote(e.key).size());
  kw = std::min<std::size_t>(kw, 48);
  out << p << "  "
      << "key" << std::string(kw - 3, ' ') << pad_left("arrivals", 10) << pad_left("rejected", 10)
      << pad_left("share", 8) << "\n";
  for (const auto& e : k.most_limited) {
    const std::string name = quote_excerpt(e.key, 46);
    out << p << "  " << name << std::string(kw > name.size() ? kw - name.size() : 0, ' ')
        << pad_left(std::to_string(e.arrivals), 10) << pad_left(std::to_string(e.rejected), 10)
        << pad_left(share(e.rejected, e.arrivals), 8) << "\n";
  }
}

}  // namespace

void write_summary(std::ostream& out, const report_context& ctx, const replay_result& r, bool comment) {
  const std::string p = comment ? "# " : "";
  const auto& s = ctx.settings;
  out << p << "admit replay: " << s.describe() << "\n";
  out << p << "trace:    " << ctx.source << ": " << plural(r.arrivals, "arrival", "arrivals") << ", "
      << plural(r.tokens, "token", "tokens");
  if (r.arrivals > 0) {
    out << ", " << format_seconds(r.first_ns) << "s to " << format_seconds(r.last_ns) << "s";
    const std::int64_t span = r.last_ns - r.first_ns;
    if (span > 0) out << " (" << fixed(per_second(r.tokens, span), 1) << " tokens/s on average)";
  }
  out << "\n";
  if (ctx.skipped_lines > 0) {
    out << p << "skipped:  " << plural(ctx.skipped_lines, "line", "lines")
        << " that did not parse (--skip-bad-lines)\n";
  }
  if (ctx.reordered > 0) {
    out << p << "order:    " << plural(ctx.reordered, "arrival was", "arrivals were")
        << " earlier than the line before; replayed in file order, at that line's time\n";
  }
  const std::size_t w = std::to_string(r.arrivals).size();
  const std::size_t tw = std::to_string(r.tokens).size();
  const auto count_line = [&](const char* label, std::int64_t arrivals, std::int64_t tokens) {
    out << p << label << pad_left(std::to_string(arrivals), w) << (arrivals == 1 ? " arrival,  " : " arrivals, ")
        << pad_left(std::to_string(tokens), tw) << (tokens == 1 ? " token   " : " tokens  ")
        << pad_left(share(tokens, r.tokens), 6) << "\n";
  };
  count_line("admitted: ", r.admitted, r.admitted_tokens);
  count_line("rejected: ", r.rejected, r.rejected_tokens);
  if (r.per_key) write_keys(out, p, ctx, *r.per_key);
  if (s.algo == algorithm::warmup) out << p << "warm-up:  " << warmup_line(ctx, r) << "\n";
  if (s.mode == replay_mode::reserve) {
    out << p << "delayed:  " << pad_left(std::to_string(r.delayed), w)
        << (r.delayed == 1 ? " arrival admitted after a wait (" : " arrivals admitted after a wait (")
        << share(r.delayed, r.admitted) << " of admitted)\n";
    out << p << "delay:    " << delay_line(r) << "\n";
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

namespace {

nlohmann::ordered_json summary_json(const report_context& ctx, const replay_result& r) {
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
  if (ctx.skipped_lines > 0) j["trace"]["skipped_lines"] = ctx.skipped_lines;
  if (ctx.reordered > 0) j["trace"]["reordered"] = ctx.reordered;
  j["admitted"] = {{"arrivals", r.admitted}, {"tokens", r.admitted_tokens}};
  j["rejected"] = {{"arrivals", r.rejected}, {"tokens", r.rejected_tokens}};
  if (r.per_key) {
    j["per_key"] = ctx.per_key;
    j["keys"] = r.per_key->keys;
    j["keys_with_rejections"] = r.per_key->keys_with_rejections;
    auto keys = nlohmann::ordered_json::array();
    for (const auto& k : r.per_key->most_limited) {
      keys.push_back({{"key", k.key},
                      {"arrivals", k.arrivals},
                      {"tokens", k.tokens},
                      {"rejected", {{"arrivals", k.rejected}, {"tokens", k.rejected_tokens}}}});
    }
    j["most_limited_keys"] = std::move(keys);
  }
  if (s.algo == algorithm::warmup) {
    j["warmup"] = {{"reached_stable_rate", r.stable_since.has_value()},
                   {"stable_since_seconds", r.stable_since ? json_seconds(*r.stable_since) : nullptr}};
    if (r.per_key) j["warmup"]["keys_at_stable_rate"] = r.stable_limiters;
  }
  j["delayed"] = {{"arrivals", r.delayed}};
  j["delay_seconds"] = {{"p50", json_seconds(r.delay.p50)},        {"p90", json_seconds(r.delay.p90)},
                        {"p99", json_seconds(r.delay.p99)},        {"max", json_seconds(r.delay.max)},
                        {"mean", json_mean_seconds(r.delay.mean)}, {"exact", r.delay_exact}};
  const std::int64_t end = std::max(r.last_ns, r.last_admission_ns);
  const std::int64_t width = choose_bucket_width(end, 120);
  auto rows = nlohmann::ordered_json::array();
  if (r.arrivals > 0) {
    for (const auto& b : bucketize(r, width)) {
      rows.push_back({json_seconds(b.start_ns), b.offered, b.admitted, b.rejected});
    }
  }
  // Each column counts tokens (an arrival of n counts n), by arrival time, except admitted: by admission time.
  j["buckets"] = {{"width_seconds", json_seconds(width)},
                  {"columns", {"start_seconds", "offered_tokens", "admitted_tokens", "rejected_tokens"}},
                  {"rows", std::move(rows)}};
  return j;
}

nlohmann::ordered_json event_json(const event& e, std::string_view key) {
  nlohmann::ordered_json j = {{"t", json_seconds(e.t_ns)}, {"n", e.n}, {"admitted", e.admitted}};
  if (e.delay_ns > 0) j["delay"] = json_seconds(e.delay_ns);
  if (!key.empty()) j["key"] = key;
  return j;
}

}  // namespace

void write_json(std::ostream& out, const report_context& ctx, const replay_result& r, bool with_events) {
  if (!with_events) {
    write_json_document(out, summary_json(ctx, r));
    return;
  }
  write_json(out, ctx, r, [&](std::ostream& to) {
    for (std::size_t i = 0; i < r.events.size(); ++i) to << (i == 0 ? "" : ",\n") << format_event_json(r.events[i]);
  });
}

void write_json(std::ostream& out, const report_context& ctx, const replay_result& r,
                const std::function<void(std::ostream&)>& write_events) {
  auto j = summary_json(ctx, r);
  j["events"] = nlohmann::ordered_json::array();
  write_json_document_streaming(out, j, r.arrivals > 0, write_events);
}

std::string format_event_json(const event& e, std::string_view key) { return json_array_element(event_json(e, key)); }

std::string format_event(const event& e, std::string_view key) {
  std::string line = format_seconds(e.t_ns);
  line += ' ';
  line += std::to_string(e.n);
  line += e.admitted ? " admit" : " reject";
  if (e.delay_ns > 0) {
    line += ' ';
    line += format_seconds(e.delay_ns);
  }
  if (!key.empty()) {
    line += " # ";
    line += quote(key);
  }
  line += '\n';
  return line;
}

void write_events(std::ostream& out, const replay_result& r) {
  for (const auto& e : r.events) out << format_event(e);
}

}  // namespace admit::cli
