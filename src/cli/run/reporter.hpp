// cli/run/reporter.hpp — what `admit run` says on stderr: messages ("admit run: ..."), the status line while it
// waits on a terminal, and with --json one JSON object per line per event (for log collectors). Thread safety: every
// member may be called from any thread (a mutex orders the lines).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "cli/common/local_limit.hpp"
#include "cli/run/options.hpp"
#include "nlohmann/json.hpp"

namespace admit::cli::run {

// "SIGTERM" for SIGTERM; "signal 40" for one without a name.
std::string signal_name(int signal);

class reporter {
 public:
  // `status_line`: stderr is a terminal (the line is drawn only then, and never with --quiet or --json).
  reporter(const run_settings& settings, std::ostream& err, bool status_line);

  // Whether a status line is drawn while waiting (a terminal, and neither --quiet nor --json).
  bool shows_status() const noexcept { return status_line_; }
  // While waiting: redraws the status line; the first call also writes the "waiting" event.
  void waiting(const wait_progress& p, std::chrono::nanoseconds waited);
  // Erases the status line (before the command starts: its output must not land on the line).
  void clear_status();
  void started(pid_t pid, std::int64_t fencing_token, const std::string& lease_id, std::chrono::nanoseconds waited);
  // `reason`: timeout, busy, queue_full, signal (the limit's answers: with --quiet, not said) or an error's (redis,
  // definition, capacity, exceeds_capacity: always said); with --json, the not_admitted event carries `message`.
  void not_admitted(std::string_view reason, std::chrono::nanoseconds waited, const std::string& message);
  void signal(int signal, bool forwarded);
  void lease_lost(const std::string& lease_id, lease_lost_action action);
  // The lease found gone by the renewal as the command ended (no earlier renewal had noticed): exit 124 follows.
  void lease_lost_at_exit(const std::string& lease_id);
  // `wait_status` as waitpid() gives it.
  void exited(int wait_status, std::chrono::nanoseconds ran, int exit_status);
  // A message that is always said (an error), in JSON as {"event":"error"}.
  void error(const std::string& message);

 private:
  nlohmann::ordered_json event(std::string_view name) const;
  void emit(const nlohmann::ordered_json& j);
  void say(const std::string& message) ADMIT_REQUIRES(mutex_);
  // A lost lease: the lease_lost event with `action` ("term", "kill", "ignore", or "none" as the command ended), or
  // `message` said.
  void tell_lost(const std::string& lease_id, std::string_view action, const std::string& message);
  void erase_status() ADMIT_REQUIRES(mutex_);

  const run_settings& settings_;
  bool status_line_;
  admit::detail::mutex mutex_;
  std::ostream& err_ ADMIT_GUARDED_BY(mutex_);  // (the lines of two threads never mix)
  bool drawn_ ADMIT_GUARDED_BY(mutex_) = false;
  bool waiting_reported_ ADMIT_GUARDED_BY(mutex_) = false;
  std::string trouble_ ADMIT_GUARDED_BY(mutex_);  // the trouble (wait_progress) told last: empty when none
};

}  // namespace admit::cli::run
