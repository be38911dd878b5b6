// tests/cli/common/local_limit_testing.hpp — what the tests of the host-local limit of `admit run`
// (src/cli/common/local_limit.hpp) share: a fixture with a temporary directory whose path has a space in it, a
// configuration of the limit "db" in it, its entry files and waiters counted, a bounded poll for what another thread or
// process does, and a child process that exits with a function's result. A test never forks while it runs threads of
// its own.
#pragma once

#include "cli/common/local_limit.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admit/errc.hpp"

namespace admit::cli::local_limit_testing {

using namespace admit::cli::run;
using namespace std::chrono_literals;
using std::chrono::steady_clock;
namespace fs = std::filesystem;

class LocalLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "admit local limit XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ / "limits dir";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  local_limit_config config(std::int64_t capacity, std::int64_t weight = 1) const {
    local_limit_config c;
    c.directory = dir_;
    c.name = "db";
    c.capacity = capacity;
    c.weight = weight;
    c.info = {"host-a", ::getpid(), "run something", 0};
    return c;
  }
  fs::path name_dir() const { return dir_ / "db"; }
  // The entry files of "db" whose names start with `prefix` ("w." or "h.").
  std::size_t files(const std::string& prefix) const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(name_dir())) n += e.path().filename().string().starts_with(prefix);
    return n;
  }
  std::size_t waiters() const { return inspect_local(dir_, "db").snapshot.waiters.size(); }
  // Polls `pred` (what another thread or process does cannot be observed otherwise) for at most 10 s.
  template <class Pred>
  static bool eventually(Pred pred) {
    for (auto end = steady_clock::now() + 10s; steady_clock::now() < end; std::this_thread::sleep_for(1ms)) {
      if (pred()) return true;
    }
    return pred();
  }

  fs::path root_, dir_;
};

inline auto in(std::chrono::nanoseconds d) { return std::optional(steady_clock::now() + d); }

// What a waiter's progress callback (callback()) was told, read from another thread: last() is the latest report.
class progress_log {
 public:
  std::function<void(const wait_progress&)> callback() {
    return [this](const wait_progress& w) {
      const std::lock_guard g(m_);
      reports_.push_back(w);
    };
  }
  wait_progress last() const {
    const std::lock_guard g(m_);
    return reports_.empty() ? wait_progress{} : reports_.back();
  }

 private:
  mutable std::mutex m_;
  std::vector<wait_progress> reports_;
};

// Runs `body` in a child process, which exits with its result.
template <class F>
pid_t fork_child(F body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

inline int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace admit::cli::local_limit_testing
