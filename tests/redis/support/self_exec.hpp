// tests/redis/support/self_exec.hpp — runs this test binary again as a separate process in a given role: the child
// runs only the test named by `filter` (a TEST that skips unless role_arguments() is non-empty), with the role's
// arguments after --sem-child. Through child_process (posix_spawn, no shell: the binary's path may be long and hold
// spaces).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "child_process.hpp"

namespace admit::redis::testing {

// This test binary's path.
inline std::string self_path() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  path.resize(static_cast<std::size_t>(n));
  return path;
}

// The arguments after --sem-child when this process is a child run by spawn_role; empty otherwise.
inline std::vector<std::string> role_arguments() {
  const auto argv = ::testing::internal::GetArgvs();
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--sem-child") return {argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end()};
  }
  return {};
}

// The argument vector that runs this binary with only the test `filter` ("Suite.Name") and `role` after
// --sem-child (for child_process's constructor).
inline std::vector<std::string> role_argv(const std::string& filter, const std::vector<std::string>& role) {
  std::vector<std::string> argv{self_path(), "--gtest_filter=" + filter, "--sem-child"};
  argv.insert(argv.end(), role.begin(), role.end());
  return argv;
}

inline child_process spawn_role(const std::string& filter, const std::vector<std::string>& role) {
  return child_process(role_argv(filter, role));
}

// The TEST `suite`.Role that spawn_role("<suite>.Role", role) runs: it calls run(role) in the child (which ends the
// process) and skips when the test binary runs as itself.
#define ADMIT_CHILD_ROLE_TEST(suite, run)                                                  \
  TEST(suite, Role) {                                                                      \
    const auto role_args = admit::redis::testing::role_arguments();                        \
    if (role_args.empty()) GTEST_SKIP() << "run by the other tests as a separate process"; \
    run(role_args);                                                                        \
  }

}  // namespace admit::redis::testing
