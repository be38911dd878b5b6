#include "cli/replay/trace_input.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <ostream>

#include "cli/common/message.hpp"
#include "cli/common/text.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

std::string read_trace_input(const trace_input& input, std::istream& in, std::ostream& err,
                             const std::function<void(std::istream&)>& parse) {
  try {
    if (input.name == "-") {
      if (input.stdin_is_terminal) {
        err << input.command << ": reading the trace from standard input (end with Ctrl-D; --help for the options)\n";
        err.flush();
      }
      parse(in);
      return {};
    }
    std::error_code ec;
    if (std::filesystem::is_directory(input.name, ec)) {
      return "cannot read trace " + quote(input.name) + ": it is a directory";
    }
    std::ifstream file(input.name);
    if (!file) return "cannot read trace " + quote(input.name) + ": " + std::strerror(errno);
    parse(file);
  } catch (const trace_error& e) {
    return input.source() + ": " + e.what();
  }
  return {};
}

std::string empty_trace_message(const std::string& source, std::string_view shape) {
  return source + ": the trace is empty: no " + std::string(shape) +
         " line (blank lines and '#' comments do not count)";
}

std::string empty_log_message(const std::string& source, const log_request& reading, std::int64_t skipped) {
  std::string message = source + ": the " + std::string(to_string(reading.format)) + " log has no record";
  if (skipped > 0) message += " that parses (" + std::to_string(skipped) + " skipped by --skip-bad-lines)";
  return message;
}

std::string check_plot_name(const std::optional<std::string>& plot) {
  if (!plot) return {};
  const std::string& name = *plot;
  std::error_code ec;
  if (std::filesystem::is_directory(name, ec)) {
    return "cannot write --plot " + quote(name) + ": it is a directory; give a file name ending in .svg";
  }
  const std::string ext = ascii_lower(name.size() >= 4 ? std::string_view(name).substr(name.size() - 4) : "");
  if (ext == ".svg") return {};
  return "cannot write --plot " + quote(name) + ": only SVG is written; use a file name ending in .svg";
}

std::string plot_probe::check() {
  if (!name_) return {};
  std::error_code ec;
  created_ = !std::filesystem::exists(*name_, ec);
  const std::ofstream probe(*name_, std::ios::app);
  if (!probe) return "cannot write --plot " + quote(*name_) + ": " + std::strerror(errno);
  return {};
}

void plot_probe::forget() {
  std::error_code ec;
  if (created_) std::filesystem::remove(*name_, ec);
}

std::string write_plot_file(const std::string& name, const std::function<void(std::ostream&)>& draw) {
  std::ofstream svg(name);
  if (!svg) return "cannot write --plot " + quote(name) + ": " + std::strerror(errno);
  draw(svg);
  svg.flush();
  if (!svg) return "cannot write --plot " + quote(name) + ": write error";
  return {};
}

}  // namespace admit::cli
