// The command of `admit run` (see command.hpp).
#include "cli/run/command.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <system_error>

#include "cli/common/message.hpp"

extern char** environ;

namespace admit::cli::run {

namespace {

constexpr const char* default_path = "/usr/local/bin:/usr/bin:/bin";

// 0 when `path` can be run; else the errno-like reason: ENOENT, EISDIR, EACCES.
int runnable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR ? ENOENT : errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (::access(path.c_str(), X_OK) != 0) return EACCES;
  return 0;
}

[[noreturn]] void refuse(const std::string& shown, int reason) {
  if (reason == ENOENT) throw command_error(127, quote(shown) + ": command not found");
  if (reason == EISDIR) throw command_error(126, quote(shown) + ": is a directory, not a command");
  throw command_error(126, quote(shown) + ": cannot run: " + std::generic_category().message(reason));
}

// Why a file that exists could not be run although exec said "no such file": what it names to run it is missing —
// the interpreter of its "#!" line, or (a program) its dynamic loader.
std::string missing_interpreter(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string first;
  std::getline(in, first);
  if (first.rfind("#!", 0) == 0) {
    const std::size_t from = first.find_first_not_of(" \t", 2);
    const std::string line = from == std::string::npos ? "" : first.substr(from);
    const std::string interpreter = line.substr(0, line.find_first_of(" \t\r"));
    return "its interpreter " + quote(interpreter) + " (its #! line) was not found";
  }
  return "the loader it names was not found";
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

resolved_command resolve_command(const std::vector<std::string>& argv) {
  if (argv.empty() || argv.front().empty()) throw command_error(127, "no command given");
  const std::string& name = argv.front();
  if (name.find('/') != std::string::npos) {
    if (const int reason = runnable(name)) refuse(name, reason);
    return {name, argv};
  }
  const char* env_path = std::getenv("PATH");
  const std::string_view path = env_path ? env_path : default_path;
  int found = ENOENT;  // the best reason seen: a file that exists but cannot run beats none
  for (std::size_t begin = 0;;) {
    const std::size_t end = std::min(path.find(':', begin), path.size());
    std::string dir(path.substr(begin, end - begin));
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    const int reason = runnable(candidate);
    if (reason == 0) return {candidate, argv};
    if (reason != ENOENT) found = reason;
    if (end == path.size()) break;
    begin = end + 1;
  }
  refuse(name, found);
}

pid_t start_command(const resolved_command& command, const std::vector<std::string>& environment, int inherited_fd,
                    const sigset_t& mask) {
  // Everything the child needs is made here: between fork and exec only async-signal-safe calls (other threads may
  // hold the allocator's locks).
  std::vector<std::string> args = command.argv;
  std::vector<std::string> sh_args{"sh", command.path};
  sh_args.insert(sh_args.end(), command.argv.begin() + 1, command.argv.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const auto& mine : environment) replaced = replaced || mine.compare(0, key.size(), key) == 0;
    if (!replaced) env.emplace_back(entry);
  }
  env.insert(env.end(), environment.begin(), environment.end());
  std::vector<char*> argv_p = pointers(args), sh_p = pointers(sh_args), env_p = pointers(env);
  const std::string path = command.path;

  int report[2];  // the child writes its exec's errno here; close-on-exec: a successful exec closes it empty
  if (::pipe2(report, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(report[0]);
    ::close(report[1]);
    throw std::system_error(e, std::generic_category(), "fork");
  }
  if (pid == 0) {
    ::close(report[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);  // admit run died before the line above took effect
    // Nothing of admit's but what is meant to be inherited reaches the command: every descriptor from 3 on closes
    // on exec, even one another thread opened just before the fork without O_CLOEXEC and had not marked yet (a
    // Redis connection still connecting: Asio opens sockets without SOCK_CLOEXEC). Linux 5.11 and later; on an
    // older kernel this fails and that window stays.
    (void)::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (inherited_fd >= 0) ::fcntl(inherited_fd, F_SETFD, 0);
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    ::execve(path.c_str(), argv_p.data(), env_p.data());
    int e = errno;
    if (e == ENOEXEC) {
      ::execve("/bin/sh", sh_p.data(), env_p.data());
      e = errno;
    }
    [[maybe_unused]] const auto n = ::write(report[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(report[1]);
  int e = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (e == ENOENT && runnable(command.path) == 0) {
      throw command_error(126, quote(command.argv.front()) + ": cannot run: " + missing_interpreter(command.path));
    }
    refuse(command.argv.front(), e);
  }
  return pid;
}

}  // namespace admit::cli::run
