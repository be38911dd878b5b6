// `admit inspect` of a local limit (see inspect.hpp).
#include "cli/inspect/local_inspect.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "admit/detail/format_double.hpp"
#include "admit/rate.hpp"
#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/json.hpp"
#include "cli/common/local_limit.hpp"
#include "cli/common/message.hpp"
#include "cli/common/run_holder.hpp"
#include "cli/common/values.hpp"
#include "cli/inspect/class_guarantees.hpp"
#include "cli/inspect/run_condition.hpp"

namespace admit::cli::run {

namespace {

// An entry's run: dead or stopped, as for Redis's. A local entry lasts as long as its lock is held: when the run is
// gone, a process it started (a command's child left running, which inherited the lock) holds the permit on.
run_condition condition_of(const local_snapshot::entry& e) {
  return condition_of(run_entry{e.info, std::chrono::milliseconds(0)}, std::nullopt,
                      "; a process it started still holds its lock");
}

nlohmann::ordered_json entry_json(const local_snapshot::entry& e, const char* time_key, bool classes) {
  nlohmann::ordered_json j = {{"ticket", e.ticket}, {"weight", e.weight}};
  if (classes) j["class"] = e.priority;
  j.update({{"host", e.info.host},
            {"pid", e.info.pid},
            {"command", e.info.command},
            {time_key, json_seconds(ns_since(e.info.started_unix_ms))}});
  add_condition(j, condition_of(e));
  return j;
}

void print_entry(std::ostream& out, const local_snapshot::entry& e, const char* verb,
                 const std::vector<admit::priority_class>& classes) {
  out << "ticket " << e.ticket << "  permits " << e.weight;
  if (e.priority < classes.size()) out << "  class " << classes[e.priority].name;
  out << "  " << e.info.host << " pid " << e.info.pid << " " << verb << " "
      << human_duration(ns_since(e.info.started_unix_ms)) << ": " << as_shown(e.info.command);
  print_condition(out, condition_of(e));
  out << "\n";
}

// Each class's permits held and permits asked by its waiters.
struct class_load {
  std::int64_t held = 0, queued = 0;
};
std::vector<class_load> loads(const local_snapshot& s, std::size_t classes) {
  std::vector<class_load> l(classes);
  for (const auto& h : s.holders) {
    if (h.priority < classes) l[h.priority].held += h.weight;
  }
  for (const auto& w : s.waiters) {
    if (w.priority < classes) l[w.priority].queued += w.weight;
  }
  return l;
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
  local_inspection in;
  try {
    in = inspect_local(dir, name);
  } catch (const std::system_error& e) {  // the directory or its files: read as another user, or an I/O error
    err << "admit inspect: " << e.what() << "\n";
    return exit_no_input;
  }
  if (!in.exists) {
    err << "admit inspect: no local limit named " << quote(name) << " in " << quote(dir.string())
        << " (a limit of `admit run` without --redis; with --redis, pass it here too)\n";
    return exit_failure;
  }
  if (in.lock_held) {
    err << "admit inspect: the lock of local limit " << quote(name) << ", " << quote(in.lock_held->string())
        << ", has been held for over " << human_duration(std::chrono::nanoseconds(inspect_patience).count())
        << " by another process: a stopped `admit run` (Ctrl-Z, SIGSTOP) holds it until it is continued, and every run "
           "of the limit on this host waits meanwhile (`fuser -v "
        << quote(in.lock_held->string()) << "` names the process)\n";
    return exit_tempfail;
  }
  const local_snapshot& s = in.snapshot;
  std::int64_t held = 0;
  for (const auto& h : s.holders) held += h.weight;
  // Nobody takes part: the limit has no definition now (the next run gives it).
  const limit_definition d = in.definition.value_or(limit_definition{});
  const auto by_class = loads(s, d.classes.size());
  const std::vector<std::int64_t> guaranteed = guaranteed_permits(d.capacity, d.classes);
  const bool classes = !d.classes.empty();
  if (json) {
    nlohmann::ordered_json j;
    j["name"] = name;
    j["directory"] = dir.string();
    j["capacity"] = d.capacity > 0 ? nlohmann::ordered_json(d.capacity) : nlohmann::ordered_json(nullptr);
    j["held"] = held;
    if (d.interval_ns > 0) {
      j["rate"] = {{"rate", admit::rate::every(std::chrono::nanoseconds(d.interval_ns)).to_string()},
                   {"interval_us", d.interval_ns / 1000},
                   {"burst", d.burst},
                   {"tokens", in.tokens.value_or(0)}};
    }
    j["holder_count"] = s.holders.size();
    j["waiter_count"] = s.waiters.size();
    j["holders"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < s.holders.size() && i < most; ++i)
      j["holders"].push_back(entry_json(s.holders[i], "running_s", classes));
    j["queue"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < s.waiters.size() && i < most; ++i)
      j["queue"].push_back(entry_json(s.waiters[i], "waiting_s", classes));
    if (classes) {  // each class's held permits and the permits its waiters ask for, by class
      j["classes"] = nlohmann::ordered_json::array();
      for (std::size_t c = 0; c < d.classes.size(); ++c) {
        nlohmann::ordered_json e = {{"name", d.classes[c].name}, {"share", d.classes[c].share}};
        if (c < guaranteed.size()) e["guaranteed_permits"] = guaranteed[c];
        e.update({{"held", by_class[c].held}, {"queued", by_class[c].queued}});
        j["classes"].push_back(std::move(e));
      }
    }
    write_json_line(out, j);
    return exit_ok;
  }
  out << "local limit " << quote(name) << " in " << quote(dir.string()) << ": ";
  if (in.definition) out << describe(d) << "; ";
  out << held << " permit(s) held by " << s.holders.size() << " holder(s), " << s.waiters.size() << " waiting";
  if (in.tokens) out << ", " << *in.tokens << " token(s) now";
  out << "\n";
  for (std::size_t c = 0; c < d.classes.size(); ++c) {
    out << "class " << d.classes[c].name << " (share " << admit::detail::format_double(d.classes[c].share);
    if (c < guaranteed.size()) out << ", " << guaranteed[c] << " permit(s) guaranteed";
    out << "): " << by_class[c].held << " permit(s) held, " << by_class[c].queued << " asked by its waiters\n";
  }
  // (As the Redis form's: a list cut by --most says so, the counts above being the whole's.)
  const std::string holders_cut = list_cut(std::min(most, s.holders.size()), s.holders.size());
  const std::string waiters_cut = list_cut(std::min(most, s.waiters.size()), s.waiters.size());
  if (!s.holders.empty()) out << "holders" << (holders_cut.empty() ? "" : " (" + holders_cut + ")") << ":\n";
  for (std::size_t i = 0; i < s.holders.size() && i < most; ++i) {
    out << "  ";
    print_entry(out, s.holders[i], "running for", d.classes);
  }
  if (!s.waiters.empty()) {
    out << "queue (in order of arrival" << (waiters_cut.empty() ? "" : ", " + waiters_cut) << "):\n";
  }
  for (std::size_t i = 0; i < s.waiters.size() && i < most; ++i) {
    out << "  " << i + 1 << ". ";
    print_entry(out, s.waiters[i], "waiting for", d.classes);
  }
  return exit_ok;
}

}  // namespace admit::cli::run
