// `admit run` (see run.hpp): find the command, wait for the permit on a worker thread while the main thread watches
// for signals, start the command, supervise it (signals, lease loss), release, exit with its status.
#include "cli/run/run.hpp"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "admit/errc.hpp"
#include "cli/common/message.hpp"
#include "cli/common/unique_fd.hpp"
#include "cli/run/command.hpp"
#include "cli/run/local_source.hpp"

namespace admit::cli::run {

namespace {

using steady = std::chrono::steady_clock;

constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

bool ends_the_wait(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

// `fd`, owned; throws the errno of the call that failed to make it.
unique_fd checked(int fd, const char* what) {
  if (fd < 0) throw std::system_error(errno, std::generic_category(), what);
  return unique_fd(fd);
}

// The signals admit run handles, blocked in every thread from now on and read from a signalfd; the mask before, for
// the command. A signal this process was started with ignored (nohup's SIGHUP, a background job's SIGINT) stays
// ignored — by admit run and, inherited, by the command. SIGCHLD is set to its default: ignored, the kernel would reap
// the command itself and say nothing. SIGPIPE is blocked: a closed stderr makes admit run's messages fail, not kill it
// (and, through PR_SET_PDEATHSIG, the command).
struct signal_watch {
  sigset_t handled{}, original{};
  unique_fd fd;
  signal_watch() {
    ::sigemptyset(&handled);
    for (int s : forwarded_signals) {
      struct sigaction now {};
      if (::sigaction(s, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
      ::sigaddset(&handled, s);
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGCHLD, &dfl, nullptr);
    ::sigaddset(&handled, SIGCHLD);
    sigset_t blocked = handled;
    ::sigaddset(&blocked, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &blocked, &original);
    fd = checked(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd");
  }
  ~signal_watch() {
    fd.reset();
    ::pthread_sigmask(SIG_SETMASK, &original, nullptr);
  }
  // The next signal, if one is pending.
  std::optional<signalfd_siginfo> next() const {
    signalfd_siginfo info{};
    if (::read(fd.get(), &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return std::nullopt;
    return info;
  }
};

entry_info who(const run_settings& s) {
  entry_info info;
  info.host = host_name();
  info.pid = ::getpid();
  info.command = shell_words(s.command);  // shown by admit inspect as a shell would read it
  info.started_unix_ms = unix_time_ms();
  return info;
}

std::string_view reason_of(std::error_code e) {
  if (e == admit::errc::timeout) return "timeout";
  if (e == admit::errc::would_block) return "busy";
  if (e == admit::errc::queue_full) return "queue_full";
  if (e == admit::errc::cancelled) return "signal";
  if (e == admit::errc::exceeds_capacity) return "exceeds_capacity";
  return "redis";
}

int exit_status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

// Waits for the permit on a worker thread; the main thread watches for signals meanwhile. A terminating signal stops
// the wait (the source leaves the queue before acquire returns). Returns the permit, or null with `why` and, when a
// signal ended the wait, `stopped_by`.
std::unique_ptr<held_permit> wait_for_permit(permit_source& source, const run_settings& s, const signal_watch& signals,
                                             reporter& report, refusal& why, int& stopped_by) {
  const auto start = steady::now();
  std::optional<steady::time_point> deadline;
  if (s.timeout) deadline = start + *s.timeout;
  const unique_fd done = checked(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd");
  std::unique_ptr<held_permit> permit;
  std::jthread worker([&](std::stop_token stop) {
    try {
      permit = source.acquire(
          deadline, s.no_wait, stop, [&](const wait_progress& p) { report.waiting(p, steady::now() - start); },
          report.shows_status(), why);
    } catch (const std::system_error& e) {  // the lock directory's files (a Redis failure is a refusal)
      why.error = e.code();
      why.message = e.what();
      why.exit_status = exit_cannot_create;
    } catch (const std::exception& e) {
      why.error = std::make_error_code(std::errc::io_error);
      why.message = e.what();
      why.exit_status = exit_failure;
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(done.get(), &one, sizeof one);
  });
  for (;;) {
    pollfd fds[2] = {{signals.fd.get(), POLLIN, 0}, {done.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
    while (auto info = signals.next()) {
      const int sig = static_cast<int>(info->ssi_signo);
      if (ends_the_wait(sig) && stopped_by == 0) {
        stopped_by = sig;
        report.signal(sig, false);
        worker.request_stop();
      }
    }
    if (fds[1].revents & POLLIN) break;
  }
  worker.join();
  if (stopped_by != 0 && permit) {
    permit->release();  // granted as the signal came: given back, the command does not run
    permit.reset();
  }
  return permit;
}

struct outcome {
  int wait_status = 0;
  bool lost = false;
};

// Supervises the running command until it exits: forwards signals, acts on a lost permit, maintains the permit.
outcome supervise(pid_t pid, held_permit& permit, const run_settings& s, const signal_watch& signals, reporter& report,
                  const std::vector<signalfd_siginfo>& early) {
  outcome out;
  // A signal the terminal sent went to the whole foreground process group, the command included: not twice.
  const auto pass_on = [&](const signalfd_siginfo& info) {
    const int sig = static_cast<int>(info.ssi_signo);
    const bool from_terminal = info.ssi_code == SI_KERNEL;
    if (!from_terminal) ::kill(pid, sig);
    report.signal(sig, !from_terminal);
  };
  for (const auto& info : early) pass_on(info);
  std::optional<steady::time_point> kill_at;
  const auto every = permit.maintenance_interval();
  std::optional<steady::time_point> maintain_at;
  if (every) maintain_at = steady::now() + *every;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      out.wait_status = status;
      return out;
    }
    if (r < 0 && errno == ECHILD) {  // reaped by someone else: gone, its status unknown
      out.wait_status = W_EXITCODE(exit_failure, 0);
      return out;
    }
    if (r < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
    const auto now = steady::now();
    if (kill_at && now >= *kill_at) {
      ::kill(pid, SIGKILL);
      kill_at.reset();
    }
    if (maintain_at && now >= *maintain_at) {
      permit.maintain();
      maintain_at = now + *every;
    }
    std::optional<steady::time_point> wake = kill_at;
    if (maintain_at && (!wake || *maintain_at < *wake)) wake = maintain_at;
    int timeout_ms = -1;
    if (wake) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - steady::now()).count();
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
    }
    pollfd fds[2] = {{signals.fd.get(), POLLIN, 0}, {permit.lost_fd(), POLLIN, 0}};
    const nfds_t n = permit.lost_fd() >= 0 && !out.lost ? 2 : 1;
    if (::poll(fds, n, timeout_ms) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    while (auto info = signals.next()) {
      const int sig = static_cast<int>(info->ssi_signo);
      if (sig == SIGCHLD) continue;  // reaped at the top of the loop
      pass_on(*info);
    }
    if (n == 2 && (fds[1].revents & POLLIN)) {
      out.lost = true;
      report.lease_lost(permit.lease_id(), s.on_lease_lost);
      if (s.on_lease_lost == lease_lost_action::term) {
        ::kill(pid, SIGTERM);
        kill_at = steady::now() + s.kill_after;
      } else if (s.on_lease_lost == lease_lost_action::kill) {
        ::kill(pid, SIGKILL);
      }
    }
  }
}

}  // namespace

int run_command(const run_options& options, std::ostream& err, bool stderr_is_terminal,
                const redis_source_factory& make_redis) {
  run_settings s;
  try {
    s = check(options);
  } catch (const usage_error& e) {
    // Said as every later error is: an "error" event with --json (the options that parsed so far say only that).
    run_settings told;
    told.name = options.name;
    told.json = options.json;
    reporter(told, err, false).error(e.what());
    return exit_bad_input;
  }
  reporter report(s, err, stderr_is_terminal);
  resolved_command command;
  try {
    command = resolve_command(s.command);
  } catch (const command_error& e) {
    report.error(e.what());
    return e.exit_status();
  }

  signal_watch signals;  // before any thread starts: they all inherit the blocked mask
  std::unique_ptr<permit_source> source;
  try {
    const entry_info info = who(s);
    if (s.redis) {
      if (!make_redis) {
        report.error("--redis: this admit was built without Redis support");
        return exit_bad_input;
      }
      source = make_redis(s, info);
    } else {
      source = make_local_source(s, info);
    }
  } catch (const usage_error& e) {
    report.error(e.what());
    return exit_bad_input;
  } catch (const std::invalid_argument& e) {
    report.error(e.what());
    return exit_bad_input;
  } catch (const std::system_error& e) {  // the lock directory cannot be made
    report.error(e.what());
    return exit_cannot_create;
  }

  const auto asked = steady::now();
  refusal why;
  int stopped_by = 0;
  std::unique_ptr<held_permit> permit = wait_for_permit(*source, s, signals, report, why, stopped_by);
  const auto waited = steady::now() - asked;
  if (!permit) {
    if (stopped_by != 0) {
      report.not_admitted("signal", waited,
                          "not admitted: " + signal_name(stopped_by) + " while waiting for " + quote(s.name));
      return 128 + stopped_by;
    }
    if (why.exit_status == exit_cannot_create || why.exit_status == exit_failure) {
      report.error(why.message);
    } else {
      report.not_admitted(why.reason.empty() ? reason_of(why.error) : why.reason, waited, why.message);
    }
    return why.exit_status;
  }
  // A signal that came after the wait's last look and before the command exists: one that ends the wait still does
  // (the permit is given back); another is passed to the command once it runs.
  std::vector<signalfd_siginfo> early;
  while (auto info = signals.next()) {
    const int sig = static_cast<int>(info->ssi_signo);
    if (ends_the_wait(sig) && stopped_by == 0) {
      stopped_by = sig;
      report.signal(sig, false);
      permit->release();
    } else if (sig != SIGCHLD) {
      early.push_back(*info);
    }
  }
  if (stopped_by != 0) {  // a permit granted as the signal came was given back
    report.not_admitted("signal", waited,
                        "not admitted: " + signal_name(stopped_by) + " while waiting for " + quote(s.name));
    return 128 + stopped_by;
  }

  const std::vector<std::string> environment = {"ADMIT_NAME=" + s.name,
                                                "ADMIT_FENCING_TOKEN=" + std::to_string(permit->fencing_token()),
                                                "ADMIT_LEASE_ID=" + permit->lease_id()};
  report.clear_status();  // before the command can write anything
  pid_t pid = -1;
  try {
    pid = start_command(command, environment, permit->inherited_fd(), signals.original);
  } catch (const command_error& e) {
    permit->release();
    report.error(e.what());
    return e.exit_status();
  }
  const auto started = steady::now();
  report.started(pid, permit->fencing_token(), permit->lease_id(), waited);
  const outcome o = supervise(pid, *permit, s, signals, report, early);
  const auto ran = steady::now() - started;
  const release_result released = permit->release();
  if (released.problem) report.error(*released.problem);
  if (released.found_lost && !o.lost) report.lease_lost_at_exit(permit->lease_id());
  permit.reset();
  const int status = o.lost || released.found_lost ? exit_lease_lost : exit_status_of(o.wait_status);
  report.exited(o.wait_status, ran, status);
  return status;
}

}  // namespace admit::cli::run
