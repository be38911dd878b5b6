// tests/redis/support/admit_run_local_testing.hpp — the fixture of the end-to-end tests of `admit run` and `admit
// inspect` without Redis: a fresh --lock-dir in a temporary directory whose path holds a space, and the commands they
// run. Only in a test program that knows where the admit binary is (ADMIT_CLI).
#pragma once

#ifdef ADMIT_CLI

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "admit_run_testing.hpp"
#include "child_process.hpp"

namespace admit::redis::testing::run {

// flock(LOCK_EX) on `path` for its lifetime, as a run holds the limit's lock in its critical section.
class lock_holder {
 public:
  explicit lock_holder(const std::filesystem::path& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    EXPECT_GE(fd_, 0) << path;
    EXPECT_EQ(::flock(fd_, LOCK_EX), 0) << path;
  }
  ~lock_holder() { ::close(fd_); }
  lock_holder(const lock_holder&) = delete;
  lock_holder& operator=(const lock_holder&) = delete;

 private:
  int fd_;
};

class run_local_fixture : public ::testing::Test {
 protected:
  // `admit run --lock-dir <locks> --name NAME <more...>`
  args run(const std::string& name, const args& more) const {
    return args{ADMIT_CLI, "run", "--lock-dir", locks_, "--name", name} + more;
  }
  static run_result admit(const args& a, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    return run_to_end(a, limit);
  }
  // A holder of the only permit of `name` (its command sleeps until the test ends), started.
  std::unique_ptr<child_process> hold(const std::string& name) {
    auto c = std::make_unique<child_process>(run(name, {"--concurrency", "1", "--json", "--", "sleep", "60"}));
    EXPECT_TRUE(wait_for_event(*c, {"started"})) << c->err();
    return c;
  }
  // `sh -c SCRIPT sh <dir>/ran`: the command records that it ran in that file.
  args records_ran(const std::string& script = "echo ran >> \"$1\"") const { return {"sh", "-c", script, "sh", ran_}; }
  bool ran() const { return std::filesystem::exists(ran_); }

  temp_dir dir_;
  std::string locks_ = dir_ / "locks";
  std::string ran_ = dir_ / "ran";
};

}  // namespace admit::redis::testing::run

#endif
