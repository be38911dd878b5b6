// cli/replay/svg.hpp — the pieces the charts of `admit replay` and `admit recommend` are drawn with, written by hand
// as SVG (no library): numbers, axis ticks, escaped text, a legend row, a wrapped subtitle.
//
//   out << "<line x1=\"" << svg_num(x) << "\" .../>";
//   svg_legend_row(out, 80, 87, {{"#1b7f3b", "admitted"}, {"#d35400", "target", svg_mark::dashed}});
//
// Thread safety: pure functions (writing to the stream given).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace admit::cli {

// A generous average width of a 12 px character, for layout.
inline constexpr double svg_char_px = 6.8;

// A coordinate, one decimal: "12.5".
[[nodiscard]] std::string svg_num(double v);

// A round tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over [0, max].
[[nodiscard]] double tick_step(double max, int target);
// A tick's label: "%.10g", or three significant digits in exponent form for very large or small values.
[[nodiscard]] std::string tick_label(double v);

// `text` with &, <, > and " escaped for XML (control characters, which XML 1.0 does not allow, become '?').
[[nodiscard]] std::string xml_escape(std::string_view text);

enum class svg_mark { line, dashed, box, dot };
struct svg_legend_item {
  const char* color;
  std::string label;
  svg_mark style = svg_mark::line;
};

// A legend: one row of entries side by side, starting at x, on the baseline y (12 px text).
void svg_legend_row(std::ostream& out, double x, double y, const std::vector<svg_legend_item>& items);

// The subtitle under a chart's title (baseline 48), wrapped to `width` px: at most two lines, the rest cut with "...".
void svg_subtitle(std::ostream& out, double x, double width, const std::string& text);

}  // namespace admit::cli
