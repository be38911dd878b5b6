// `admit inspect` of a local limit (see inspect.hpp).
#include "cli/inspect/local_inspect.hpp"

#include <chrono>
#include <ostream>
#include <stdexcept>

#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/json.hpp"
#include "cli/common/local_limit.hpp"
#include "cli/common/message.hpp"
#include "cli/common/values.hpp"

namespace admit::cli::run {

namespace {

nlohmann::ordered_json entry_json(const local_snapshot::entry& e, const char* time_key) {
  return {{"ticket", e.ticket},        {"weight", e.weight},
          {"host", e.info.host},       {"pid", e.info.pid},
          {"command", e.info.command}, {time_key, json_seconds(ns_since(e.info.started_unix_ms))}};
}

void print_entry(std::ostream& out, const local_snapshot::entry& e, const char* verb) {
  out << "ticket " << e.ticket << "  permits " << e.weight << "  " << e.info.host << " pid " << e.info.pid << " "
      << verb << " " << human_duration(ns_since(e.info.started_unix_ms)) << ": " << quote(e.info.command) << "\n";
}

}  // namespace

int inspect_local(const std::string& name, const std::string& lock_directory, const std::string& most_text, bool json,
                  std::ostream& out, std::ostream& err) {
  std::size_t most = 0;
  try {
    check_local_name(name);
    most = static_cast<std::size_t>(parse_count_option("--most", most_text, 1, max_count));
  } catch (const std::invalid_argument& e) {
    err << "admit inspect: " << e.what() << "\n";
    return exit_bad_input;
  } catch (const usage_error& e) {
    err << "admit inspect: " << e.what() << "\n";
    return exit_bad_input;
  }
  const std::filesystem::path dir =
      lock_directory.empty() ? default_lock_directory() : std::filesystem::path(lock_directory);
  const local_inspection in = inspect_local(dir, name);
  if (!in.exists) {
    err << "admit inspect: no local limit named " << quote(name) << " in " << quote(dir.string())
        << " (a limit of `admit run` without --redis; with --redis, pass it here too)\n";
    return exit_failure;
  }
  const local_snapshot& s = in.snapshot;
  std::int64_t held = 0;
  for (const auto& h : s.holders) held += h.weight;
  if (json) {
    nlohmann::ordered_json j;
    j["name"] = name;
    j["directory"] = dir.string();
    j["held"] = held;
    j["holder_count"] = s.holders.size();
    j["waiter_count"] = s.waiters.size();
    j["holders"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < s.holders.size() && i < most; ++i)
      j["holders"].push_back(entry_json(s.holders[i], "running_s"));
    j["queue"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < s.waiters.size() && i < most; ++i)
      j["queue"].push_back(entry_json(s.waiters[i], "waiting_s"));
    write_json_line(out, j);
    return exit_ok;
  }
  out << "local limit " << quote(name) << " in " << quote(dir.string()) << ": " << held << " permit(s) held by "
      << s.holders.size() << " holder(s), " << s.waiters.size() << " waiting\n";
  if (!s.holders.empty()) out << "holders:\n";
  for (std::size_t i = 0; i < s.holders.size() && i < most; ++i) {
    out << "  ";
    print_entry(out, s.holders[i], "running for");
  }
  if (!s.waiters.empty()) out << "queue (in order):\n";
  for (std::size_t i = 0; i < s.waiters.size() && i < most; ++i) {
    out << "  " << i + 1 << ". ";
    print_entry(out, s.waiters[i], "waiting for");
  }
  return exit_ok;
}

}  // namespace admit::cli::run
