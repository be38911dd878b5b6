// What `admit run` says (see reporter.hpp).
#include "cli/run/reporter.hpp"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <ostream>

#include "cli/common/duration.hpp"
#include "cli/common/json.hpp"
#include "cli/common/message.hpp"

namespace admit::cli::run {

namespace {

std::string_view action_name(lease_lost_action a) {
  switch (a) {
    case lease_lost_action::term:
      return "term";
    case lease_lost_action::kill:
      return "kill";
    case lease_lost_action::ignore:
      return "ignore";
  }
  return "term";
}

std::string lost_message(const std::string& lease_id, const std::string& name) {
  return "the lease " + lease_id + " of " + name +
         " was lost (Redis no longer has it: no renewal reached Redis within --lease-ttl, or Redis lost it, restarted "
         "or failed over without its data)";
}

std::string ordinal(std::size_t n) {
  const std::size_t tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : n % 10 == 1              ? "st"
                       : n % 10 == 2              ? "nd"
                       : n % 10 == 3              ? "rd"
                                                  : "th";
  return std::to_string(n) + suffix;
}

}  // namespace

std::string signal_name(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

reporter::reporter(const run_settings& settings, std::ostream& err, bool status_line)
    : settings_(settings), status_line_(status_line && !settings.quiet && !settings.json), err_(err) {}

nlohmann::ordered_json reporter::event(std::string_view name) const {
  nlohmann::ordered_json j;
  j["event"] = name;
  j["name"] = settings_.name;
  if (!settings_.classes.empty()) j["class"] = settings_.classes[settings_.priority].name;  // --class
  j["time_unix_ms"] = unix_time_ms();
  return j;
}

void reporter::emit(const nlohmann::ordered_json& j) {
  const admit::detail::lock_guard lock(mutex_);
  write_json_line(err_, j);
  err_.flush();
}

void reporter::erase_status() {
  if (!drawn_) return;
  err_ << "\r\x1b[K";
  err_.flush();
  drawn_ = false;
}

void reporter::say(const std::string& message) {
  erase_status();
  err_ << "admit run: " << message << "\n";
  err_.flush();
}

void reporter::waiting(const wait_progress& p, std::chrono::nanoseconds waited) {
  bool first = false, trouble_changed = false;
  {
    const admit::detail::lock_guard lock(mutex_);  // (the first report may come from two threads at once)
    first = !waiting_reported_;
    waiting_reported_ = true;
    trouble_changed = p.trouble.empty() != trouble_.empty();
    trouble_ = p.trouble;
  }
  if (trouble_changed) {
    // Redis went away or came back while the run waits: said once each time, whatever the output.
    if (settings_.json) {
      auto j = event(p.trouble.empty() ? "redis_back" : "redis_unreachable");
      if (!p.trouble.empty()) j["message"] = p.trouble;
      emit(j);
    } else if (!settings_.quiet && !status_line_) {
      const admit::detail::lock_guard lock(mutex_);
      say(p.trouble.empty()
              ? "Redis answers again; still waiting for " + quote(settings_.name)
              : p.trouble + "; still waiting for " + quote(settings_.name) + " (the wait goes on once Redis is back" +
                    (settings_.timeout ? ", until --timeout)" : ")"));
    }
  }
  if (settings_.json && first) {
    auto j = event("waiting");
    j["position"] = p.position == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.position);
    j["waiting"] = p.waiting;
    j["held"] = p.held;
    j["capacity"] = p.capacity == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.capacity);
    // With a rate whose tokens are short: about how long until the bucket holds this run's (null otherwise).
    j["rate_wait_ms"] = p.rate_wait
                            ? nlohmann::ordered_json(std::chrono::ceil<std::chrono::milliseconds>(*p.rate_wait).count())
                            : nlohmann::ordered_json(nullptr);
    emit(j);
  }
  if (!status_line_) return;
  std::string line = "admit run: waiting for " + settings_.name;
  if (p.position > 0 && !settings_.classes.empty()) {  // the place is in its class's queue
    line += " (" + ordinal(p.position) + " in class " + settings_.classes[settings_.priority].name + ", " +
            std::to_string(p.waiting) + " waiting";
  } else if (p.position > 0) {
    line += " (" + ordinal(p.position) + " of " + std::to_string(p.waiting) + " waiting";
  } else {
    line += " (" + std::to_string(p.waiting) + " waiting";
  }
  if (p.capacity > 0) line += ", " + std::to_string(p.held) + " of " + std::to_string(p.capacity) + " held";
  if (p.rate_wait) line += ", next start by the rate in " + human_duration(p.rate_wait->count());
  if (!p.trouble.empty()) line += "; " + p.trouble + ", retrying";
  line += ") " + human_duration(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() * 1'000'000);
  const admit::detail::lock_guard lock(mutex_);
  err_ << "\r" << line << "\x1b[K";
  err_.flush();
  drawn_ = true;
}

void reporter::clear_status() {
  const admit::detail::lock_guard lock(mutex_);
  erase_status();
}

void reporter::started(pid_t pid, std::int64_t fencing_token, const std::string& lease_id,
                       std::chrono::nanoseconds waited) {
  {
    const admit::detail::lock_guard lock(mutex_);
    erase_status();
  }
  if (!settings_.json) return;
  auto j = event("started");
  j["pid"] = pid;
  j["fencing_token"] = fencing_token;
  j["lease_id"] = lease_id;
  j["waited_s"] = json_seconds(waited.count());
  emit(j);
}

void reporter::not_admitted(std::string_view reason, std::chrono::nanoseconds waited, const std::string& message) {
  if (settings_.json) {
    auto j = event("not_admitted");
    j["reason"] = reason;
    j["waited_s"] = json_seconds(waited.count());
    j["message"] = message;
    emit(j);
    return;
  }
  // --quiet leaves out the limit's own answers (busy, not within --timeout, the queue full, a signal), which a cron
  // job expects; an error (Redis, another definition of the name, a request above the limit) is still said.
  const bool answer = reason == "timeout" || reason == "busy" || reason == "queue_full" || reason == "signal";
  const admit::detail::lock_guard lock(mutex_);
  if (settings_.quiet && answer) {
    erase_status();
  } else {
    say(message);
  }
}

void reporter::signal(int sig, bool forwarded) {
  if (!settings_.json) return;
  auto j = event("signal");
  j["signal"] = signal_name(sig);
  j["forwarded"] = forwarded;
  emit(j);
}

void reporter::lease_lost_at_exit(const std::string& lease_id) {
  tell_lost(lease_id, "none",
            lost_message(lease_id, settings_.name) +
                ", found as the command ended, before a renewal noticed: it may not have been protected while it ran");
}

void reporter::lease_lost(const std::string& lease_id, lease_lost_action action) {
  std::string message = lost_message(lease_id, settings_.name) + ": the command may no longer be protected; ";
  switch (action) {
    case lease_lost_action::term:
      message += "sending it SIGTERM (SIGKILL after --kill-after)";
      break;
    case lease_lost_action::kill:
      message += "sending it SIGKILL";
      break;
    case lease_lost_action::ignore:
      message += "letting it run (--on-lease-lost=ignore)";
      break;
  }
  tell_lost(lease_id, action_name(action), message);
}

void reporter::tell_lost(const std::string& lease_id, std::string_view action, const std::string& message) {
  if (settings_.json) {
    auto j = event("lease_lost");
    j["lease_id"] = lease_id;
    j["action"] = action;
    j["message"] = message;
    emit(j);
    return;
  }
  const admit::detail::lock_guard lock(mutex_);
  say(message);
}

void reporter::exited(int wait_status, std::chrono::nanoseconds ran, int exit_status) {
  if (!settings_.json) return;
  auto j = event("exited");
  j["exit_status"] = WIFEXITED(wait_status) ? nlohmann::ordered_json(WEXITSTATUS(wait_status)) : nullptr;
  j["signal"] = WIFSIGNALED(wait_status) ? nlohmann::ordered_json(signal_name(WTERMSIG(wait_status))) : nullptr;
  j["ran_s"] = json_seconds(ran.count());
  j["admit_exit_status"] = exit_status;
  emit(j);
}

void reporter::error(const std::string& message) {
  if (settings_.json) {
    auto j = event("error");
    j["message"] = message;
    emit(j);
    return;
  }
  const admit::detail::lock_guard lock(mutex_);
  say(message);
}

}  // namespace admit::cli::run
