#include "help_formatter.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <memory>
#include <string>

namespace admit::cli {

std::size_t help_width() {
  if (isatty(STDOUT_FILENO) != 1) return 80;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 80;
  return ws.ws_col;
}

void set_up_admit_app(CLI::App& app) {
  app.formatter(std::make_shared<wrapping_formatter>(help_width()));
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("admit ") + ADMIT_VERSION, "print the version and exit");
}

}  // namespace admit::cli
