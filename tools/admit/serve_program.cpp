#include "serve_program.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "cli/common/message.hpp"

namespace admit::cli {

int run_serve_program(char** argv, std::ostream& err) {
  std::vector<std::filesystem::path> places;
  std::error_code ec;
  // The program's own file, symbolic links resolved: an `admit` linked into another directory finds its admit-serve.
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path dir = self.parent_path();
    places.push_back(dir / "admit-serve");
    places.push_back((dir / ADMIT_SERVE_PROGRAM_FROM_BINDIR / "admit-serve").lexically_normal());
  }
  places.emplace_back(ADMIT_SERVE_PROGRAM_INSTALLED);
  for (const auto& place : places) {
    std::error_code type_ec;
    if (!std::filesystem::is_regular_file(place, type_ec) || ::access(place.c_str(), X_OK) != 0) continue;
    ::execv(place.c_str(), argv);
    const int exec_errno = errno;  // (before anything else can change it)
    err << "admit serve: cannot run " << quote(place.string()) << ": " << std::strerror(exec_errno) << "\n";
    return exit_failure;
  }
  std::string looked;
  for (const auto& place : places) looked += (looked.empty() ? "" : ", ") + quote(place.string());
  err << "admit serve: admit-serve, the service's program, is not installed: none of " << looked << " can be run\n";
  return exit_unavailable;
}

}  // namespace admit::cli
