// What `admit run --redis` keeps of a run for `admit inspect` (see run_holder.hpp).
#include "cli/common/run_holder.hpp"

#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/common/duration.hpp"

namespace admit::cli {

std::string to_json(const run_entry& e) {
  nlohmann::ordered_json j;
  j["host"] = e.info.host;
  j["pid"] = e.info.pid;
  j["command"] = e.info.command;
  j["started_unix_ms"] = e.info.started_unix_ms;
  j["lease_ttl_ms"] = e.lease_ttl.count();
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<run_entry> parse_run_entry(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("pid") || !j.contains("started_unix_ms")) return std::nullopt;
  try {
    run_entry e;
    e.info.host = j.value("host", "");
    e.info.pid = j.value("pid", std::int64_t{0});
    e.info.command = j.value("command", "");
    e.info.started_unix_ms = j.value("started_unix_ms", std::int64_t{0});
    e.lease_ttl = std::chrono::milliseconds(j.value("lease_ttl_ms", std::int64_t{0}));  // absent: an older admit's
    return e;
  } catch (const nlohmann::json::exception&) {  // a field of another type
    return std::nullopt;
  }
}

std::optional<std::string> run_entry_death(const run_entry& e, std::optional<std::chrono::microseconds> lease_left) {
  if (e.info.pid > 0 && !e.info.host.empty() && e.info.host == run::host_name() &&
      ::kill(static_cast<pid_t>(e.info.pid), 0) != 0 && errno == ESRCH) {
    return "pid " + std::to_string(e.info.pid) + " is gone";
  }
  if (lease_left && e.lease_ttl.count() > 0 && *lease_left < e.lease_ttl / 3) {
    const auto unrenewed = std::chrono::duration_cast<std::chrono::nanoseconds>(e.lease_ttl - *lease_left);
    return "its lease was not renewed for " + human_duration(unrenewed.count());
  }
  return std::nullopt;
}

std::optional<std::string> run_entry_stopped(const run_entry& e) {
  if (e.info.pid <= 0 || e.info.host.empty() || e.info.host != run::host_name()) return std::nullopt;
  std::ifstream stat("/proc/" + std::to_string(e.info.pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return std::nullopt;
  // "pid (comm) S ...": the state follows the last ')' (comm, the program's name, may hold spaces and parentheses).
  const auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return std::nullopt;
  const char state = text[paren + 2];
  if (state != 'T' && state != 't') return std::nullopt;
  return "pid " + std::to_string(e.info.pid) + " is stopped (SIGSTOP, Ctrl-Z): it does nothing until continued (kill " +
         "-CONT " + std::to_string(e.info.pid) + ") or killed";
}

}  // namespace admit::cli
