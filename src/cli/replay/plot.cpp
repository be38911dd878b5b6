#include "cli/replay/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"
#include "cli/common/text.hpp"
#include "cli/replay/concurrency_replay.hpp"
#include "cli/replay/svg.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

namespace {

constexpr double svg_width = 960;
constexpr double svg_height = 620;
constexpr double left = 80;
constexpr double right = 30;
constexpr double plot_w = svg_width - left - right;
// Each panel's legend is a row of entries just above it, outside the data; the subtitle above them takes at most two
// lines.
constexpr double top1 = 96, height1 = 204;   // cumulative panel (or permits in flight)
constexpr double top2 = 372, height2 = 190;  // rate panel (or requests waiting)
constexpr double legend_gap = 9;             // from a legend row's baseline to its panel's top

constexpr const char* offered_color = "#8a9bb0";
constexpr const char* admitted_color = "#1b7f3b";
constexpr const char* rate_color = "#d35400";

void axes(std::ostream& out, double top, double height, double x_max_s, double y_max, const std::string& y_title) {
  out << "<g font-size=\"12\" fill=\"#333\">\n";
  out << "<rect x=\"" << svg_num(left) << "\" y=\"" << svg_num(top) << "\" width=\"" << svg_num(plot_w)
      << "\" height=\"" << svg_num(height) << "\" fill=\"none\" stroke=\"#999\"/>\n";
  const double ystep = tick_step(y_max, 5);
  for (double v = 0; v <= y_max * (1 + 1e-9); v += ystep) {
    const double y = top + height - v / y_max * height;
    out << "<line x1=\"" << svg_num(left) << "\" x2=\"" << svg_num(left + plot_w) << "\" y1=\"" << svg_num(y)
        << "\" y2=\"" << svg_num(y) << "\" stroke=\"#e5e5e5\"/>";
    out << "<text x=\"" << svg_num(left - 6) << "\" y=\"" << svg_num(y + 4) << "\" text-anchor=\"end\">"
        << tick_label(v) << "</text>\n";
  }
  const double xstep = tick_step(x_max_s, 10);
  for (double v = 0; v <= x_max_s * (1 + 1e-9); v += xstep) {
    const double x = left + v / x_max_s * plot_w;
    out << "<line x1=\"" << svg_num(x) << "\" x2=\"" << svg_num(x) << "\" y1=\"" << svg_num(top + height) << "\" y2=\""
        << svg_num(top + height + 4) << "\" stroke=\"#999\"/>";
    out << "<text x=\"" << svg_num(x) << "\" y=\"" << svg_num(top + height + 17) << "\" text-anchor=\"middle\">"
        << tick_label(v) << "</text>\n";
  }
  out << "<text x=\"" << svg_num(left + plot_w / 2) << "\" y=\"" << svg_num(top + height + 33)
      << "\" text-anchor=\"middle\">time since start of trace (s)</text>\n";
  out << "<text transform=\"translate(" << svg_num(left - 55) << "," << svg_num(top + height / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(y_title) << "</text>\n";
  out << "</g>\n";
}

void polyline(std::ostream& out, const std::vector<double>& values, double top, double height, double y_max,
              const char* color, double stroke_width) {
  out << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << svg_num(stroke_width)
      << "\" stroke-linejoin=\"round\" points=\"";
  const double n = static_cast<double>(values.size() - 1);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double x = left + static_cast<double>(i) / n * plot_w;
    const double y = top + height - values[i] / y_max * height;
    out << svg_num(x) << "," << svg_num(y) << (i + 1 < values.size() ? " " : "");
  }
  out << "\"/>\n";
}

}  // namespace

void write_svg(std::ostream& out, const report_context& ctx, const replay_result& r) {
  const std::int64_t end_ns = std::max<std::int64_t>({r.last_ns, r.last_admission_ns, 1'000'000});
  const double end_s = static_cast<double>(end_ns) / 1e9;

  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg_num(svg_width) << "\" height=\""
      << svg_num(svg_height) << "\" viewBox=\"0 0 " << svg_num(svg_width) << " " << svg_num(svg_height)
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << svg_num(left)
      << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\" fill=\"#222\">admit replay: "
      << xml_escape(ctx.settings.describe()) << "</text>\n";
  std::string sub = ctx.source + ": " + plural(r.arrivals, "arrival", "arrivals") + ", " +
                    plural(r.tokens, "token", "tokens") + "; admitted " + std::to_string(r.admitted_tokens) +
                    ", rejected " + std::to_string(r.rejected_tokens);
  if (ctx.settings.mode == replay_mode::reserve) {
    sub += ", delayed " + std::to_string(r.delayed) + " (p99 delay " + human_duration(r.delay.p99) + ")";
  }
  if (r.per_key) {
    sub += "; " + plural(r.per_key->keys, "key", "keys") + ", " + std::to_string(r.per_key->keys_with_rejections) +
           " with rejections";
  }
  svg_subtitle(out, left, plot_w, sub);

  // Panel 1: cumulative tokens, sampled once per pixel from the timeline (exact at its grid's boundaries).
  const int samples = static_cast<int>(plot_w);
  std::vector<double> cum_offered(static_cast<std::size_t>(samples) + 1), cum_admitted(cum_offered.size());
  for (int i = 0; i <= samples; ++i) {
    const auto t = static_cast<std::int64_t>(static_cast<double>(end_ns) * i / samples);
    cum_offered[static_cast<std::size_t>(i)] = r.timeline.offered_until(t);
    cum_admitted[static_cast<std::size_t>(i)] = r.timeline.admitted_until(t);
  }
  const double y1_max = std::max(1.0, static_cast<double>(r.tokens)) * 1.05;
  axes(out, top1, height1, end_s, y1_max, "cumulative tokens");
  polyline(out, cum_offered, top1, height1, y1_max, offered_color, 2);
  polyline(out, cum_admitted, top1, height1, y1_max, admitted_color, 2);
  svg_legend_row(out, left, top1 - legend_gap,
                 {{offered_color, "offered (by arrival)"}, {admitted_color, "admitted (by admission time)"}});

  // Panel 2: tokens per second per bucket.
  const std::int64_t width = choose_bucket_width(end_ns, 120);
  const auto buckets = r.arrivals > 0 ? bucketize(r, width) : std::vector<bucket>{};
  const double scale = 1e9 / static_cast<double>(width);
  double peak = 0;
  for (const auto& b : buckets) peak = std::max(peak, static_cast<double>(std::max(b.offered, b.admitted)) * scale);
  const double configured = ctx.settings.limit.per_second();
  const bool show_rate = std::isfinite(configured) && configured > 0 && configured <= 2 * std::max(peak, 1.0);
  const double y2_max = std::max({1.0, peak, show_rate ? configured : 0.0}) * 1.1;
  axes(out, top2, height2, end_s, y2_max, "tokens/s per " + human_duration(width) + " bucket");
  const double bucket_px = static_cast<double>(width) / static_cast<double>(end_ns) * plot_w;
  out << "<g fill=\"" << offered_color << "\" opacity=\"0.5\">\n";
  for (const auto& b : buckets) {
    const double x = left + static_cast<double>(b.start_ns) / static_cast<double>(end_ns) * plot_w;
    if (x >= left + plot_w) break;
    const double w = std::min(bucket_px, left + plot_w - x);
    const double h = static_cast<double>(b.offered) * scale / y2_max * height2;
    out << "<rect x=\"" << svg_num(x) << "\" y=\"" << svg_num(top2 + height2 - h) << "\" width=\""
        << svg_num(std::max(w - 0.5, 0.5)) << "\" height=\"" << svg_num(h) << "\"/>\n";
  }
  out << "</g>\n";
  // Admitted rate as a step line.
  out << "<polyline fill=\"none\" stroke=\"" << admitted_color << "\" stroke-width=\"2\" points=\"";
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const auto& b = buckets[i];
    const double x0 = left + static_cast<double>(b.start_ns) / static_cast<double>(end_ns) * plot_w;
    if (x0 >= left + plot_w) break;
    const double x1 = std::min(x0 + bucket_px, left + plot_w);
    const double y = top2 + height2 - static_cast<double>(b.admitted) * scale / y2_max * height2;
    out << svg_num(x0) << "," << svg_num(y) << " " << svg_num(x1) << "," << svg_num(y) << " ";
  }
  out << "\"/>\n";
  if (show_rate) {
    const double y = top2 + height2 - configured / y2_max * height2;
    out << "<line x1=\"" << svg_num(left) << "\" x2=\"" << svg_num(left + plot_w) << "\" y1=\"" << svg_num(y)
        << "\" y2=\"" << svg_num(y) << "\" stroke=\"" << rate_color
        << "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n";
  }
  std::vector<svg_legend_item> legend{{offered_color, "offered", svg_mark::box}, {admitted_color, "admitted"}};
  if (show_rate) legend.push_back({rate_color, "configured rate", svg_mark::dashed});
  svg_legend_row(out, left, top2 - legend_gap, legend);
  out << "</svg>\n";
}

namespace {

// The in-flight or waiting step function as one value per column of [0, end]: the largest value it takes inside the
// column (to the timeline's bucket width), so that a short peak stays visible whatever the zoom.
std::vector<double> column_max(const concurrency_timeline& timeline, std::int64_t end, int columns,
                               std::int64_t concurrency_timeline::level::*field) {
  std::vector<double> out(static_cast<std::size_t>(columns));
  for (int i = 0; i < columns; ++i) {
    const auto from = static_cast<std::int64_t>(static_cast<double>(end) * i / columns);
    const auto to = static_cast<std::int64_t>(static_cast<double>(end) * (i + 1) / columns);
    out[static_cast<std::size_t>(i)] = static_cast<double>(timeline.peak(from, to).*field);
  }
  return out;
}

void step_line(std::ostream& out, const std::vector<double>& values, double top, double height, double y_max,
               const char* color) {
  out << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
  const double w = plot_w / static_cast<double>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double x0 = left + static_cast<double>(i) * w;
    const double y = top + height - values[i] / y_max * height;
    out << svg_num(x0) << "," << svg_num(y) << " " << svg_num(x0 + w) << "," << svg_num(y)
        << (i + 1 < values.size() ? " " : "");
  }
  out << "\"/>\n";
}

void dashed_level(std::ostream& out, double level, double top, double height, double y_max, const char* color) {
  const double y = top + height - level / y_max * height;
  out << "<line x1=\"" << svg_num(left) << "\" x2=\"" << svg_num(left + plot_w) << "\" y1=\"" << svg_num(y)
      << "\" y2=\"" << svg_num(y) << "\" stroke=\"" << color << "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n";
}

// One tick per pixel column holding at least one request with outcome `o` (queue-full or timeout) by arrival time,
// at the top of the queue panel.
void outcome_ticks(std::ostream& out, const concurrency_result& r, request_outcome o, std::int64_t end, double y,
                   const char* color) {
  const int columns = static_cast<int>(plot_w);
  out << "<g stroke=\"" << color << "\" stroke-width=\"1\">\n";
  for (int c = 0; c < columns; ++c) {
    const auto from = static_cast<std::int64_t>(static_cast<double>(end) * c / columns);
    const auto to = c + 1 == columns ? std::numeric_limits<std::int64_t>::max()
                                     : static_cast<std::int64_t>(static_cast<double>(end) * (c + 1) / columns);
    const bool marked =
        o == request_outcome::queue_full ? r.timeline.queue_full_in(from, to) : r.timeline.timeout_in(from, to);
    if (!marked) continue;
    const double x = left + c + 0.5;
    out << "<line x1=\"" << svg_num(x) << "\" x2=\"" << svg_num(x) << "\" y1=\"" << svg_num(y) << "\" y2=\""
        << svg_num(y + 8) << "\"/>\n";
  }
  out << "</g>\n";
}

constexpr const char* in_flight_color = "#1b7f3b";
constexpr const char* waiting_color = "#2c6fbb";
constexpr const char* rejected_color = "#c0392b";
constexpr const char* timeout_color = "#e67e22";
constexpr const char* bound_color = "#555555";  // limit and max-waiters, dashed

}  // namespace

void write_concurrency_svg(std::ostream& out, const concurrency_settings& s, const std::string& source,
                           const concurrency_result& r) {
  const std::int64_t end_ns = std::max<std::int64_t>(r.end_ns, 1'000'000);
  const double end_s = static_cast<double>(end_ns) / 1e9;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg_num(svg_width) << "\" height=\""
      << svg_num(svg_height) << "\" viewBox=\"0 0 " << svg_num(svg_width) << " " << svg_num(svg_height)
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << svg_num(left)
      << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\" fill=\"#222\">admit replay: " << xml_escape(s.describe())
      << "</text>\n";
  std::string sub = source + ": " + plural(r.requests, "request", "requests") + "; admitted " +
                    std::to_string(r.admitted) + " (" + std::to_string(r.admitted_after_wait) +
                    " after waiting, p99 wait " + human_duration(r.wait.p99) + "), queue full " +
                    std::to_string(r.queue_full) + ", timed out " + std::to_string(r.timed_out);
  if (r.exceeds_capacity > 0) sub += ", exceeds capacity " + std::to_string(r.exceeds_capacity);
  svg_subtitle(out, left, plot_w, sub);

  const int columns = static_cast<int>(plot_w);
  // Panel 1: permits in flight against the limit.
  const auto in_flight = column_max(r.timeline, end_ns, columns, &concurrency_timeline::level::in_flight);
  const double y1_max = static_cast<double>(std::max<std::int64_t>({1, s.limit, r.peak_in_flight})) * 1.15;
  axes(out, top1, height1, end_s, y1_max, "permits in flight");
  dashed_level(out, static_cast<double>(s.limit), top1, height1, y1_max, bound_color);
  step_line(out, in_flight, top1, height1, y1_max, in_flight_color);
  svg_legend_row(out, left, top1 - legend_gap,
                 {{in_flight_color, "in flight (peak per pixel)"}, {bound_color, "limit", svg_mark::dashed}});

  // Panel 2: requests waiting against max-waiters, with rejections and timeouts marked.
  const auto waiting = column_max(r.timeline, end_ns, columns, &concurrency_timeline::level::waiting);
  const bool show_bound = s.max_waiters && *s.max_waiters <= 2 * std::max<std::int64_t>(r.peak_waiting, 1);
  const double y2_max =
      static_cast<double>(std::max<std::int64_t>({1, r.peak_waiting, show_bound ? *s.max_waiters : 0})) * 1.25;
  axes(out, top2, height2, end_s, y2_max, "requests waiting");
  if (show_bound) dashed_level(out, static_cast<double>(*s.max_waiters), top2, height2, y2_max, bound_color);
  step_line(out, waiting, top2, height2, y2_max, waiting_color);
  outcome_ticks(out, r, request_outcome::queue_full, end_ns, top2 + 2, rejected_color);
  outcome_ticks(out, r, request_outcome::timeout, end_ns, top2 + 12, timeout_color);
  std::vector<svg_legend_item> legend{{waiting_color, "waiting (peak per pixel)"},
                                      {rejected_color, "queue full (top row of ticks)"},
                                      {timeout_color, "timed out (second row)"}};
  if (show_bound) legend.push_back({bound_color, "max-waiters", svg_mark::dashed});
  svg_legend_row(out, left, top2 - legend_gap, legend);
  out << "</svg>\n";
}

}  // namespace admit::cli
