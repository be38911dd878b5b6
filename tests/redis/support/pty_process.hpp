// tests/redis/support/pty_process.hpp — runs a program from an argument vector (no shell) on a new pseudo-terminal:
// its standard input, output and error are the terminal, it leads a new session whose foreground process group it is,
// so what a person would type reaches it as typed (write("\x03") is the terminal's SIGINT to that group). Output
// post-processing is off ("\n" stays "\n") so that the test sees the bytes the program wrote.
#pragma once

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace admit::redis::testing {

class pty_process {
 public:
  // Starts argv[0] (a path; not searched on PATH). Throws std::runtime_error if it cannot.
  explicit pty_process(std::vector<std::string> argv) {
    if (argv.empty()) throw std::invalid_argument("pty_process: empty argv");
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ < 0) throw std::runtime_error("pty_process: forkpty failed");
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      termios t{};
      if (::tcgetattr(0, &t) == 0) {
        t.c_oflag &= ~static_cast<tcflag_t>(OPOST);
        ::tcsetattr(0, TCSANOW, &t);
      }
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }

  // Kills the program if it still runs, and reaps it.
  ~pty_process() {
    if (master_ >= 0) ::close(master_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  pty_process(const pty_process&) = delete;
  pty_process& operator=(const pty_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  const std::string& out() const noexcept { return out_; }

  // Types `text` on the terminal.
  void type(std::string_view text) {
    if (::write(master_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      throw std::runtime_error("pty_process: write failed");
    }
  }

  // Reads the terminal until its output so far contains `text` (true), or it ends or `limit` passes (false).
  bool wait_for_output(std::string_view text, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (out_.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !pump(static_cast<int>(left.count()))) return out_.find(text) != std::string::npos;
    }
    return true;
  }

  // Reads the terminal to its end, then reaps the program: its exit status, or -1 if a signal ended it (or it did not
  // end within `limit`: then it is killed).
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
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  // One poll of the terminal for up to `timeout_ms`; appends what arrived. False when it has ended (EIO once every
  // process holding it open has ended).
  bool pump(int timeout_ms) {
    if (master_ < 0) return false;
    pollfd p{master_, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno != EINTR) throw std::runtime_error("pty_process: poll failed");
    if (ready <= 0) return true;
    std::array<char, 4096> buf{};
    const ssize_t got = ::read(master_, buf.data(), buf.size());
    if (got > 0) {
      out_.append(buf.data(), static_cast<std::size_t>(got));
      return true;
    }
    if (got < 0 && errno == EINTR) return true;
    ::close(master_);
    master_ = -1;
    return false;
  }

  pid_t pid_ = -1;
  int master_ = -1;
  std::string out_;
};

}  // namespace admit::redis::testing
