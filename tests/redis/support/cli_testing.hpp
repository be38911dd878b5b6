// tests/redis/support/cli_testing.hpp — what the tests of `admit decide` and `admit inspect` share: running the built
// tool (ADMIT_CLI, its path, defined by CMake for these tests when the tool is built) without a shell, and a fixture
// that skips the tests when it is not built.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "child_process.hpp"

namespace admit::redis::testing::cli {

using args = std::vector<std::string>;

#ifdef ADMIT_CLI
// Runs `admit <args...>` (no shell: arguments go to the program as they are).
inline run_result admit_cli(args a) {
  a.insert(a.begin(), ADMIT_CLI);
  return run_program(std::move(a));
}
#endif

class cli_test : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef ADMIT_CLI
    GTEST_SKIP() << "the admit command line tool is not built (ADMIT_BUILD_TOOLS=OFF)";
#endif
  }
};

}  // namespace admit::redis::testing::cli
