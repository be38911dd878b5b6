#include "cli/replay/svg.hpp"

#include <cmath>
#include <cstdio>
#include <ostream>

#include "cli/common/message.hpp"

namespace admit::cli {

std::string svg_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double tick_step(double max, int target) {
  if (!(max > 0)) return 1;
  const double raw = max / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string tick_label(double v) {
  char buf[32];
  if (v != 0 && (std::abs(v) >= 1e6 || std::abs(v) < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.10g", v);
  }
  return buf;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // Control characters are not allowed in XML 1.0; show them as '?'.
        out.push_back(static_cast<unsigned char>(c) < 0x20 && c != '\t' ? '?' : c);
    }
  }
  return out;
}

void svg_legend_row(std::ostream& out, double x, double y, const std::vector<svg_legend_item>& items) {
  for (const auto& item : items) {
    if (item.style == svg_mark::box) {
      out << "<rect x=\"" << svg_num(x) << "\" y=\"" << svg_num(y - 9) << "\" width=\"18\" height=\"10\" fill=\""
          << item.color << "\" opacity=\"0.5\"/>";
    } else if (item.style == svg_mark::dot) {
      out << "<circle cx=\"" << svg_num(x + 9) << "\" cy=\"" << svg_num(y - 4) << "\" r=\"5\" fill=\"" << item.color
          << "\"/>";
    } else {
      out << "<line x1=\"" << svg_num(x) << "\" x2=\"" << svg_num(x + 18) << "\" y1=\"" << svg_num(y - 4) << "\" y2=\""
          << svg_num(y - 4) << "\" stroke=\"" << item.color << "\" stroke-width=\"2.5\""
          << (item.style == svg_mark::dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>";
    }
    out << "<text x=\"" << svg_num(x + 24) << "\" y=\"" << svg_num(y) << "\" font-size=\"12\" fill=\"#333\">"
        << xml_escape(item.label) << "</text>\n";
    x += 24 + static_cast<double>(item.label.size()) * svg_char_px + 18;
  }
}

void svg_subtitle(std::ostream& out, double x, double width, const std::string& text) {
  const auto columns = static_cast<std::size_t>(width / svg_char_px);
  const std::string wrapped = wrap_text(text, columns, 0, 0);
  std::vector<std::string> lines;
  for (std::size_t start = 0;;) {
    const auto nl = wrapped.find('\n', start);
    lines.push_back(wrapped.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (lines.size() > 2) {
    std::string& second = lines[1];
    if (second.size() + 3 > columns) second.resize(columns > 3 ? columns - 3 : 0);
    second += "...";
    lines.resize(2);
  }
  out << "<text x=\"" << svg_num(x) << "\" y=\"48\" font-size=\"12\" fill=\"#555\">";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out << "<tspan x=\"" << svg_num(x) << "\" dy=\"" << (i == 0 ? "0" : "16") << "\">" << xml_escape(lines[i])
        << "</tspan>";
  }
  out << "</text>\n";
}

}  // namespace admit::cli
