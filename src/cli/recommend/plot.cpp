// The charts of `admit recommend --plot` (cli/recommend/report.hpp): one panel per trade-off curve, each a line
// through the replayed candidates, the target dashed, the recommendation marked.
#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/common/duration.hpp"
#include "cli/common/text.hpp"
#include "cli/recommend/report.hpp"
#include "cli/replay/svg.hpp"

namespace admit::cli {

namespace {

constexpr double svg_width = 960;
constexpr double left = 90, right = 30;
constexpr double plot_w = svg_width - left - right;
constexpr double first_top = 96, panel_height = 300, panel_gap = 110;
constexpr const char* curve_color = "#2c6fbb";
constexpr const char* target_color = "#c0392b";
constexpr const char* best_color = "#1b7f3b";

struct panel {
  std::string x_title, y_title;
  std::vector<std::pair<double, double>> points;  // (limit, measure), by limit
  std::optional<double> target;                   // the measure's bound
  std::optional<std::pair<double, double>> best;
  std::string best_label, target_label, curve_label;
};

void draw(std::ostream& out, double top, const panel& p) {
  if (p.points.empty()) return;
  double x_min = p.points.front().first, x_max = p.points.back().first;
  double y_max = 0;
  for (const auto& [x, y] : p.points) y_max = std::max(y_max, y);
  if (p.target) y_max = std::max(y_max, *p.target);
  y_max = y_max > 0 ? y_max * 1.08 : 1;
  // A log scale when the limits span more than a factor of 20 (and none is zero).
  const bool log_x = x_min > 0 && x_max / x_min > 20;
  if (!(x_max > x_min)) {
    x_min = x_min > 0 ? x_min * 0.5 : 0;
    x_max = x_max > 0 ? x_max * 1.5 : 1;
  }
  const auto sx = [&](double x) {
    const double f = log_x ? std::log(x / x_min) / std::log(x_max / x_min) : (x - x_min) / (x_max - x_min);
    return left + f * plot_w;
  };
  const auto sy = [&](double y) { return top + panel_height - y / y_max * panel_height; };

  out << "<g font-size=\"12\" fill=\"#333\">\n";
  out << "<rect x=\"" << svg_num(left) << "\" y=\"" << svg_num(top) << "\" width=\"" << svg_num(plot_w)
      << "\" height=\"" << svg_num(panel_height) << "\" fill=\"none\" stroke=\"#999\"/>\n";
  const double ystep = tick_step(y_max, 5);
  for (double v = 0; v <= y_max * (1 + 1e-9); v += ystep) {
    out << "<line x1=\"" << svg_num(left) << "\" x2=\"" << svg_num(left + plot_w) << "\" y1=\"" << svg_num(sy(v))
        << "\" y2=\"" << svg_num(sy(v)) << "\" stroke=\"#e5e5e5\"/><text x=\"" << svg_num(left - 6) << "\" y=\""
        << svg_num(sy(v) + 4) << "\" text-anchor=\"end\">" << tick_label(v) << "</text>\n";
  }
  std::vector<double> ticks;
  if (log_x) {
    for (double d = std::pow(10.0, std::floor(std::log10(x_min))); d <= x_max * 1.0001; d *= 10) {
      for (const double m : {1.0, 2.0, 5.0}) {
        if (m * d >= x_min * 0.9999 && m * d <= x_max * 1.0001) ticks.push_back(m * d);
      }
    }
  } else {
    const double step = tick_step(x_max - x_min, 10);
    for (double v = std::ceil(x_min / step) * step; v <= x_max * (1 + 1e-9); v += step) ticks.push_back(v);
  }
  for (const double v : ticks) {
    out << "<line x1=\"" << svg_num(sx(v)) << "\" x2=\"" << svg_num(sx(v)) << "\" y1=\"" << svg_num(top + panel_height)
        << "\" y2=\"" << svg_num(top + panel_height + 4) << "\" stroke=\"#999\"/><text x=\"" << svg_num(sx(v))
        << "\" y=\"" << svg_num(top + panel_height + 17) << "\" text-anchor=\"middle\">" << tick_label(v)
        << "</text>\n";
  }
  out << "<text x=\"" << svg_num(left + plot_w / 2) << "\" y=\"" << svg_num(top + panel_height + 34)
      << "\" text-anchor=\"middle\">" << xml_escape(p.x_title + (log_x ? " (log scale)" : "")) << "</text>\n";
  out << "<text transform=\"translate(" << svg_num(left - 62) << "," << svg_num(top + panel_height / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(p.y_title) << "</text>\n</g>\n";

  if (p.target) {
    out << "<line x1=\"" << svg_num(left) << "\" x2=\"" << svg_num(left + plot_w) << "\" y1=\""
        << svg_num(sy(*p.target)) << "\" y2=\"" << svg_num(sy(*p.target)) << "\" stroke=\"" << target_color
        << "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n";
  }
  out << "<polyline fill=\"none\" stroke=\"" << curve_color << "\" stroke-width=\"2\" points=\"";
  for (std::size_t i = 0; i < p.points.size(); ++i) {
    out << (i == 0 ? "" : " ") << svg_num(sx(p.points[i].first)) << "," << svg_num(sy(p.points[i].second));
  }
  out << "\"/>\n";
  for (const auto& [x, y] : p.points) {
    out << "<circle cx=\"" << svg_num(sx(x)) << "\" cy=\"" << svg_num(sy(y)) << "\" r=\"2.5\" fill=\"" << curve_color
        << "\"/>\n";
  }
  if (p.best) {
    const double bx = sx(p.best->first), by = sy(p.best->second);
    out << "<line x1=\"" << svg_num(bx) << "\" x2=\"" << svg_num(bx) << "\" y1=\"" << svg_num(top) << "\" y2=\""
        << svg_num(top + panel_height) << "\" stroke=\"" << best_color << "\" stroke-dasharray=\"3,3\"/>\n";
    out << "<circle cx=\"" << svg_num(bx) << "\" cy=\"" << svg_num(by) << "\" r=\"6\" fill=\"" << best_color
        << "\"/>\n";
  }
  std::vector<svg_legend_item> legend{{curve_color, p.curve_label}};
  if (p.target) legend.push_back({target_color, p.target_label, svg_mark::dashed});
  if (p.best) legend.push_back({best_color, p.best_label, svg_mark::dot});
  svg_legend_row(out, left, top - 9, legend);
}

void document(std::ostream& out, const std::string& title, const std::string& subtitle,
              const std::vector<panel>& panels) {
  const double height = first_top + static_cast<double>(panels.size()) * (panel_height + panel_gap) - 40;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg_num(svg_width) << "\" height=\"" << svg_num(height)
      << "\" viewBox=\"0 0 " << svg_num(svg_width) << " " << svg_num(height)
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << svg_num(left) << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\" fill=\"#222\">"
      << xml_escape(title) << "</text>\n";
  svg_subtitle(out, left, plot_w, subtitle);
  double top = first_top;
  for (const panel& p : panels) {
    draw(out, top, p);
    top += panel_height + panel_gap;
  }
  out << "</svg>\n";
}

}  // namespace

void write_rate_recommendation_svg(std::ostream& out, const recommend_context& ctx, const rate_question& q,
                                   const rate_recommendation& r) {
  const bool reserve = q.mode == replay_mode::reserve;
  const bool window = is_window(q.algo);
  panel curve;
  curve.x_title = window ? "limit (requests per second)" : "rate (tokens per second)";
  if (q.per_key) curve.x_title += ", per key";
  curve.y_title = reserve ? "p99 delay (s)" : "rejected (% of requests)";
  curve.curve_label = reserve ? "p99 delay of each rate replayed" : "rejected share of each rate replayed";
  const auto measure = [&](const rate_point& p) {
    return reserve ? static_cast<double>(p.delay_p99_ns) / 1e9 : p.rejected_fraction() * 100;
  };
  for (const rate_point& p : r.curve) curve.points.emplace_back(p.rate_per_second, measure(p));
  curve.target = reserve ? static_cast<double>(*q.max_delay_p99_ns) / 1e9 : q.max_rejected.fraction() * 100;
  curve.target_label = reserve ? "target: " + human_duration(*q.max_delay_p99_ns) : "target: " + q.max_rejected.text();
  std::string title = "admit recommend: " + std::string(to_string(q.algo));
  if (r.best) {
    curve.best = std::pair{r.best->rate_per_second, measure(*r.best)};
    curve.best_label = "recommended: " + r.best->rate + (window ? "" : ", burst " + std::to_string(r.best->burst));
    title +=
        " --rate " + r.best->rate + (window ? " --window " + q.window : " --burst " + std::to_string(r.best->burst));
  }
  std::vector<panel> panels{curve};
  if (!r.frontier.empty()) {
    panel frontier;
    frontier.x_title = "burst (tokens)";
    frontier.y_title = "least rate (tokens/s)";
    frontier.curve_label = "least rate that meets the target, for each burst";
    for (const rate_point& p : r.frontier)
      frontier.points.emplace_back(static_cast<double>(p.burst), p.rate_per_second);
    if (r.best) {
      frontier.best = std::pair{static_cast<double>(r.best->burst), r.best->rate_per_second};
      frontier.best_label = "recommended";
    }
    panels.push_back(frontier);
  }
  std::string sub = ctx.source + ": " +
                    (r.best ? "the least rate with " + percent(r.best->rejected_fraction()) + " rejected" +
                                  (reserve ? ", p99 delay " + human_duration(r.best->delay_p99_ns) : "")
                            : std::string("no rate meets the target")) +
                    "; " + plural(r.replays, "replay", "replays") + " of the trace";
  document(out, title, sub, panels);
}

void write_concurrency_recommendation_svg(std::ostream& out, const recommend_context& ctx,
                                          const concurrency_question& q, const concurrency_recommendation& r) {
  std::vector<panel> panels;
  const auto add = [&](bool waits) {
    panel p;
    p.x_title = "concurrency limit (permits)";
    p.y_title = waits ? "p99 wait (s)" : "turned away (% of requests)";
    p.curve_label = waits ? "p99 wait of each limit replayed" : "share turned away of each limit replayed";
    const auto measure = [&](const concurrency_point& c) {
      return waits ? static_cast<double>(c.wait_p99_ns) / 1e9 : c.turned_away_fraction() * 100;
    };
    for (const concurrency_point& c : r.curve) p.points.emplace_back(static_cast<double>(c.limit), measure(c));
    p.target = waits ? static_cast<double>(*q.max_wait_p99_ns) / 1e9 : q.max_turned_away.fraction() * 100;
    p.target_label = "target: " + (waits ? human_duration(*q.max_wait_p99_ns) : q.max_turned_away.text());
    if (r.best) {
      p.best = std::pair{static_cast<double>(r.best->limit), measure(*r.best)};
      p.best_label = "recommended: " + std::to_string(r.best->limit);
    }
    panels.push_back(p);
  };
  if (q.max_wait_p99_ns) add(true);
  if (q.max_waiters || q.timeout_ns) add(false);
  const std::string title =
      "admit recommend: concurrency" + (r.best ? " --limit " + std::to_string(r.best->limit) : std::string());
  document(out, title, ctx.source + ": " + plural(r.replays, "replay", "replays") + " of the trace", panels);
}

}  // namespace admit::cli
