// tests/redis/child_process.hpp — runs a program from an argument vector (posix_spawn: no shell, so no path or
// argument is ever split or interpreted, whatever spaces or quotes it holds), standard input /dev/null, capturing
// its standard output, standard error and exit status. A test can also watch its standard error while it runs
// (wait_for_stderr) to act at a known point of the child's progress instead of after a guessed sleep.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

extern char** environ;

namespace admit::redis::testing {

class child_process {
 public:
  // Starts argv[0] (a path; not searched on PATH) with arguments argv[1...]. Throws std::runtime_error if it cannot.
  explicit child_process(std::vector<std::string> argv) {
    if (argv.empty()) throw std::invalid_argument("child_process: empty argv");
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("child_process: pipe failed");
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      throw std::runtime_error("child_process: pipe failed");
    }
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&actions, out[1], 1);  // dup2 clears close-on-exec on 1 and 2
    ::posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    fds_ = {out[0], err[0]};
    if (rc != 0) {
      pid_ = -1;
      close_pipes();
      throw std::runtime_error("child_process: cannot run " + argv[0] + ": " + std::to_string(rc));
    }
  }

  // Kills the child if it still runs, and reaps it.
  ~child_process() {
    close_pipes();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // Reads the child's output until its standard error contains `text` (true), or both its outputs end or `limit`
  // passes (false).
  bool wait_for_stderr(std::string_view text, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    return wait_for_stderr_until([&](const std::string& err) { return err.find(text) != std::string::npos; }, limit);
  }

  // Reads the child's output until `done(standard error so far)` is true (true), or both its outputs end or `limit`
  // passes (false).
  template <class Predicate>
  bool wait_for_stderr_until(Predicate done, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done(err_)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !pump(static_cast<int>(left.count()))) return done(err_);
    }
    return true;
  }

  // Reads both outputs to their end, then reaps the child: its exit status, or -1 if a signal ended it (or it did
  // not end within `limit`: then it is killed).
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ::kill(pid_, SIGKILL);
        break;
      }
      if (!pump(static_cast<int>(left.count()))) break;
    }
    close_pipes();
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  pid_t pid() const noexcept { return pid_; }  // -1 once reaped
  const std::string& out() const noexcept { return out_; }
  const std::string& err() const noexcept { return err_; }

 private:
  // One poll of the open pipes for up to `timeout_ms`; appends what arrived. False when both pipes have ended.
  bool pump(int timeout_ms) {
    std::array<pollfd, 2> p{};
    nfds_t n = 0;
    std::array<std::string*, 2> sinks{};
    std::array<int*, 2> owners{};
    for (int i = 0; i < 2; ++i) {
      if (fds_[static_cast<std::size_t>(i)] < 0) continue;
      p[n] = {fds_[static_cast<std::size_t>(i)], POLLIN, 0};
      sinks[n] = i == 0 ? &out_ : &err_;
      owners[n] = &fds_[static_cast<std::size_t>(i)];
      ++n;
    }
    if (n == 0) return false;
    const int ready = ::poll(p.data(), n, timeout_ms);
    if (ready < 0 && errno != EINTR) throw std::runtime_error("child_process: poll failed");
    for (nfds_t i = 0; i < n && ready > 0; ++i) {
      if (p[i].revents == 0) continue;
      std::array<char, 4096> buf{};
      const ssize_t got = ::read(p[i].fd, buf.data(), buf.size());
      if (got > 0) {
        sinks[i]->append(buf.data(), static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(*owners[i]);
        *owners[i] = -1;
      }
    }
    return fds_[0] >= 0 || fds_[1] >= 0;
  }

  void close_pipes() {
    for (int& fd : fds_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  pid_t pid_ = -1;
  std::array<int, 2> fds_{-1, -1};
  std::string out_, err_;
};

struct run_result {
  int status = -1;  // exit status, -1 if ended by a signal
  std::string out;
  std::string err;
};

// Runs the program to its end (see child_process).
inline run_result run_program(std::vector<std::string> argv) {
  child_process child(std::move(argv));
  run_result r;
  r.status = child.wait();
  r.out = child.out();
  r.err = child.err();
  return r;
}

}  // namespace admit::redis::testing
