// cli/replay/trace_input.hpp — where `admit replay` and `admit recommend` read their trace from and write their chart
// to: the trace file or standard input (with the messages for a directory, a missing file, an empty trace), and the
// --plot file, checked before the long work and written after it.
//
//   trace_input input{.name = "trace.txt", .command = "admit replay"};
//   std::string error = read_trace_input(input, std::cin, std::cerr, [&](std::istream& s) { parse(s); });
//
// Thread safety: none (one command per thread).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "cli/replay/access_log.hpp"

namespace admit::cli {

struct trace_input {
  std::string name = "-";          // file name, or "-" for standard input
  bool stdin_is_terminal = false;  // reading "-" from a terminal: say so on `err` (nothing else would)
  std::string_view command;        // "admit replay": the prefix of that notice

  // How messages name the source: the file name, or "stdin".
  [[nodiscard]] std::string source() const { return name == "-" ? "stdin" : name; }
};

// Opens the trace (`in` for "-") and hands the stream to `parse`. Returns an error message, empty on success: the
// file is a directory or cannot be opened, or `parse` threw trace_error (the message then starts with the source).
std::string read_trace_input(const trace_input& input, std::istream& in, std::ostream& err,
                             const std::function<void(std::istream&)>& parse);

// The message for a trace without a single record: `shape` is the line the format expects ("`<seconds since start>
// [n]`"); for an access log, how many lines --skip-bad-lines left out.
[[nodiscard]] std::string empty_trace_message(const std::string& source, std::string_view shape);
[[nodiscard]] std::string empty_log_message(const std::string& source, const log_request& reading,
                                            std::int64_t skipped);

// The --plot file must be an SVG, the only format written (a "chart.png" would be an SVG under the wrong name), and
// not a directory. Returns an error message, empty when `plot` is fine or absent.
[[nodiscard]] std::string check_plot_name(const std::optional<std::string>& plot);

// The plot file is checked before the (long) work, without truncating it, and written after it; one that the check
// created is removed again if the work fails.
class plot_probe {
 public:
  explicit plot_probe(std::optional<std::string> name) : name_(std::move(name)) {}
  // An error message, or empty when the file can be written (or no --plot was given).
  std::string check();
  // The work failed: remove the file if the check created it.
  void forget();

 private:
  std::optional<std::string> name_;
  bool created_ = false;
};

// Writes the chart to `name` with `draw`. Returns an error message, empty on success.
std::string write_plot_file(const std::string& name, const std::function<void(std::ostream&)>& draw);

}  // namespace admit::cli
