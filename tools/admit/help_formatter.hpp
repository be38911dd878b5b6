// help_formatter.hpp — CLI11's help, wrapped to the terminal: `admit replay --help` in an 80-column terminal (or in a
// pipe, where the width is 80) has no line longer than 80 columns.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "cli/common/message.hpp"

namespace admit::cli {

// The width help is wrapped to: the terminal's when standard output is one, else 80.
[[nodiscard]] std::size_t help_width();

// What both of admit's programs (admit, and admit-serve: see serve_program.hpp) give their App: the description, help
// wrapped to help_width(), one command required, --version.
inline constexpr const char* admit_description =
    "admit: admission control for C++ (rate limiters and concurrency limiters), from the command line.";
void set_up_admit_app(CLI::App& app);

class wrapping_formatter : public CLI::Formatter {
 public:
  explicit wrapping_formatter(std::size_t width) : width_(width < 40 ? 40 : width) { column_width(26); }

  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    return entry(make_option_name(opt, is_positional) + make_option_opts(opt), make_option_desc(opt));
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    return entry(sub->get_display_name(true), sub->get_description());
  }
  std::string make_description(const CLI::App* app) const override {
    const std::string text = CLI::Formatter::make_description(app);
    return text.empty() ? text : wrap_text(text, width_, 0, 0) + "\n";
  }

 private:
  // "  --name TYPE    description wrapped in the right column"
  std::string entry(const std::string& name, const std::string& description) const {
    const std::size_t column = get_column_width();
    std::string out = "  " + name;
    std::size_t at = out.size();
    if (at + 1 >= column) {
      out += "\n";
      at = 0;
    }
    out.append(column - at, ' ');
    out += wrap_text(description, width_, column, column);
    return out + "\n";
  }

  std::size_t width_;
};

}  // namespace admit::cli
