#include "serve_program.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <system_error>

#include "cli/common/message.hpp"

namespace admit::cli {

int run_serve_program(char** argv, std::ostream& err) {
  std::error_code ec;
  // The program's own file, symbolic links resolved: an `admit` linked into another directory finds its admit-serve.
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    err << "admit serve: cannot find admit-serve: this program's own path (/proc/self/exe) cannot be read: "
        << ec.message() << "\n";
    return exit_unavailable;
  }
  const std::filesystem::path dir = self.parent_path();
  const std::filesystem::path places[] = {dir / "admit-serve",
                                          (dir / ADMIT_SERVE_PROGRAM_FROM_BINDIR / "admit-serve").lexically_normal()};
  for (const auto& place : places) {
    if (::access(place.c_str(), X_OK) != 0) continue;
    ::execv(place.c_str(), argv);
    err << "admit serve: cannot run " << quote(place.string()) << ": " << std::strerror(errno) << "\n";
    return exit_failure;
  }
  err << "admit serve: admit-serve, the service's program, is not installed: neither " << quote(places[0].string())
      << " nor " << quote(places[1].string()) << " can be run\n";
  return exit_unavailable;
}

}  // namespace admit::cli
