// `admit inspect` (see inspect.hpp).
#include "cli/inspect/redis_inspect.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "admit/detail/deadline.hpp"
#include "admit/detail/format_double.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/options.hpp"
#include "admit/redis/semaphore.hpp"
#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/io_runner.hpp"
#include "cli/common/json.hpp"
#include "cli/common/local_limit.hpp"
#include "cli/common/message.hpp"
#include "cli/common/redis_failure.hpp"
#include "cli/common/redis_topology.hpp"
#include "cli/common/run_holder.hpp"
#include "cli/common/values.hpp"
#include "cli/inspect/class_guarantees.hpp"
#include "cli/inspect/run_condition.hpp"

namespace admit::cli {

namespace {

// The most holders and waiters --most may ask for (the script lists them in one reply).
constexpr std::int64_t max_listed = 1'000'000'000;

std::int64_t ns(std::chrono::microseconds d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

// A remaining time: "4.2s", or "expired 120ms ago" (a lease or waiter past its expiry that no call has swept yet).
std::string left(std::chrono::microseconds d) {
  if (d.count() < 0) return "expired " + human_duration(-ns(d)) + " ago";
  return human_duration(ns(d));
}

// What `admit run` wrote of each listed holder and waiter (run_holder.hpp): `holders` in the holders' order, `queue`
// in the queue's; nullopt for one that is not an `admit run` (or when the call failed: the rest is shown).
struct run_entries {
  std::vector<std::optional<run_entry>> holders, queue;
  // The classes' names and shares as `admit run --classes` gave them (run_classes_key), one per class; empty when no
  // run named them (or what is stored does not read as --classes, or not as the limit's classes).
  std::vector<admit::priority_class> class_names;
};

run_entries read_run_entries(redis::client& conn, const std::string& name, const redis::semaphore_snapshot& s,
                             std::chrono::nanoseconds timeout) {
  run_entries out{std::vector<std::optional<run_entry>>(s.holders.size()),
                  std::vector<std::optional<run_entry>>(s.queue.size()),
                  {}};
  const auto deadline = [&] {
    return admit::detail::deadline_after<std::chrono::steady_clock>(std::chrono::steady_clock::now(), timeout);
  };
  if (!s.classes.empty()) {
    const redis::result names = conn.execute_command(deadline(), redis::command{"GET", run_classes_key(name)});
    try {
      if (names.ok() && names.value.is_string()) out.class_names = parse_classes(names.value.str());
    } catch (const usage_error&) {  // not written by admit run: shown by number
    }
    if (out.class_names.size() != s.classes.size()) out.class_names.clear();
  }
  if (s.holders.empty() && s.queue.empty()) return out;
  std::vector<std::string> args{"MGET"};
  for (const auto& h : s.holders) args.push_back(run_holder_key(name, h.id));
  for (const auto& w : s.queue) args.push_back(run_holder_key(name, w.id));
  const redis::result r = conn.execute_command(deadline(), redis::command(std::move(args)));
  if (!r.ok() || r.value.elements().size() != out.holders.size() + out.queue.size()) return out;
  for (std::size_t i = 0; i < r.value.elements().size(); ++i) {
    const auto& e = r.value.elements()[i];
    if (!e.is_string()) continue;
    (i < out.holders.size() ? out.holders[i] : out.queue[i - out.holders.size()]) = parse_run_entry(e.str());
  }
  return out;
}

// Since an `admit run` started waiting or holding, by this machine's clock (the run's may differ).
std::int64_t since_ns(const run_entry& e) { return run::ns_since(e.info.started_unix_ms); }

// An `admit run`'s fields in the JSON of a holder or waiter: host, pid, command, the time it has held or waited, and
// whether it is dead (with why).
void add_run(nlohmann::ordered_json& j, const run_entry& e, const char* time_key,
             std::optional<std::chrono::microseconds> lease_left) {
  j["host"] = e.info.host;
  j["pid"] = e.info.pid;
  j["command"] = e.info.command;
  j[time_key] = json_seconds(since_ns(e));
  add_condition(j, condition_of(e, lease_left));
}

// Each class's guaranteed permits, when the runs named the classes with their shares and the limit has a concurrency
// limit; empty otherwise.
std::vector<std::int64_t> guarantees(const redis::semaphore_snapshot& s, const run_entries& runs) {
  if (s.capacity >= redis::admission::unlimited_capacity || runs.class_names.size() != s.classes.size()) return {};
  return guaranteed_permits(s.capacity, runs.class_names);
}

// ", the first SHOWN of ALL" after a list's heading when --most (Redis's reply) cut it, else empty.
std::string comma_cut(std::size_t shown, std::int64_t all) {
  const std::string cut = list_cut(shown, static_cast<std::size_t>(std::max<std::int64_t>(all, 0)));
  return cut.empty() ? cut : ", " + cut;
}

// The same in words: "  admit run on HOST pid PID for 1.2s: "CMD"", and why it is dead when it is.
void print_run(std::ostream& out, const run_entry& e, const char* verb,
               std::optional<std::chrono::microseconds> lease_left) {
  out << "  admit run on " << e.info.host << " pid " << e.info.pid << " " << verb << " " << human_duration(since_ns(e))
      << ": " << as_shown(e.info.command);
  print_condition(out, condition_of(e, lease_left));
}

void print_json(std::ostream& out, const std::string& name, const redis::semaphore_snapshot& s,
                const run_entries& runs) {
  nlohmann::ordered_json j;
  j["name"] = name;
  // An admission without a concurrency limit: no capacity (null), every permit available.
  const bool unlimited = s.capacity >= redis::admission::unlimited_capacity;
  j["capacity"] = unlimited ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.capacity);
  j["available"] = unlimited ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.available);
  if (s.token_interval.count() > 0) {
    j["rate"] = {{"rate", admit::rate::every(s.token_interval).to_string()},
                 {"interval_us", s.token_interval.count()},
                 {"burst", s.burst},
                 {"tokens", s.tokens}};
  }
  j["last_fencing_token"] = s.last_fencing_token;
  j["server_time_us"] = s.server_time.count();
  j["holder_count"] = s.holder_count;
  j["waiter_count"] = s.waiter_count;
  j["holders"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < s.holders.size(); ++i) {
    const auto& h = s.holders[i];
    nlohmann::ordered_json e = {{"id", h.id},
                                {"count", h.count},
                                {"fencing_token", h.fencing_token},
                                {"lease_left_s", json_seconds(ns(h.remaining))}};
    if (!s.classes.empty()) e["class"] = h.priority;
    if (runs.holders[i]) add_run(e, *runs.holders[i], "running_s", h.remaining);
    j["holders"].push_back(std::move(e));
  }
  j["queue"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < s.queue.size(); ++i) {
    const auto& w = s.queue[i];
    nlohmann::ordered_json e = {{"id", w.id}, {"count", w.count}, {"expires_in_s", json_seconds(ns(w.remaining))}};
    if (!s.classes.empty()) e["class"] = w.priority;
    if (runs.queue[i]) add_run(e, *runs.queue[i], "waiting_s", std::nullopt);
    j["queue"].push_back(std::move(e));
  }
  if (!s.classes.empty()) {  // --classes: each class's held permits and queued requests, by class
    const std::vector<std::int64_t> guaranteed = guarantees(s, runs);
    j["classes"] = nlohmann::ordered_json::array();
    for (std::size_t c = 0; c < s.classes.size(); ++c) {
      nlohmann::ordered_json e;
      if (!runs.class_names.empty()) {
        e["name"] = runs.class_names[c].name;
        e["share"] = runs.class_names[c].share;
      }
      if (c < guaranteed.size()) e["guaranteed_permits"] = guaranteed[c];
      e["held"] = s.classes[c].held;
      e["queued"] = s.classes[c].queued;
      j["classes"].push_back(std::move(e));
    }
  }
  write_json_line(out, j);
}

// `where`: the server as messages name it (redis_address), as a local limit's line names its directory.
void print_text(std::ostream& out, const std::string& name, const std::string& where,
                const redis::semaphore_snapshot& s, const run_entries& runs) {
  out << "limit " << quote(name) << " at " << where << ": ";
  if (s.capacity >= redis::admission::unlimited_capacity) {
    out << "no concurrency limit, ";
  } else {
    out << "capacity " << s.capacity << ", available " << s.available << ", ";
  }
  if (s.token_interval.count() > 0) {
    out << "rate " << admit::rate::every(s.token_interval).to_string() << " (burst " << s.burst << ", " << s.tokens
        << " token(s) now), ";
  }
  out << s.holder_count << " holder(s), " << s.waiter_count << " waiting; last fencing token " << s.last_fencing_token
      << "\n";
  // A class by its name when the runs named the classes, else by its number.
  const auto class_of = [&](std::size_t c) {
    return c < runs.class_names.size() ? runs.class_names[c].name : std::to_string(c);
  };
  const std::vector<std::int64_t> guaranteed = guarantees(s, runs);
  for (std::size_t c = 0; c < s.classes.size(); ++c) {
    out << "class " << class_of(c);
    if (c < runs.class_names.size()) {
      out << " (share " << admit::detail::format_double(runs.class_names[c].share);
      if (c < guaranteed.size()) out << ", " << guaranteed[c] << " permit(s) guaranteed";
      out << ")";
    }
    out << ": " << s.classes[c].held << " permit(s) held, " << s.classes[c].queued << " asked by its waiters\n";
  }
  if (!s.holders.empty()) {
    out << "holders (soonest expiry first" << comma_cut(s.holders.size(), s.holder_count) << "):\n";
    for (std::size_t i = 0; i < s.holders.size(); ++i) {
      const auto& h = s.holders[i];
      out << "  " << h.id << "  permits " << h.count << "  fencing token " << h.fencing_token << "  lease "
          << left(h.remaining);
      if (!s.classes.empty()) out << "  class " << class_of(h.priority);
      if (runs.holders[i]) print_run(out, *runs.holders[i], "for", h.remaining);
      out << "\n";
    }
  }
  if (!s.queue.empty()) {
    out << "queue (in order" << comma_cut(s.queue.size(), s.waiter_count) << "):\n";
    for (std::size_t i = 0; i < s.queue.size(); ++i) {
      const auto& w = s.queue[i];
      out << "  " << i + 1 << ". " << w.id << "  permits " << w.count;
      if (!s.classes.empty()) out << "  class " << class_of(w.priority);
      out << "  presumed dead in " << left(w.remaining) << " unless it polls";
      if (runs.queue[i]) print_run(out, *runs.queue[i], "waiting", std::nullopt);
      out << "\n";
    }
  }
}

}  // namespace

int run_inspect(const inspect_options& o, std::ostream& out, std::ostream& err) {
  try {
    if (o.redis.empty()) throw usage_error("--redis is required (e.g. --redis redis://127.0.0.1:6379)");
    // Every argument is checked before connecting: bad input is exit status 2 whether or not Redis is there.
    try {
      redis::check_semaphore_name(o.name);
    } catch (const std::invalid_argument& e) {
      throw usage_error("invalid NAME " + quote(o.name) + ": " + without_cpp_name(e.what()));
    }
    const std::int64_t most = parse_count_option("--most", o.most, 1, max_listed);
    const std::chrono::nanoseconds timeout = parse_duration_option("--timeout", o.timeout);
    if (timeout <= std::chrono::nanoseconds::zero()) {
      throw usage_error("invalid --timeout " + quote(o.timeout) + ": must be positive");
    }
    redis::connection_options co;
    try {
      co = redis::parse_url(o.redis);
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("--redis: ") + e.what());
    }
    co.command_timeout = timeout;
    co.connect_timeout = timeout;
    io_runner io;
    redis::connection conn(io.executor(), co);
    std::optional<redis_failure> failure = check_ready(conn, timeout);
    std::unique_ptr<redis::cluster> nodes;  // the semaphore's slot may be on another node of a Redis Cluster
    std::pair<redis::semaphore_snapshot, std::error_code> r;
    if (!failure) {
      nodes = learn_topology(conn, timeout).nodes;
      redis::client& where = nodes ? static_cast<redis::client&>(*nodes) : conn;
      r = redis::inspect_semaphore(where, o.name, static_cast<std::size_t>(most));
      if (r.second == admit::errc::not_found) {
        err << "admit inspect: no limit named " << quote(o.name) << " on " << redis_address(co) << "\n";
        return exit_failure;
      }
      if (r.second) {
        failure = nodes ? call_failure(conn, *nodes, r.second, r.first.error_reply, timeout)
                        : call_failure(conn, r.second, r.first.error_reply, timeout);
      }
    }
    if (failure) {
      err << "admit inspect: " << failure->message << "\n";
      return failure->exit_status();
    }
    const run_entries runs =
        read_run_entries(nodes ? static_cast<redis::client&>(*nodes) : conn, o.name, r.first, timeout);
    if (o.json) {
      print_json(out, o.name, r.first, runs);
    } else {
      print_text(out, o.name, redis_address(co), r.first, runs);
    }
    return exit_ok;
  } catch (const usage_error& e) {
    err << "admit inspect: " << e.what() << "\n";
    return exit_bad_input;
  }
}

}  // namespace admit::cli
