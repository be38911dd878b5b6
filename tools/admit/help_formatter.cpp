#include "help_formatter.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

namespace admit::cli {

std::size_t help_width() {
  if (isatty(STDOUT_FILENO) != 1) return 80;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 80;
  return ws.ws_col;
}

}  // namespace admit::cli
