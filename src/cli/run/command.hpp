// cli/run/command.hpp — the command `admit run` runs: found on PATH before any waiting (so a command that cannot run
// never takes a place in the queue), then started as a direct child that dies with `admit run`.
//
//   resolved_command c = resolve_command({"psql", "-f", "job.sql"});   // throws command_error (127 or 126)
//   pid_t pid = start_command(c, {"ADMIT_NAME=db"}, inherited_fd, original_mask);
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace admit::cli::run {

// The command cannot run: exit_status is 127 (not found) or 126 (found, not executable); what() names it and why.
class command_error : public std::runtime_error {
 public:
  command_error(int exit_status, const std::string& message) : std::runtime_error(message), exit_status_(exit_status) {}
  int exit_status() const noexcept { return exit_status_; }

 private:
  int exit_status_;
};

struct resolved_command {
  std::string path;               // what execve() runs
  std::vector<std::string> argv;  // argv[0] as the user wrote it
};

// As execvp() looks for it: a name with a '/' is that file; else the first executable regular file of that name in
// PATH's directories (an empty entry is the current directory; PATH unset: /usr/local/bin:/usr/bin:/bin). Throws
// command_error: 127 when there is no such file, 126 when what was found is a directory or not executable.
resolved_command resolve_command(const std::vector<std::string>& argv);

// Starts the command (fork, execve) with this process's environment, `environment` entries ("NAME=value") replacing
// or adding to it, `inherited_fd` (when >= 0) left open across exec, the signal mask `mask` and default signal
// dispositions. The command gets SIGKILL when this process dies (PR_SET_PDEATHSIG; this must be called on the thread
// that lives until the process ends: the main thread). A file that execve() refuses as not an executable format is
// run by /bin/sh, as execvp() does. Throws command_error when the exec fails (the child then exits at once and is
// reaped here), std::system_error when fork fails.
pid_t start_command(const resolved_command& command, const std::vector<std::string>& environment, int inherited_fd,
                    const sigset_t& mask);

}  // namespace admit::cli::run
