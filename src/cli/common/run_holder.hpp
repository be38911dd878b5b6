// cli/common/run_holder.hpp — where `admit run --redis` keeps what `admit inspect` shows of a run that holds or waits:
// its entry (host, pid, command line, start, the lease's lifetime) as JSON under run_holder_key(name, id), id being
// the waiter's id while it waits and the lease's (the same) once admitted, in the same hash slot as the limit's keys.
// Written by cli/run/redis_source.cpp, read by cli/inspect/redis_inspect.cpp. An entry lives 3 × the lease's lifetime
// and its run writes it again every lifetime while it waits or holds, and deletes it when it ends.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "cli/common/local_limit.hpp"

namespace admit::cli {

// "{name}:run:<id>".
[[nodiscard]] inline std::string run_holder_key(const std::string& name, const std::string& id) {
  return "{" + name + "}:run:" + id;
}

// "{name}:run-classes": the names of the limit's --classes, as `admit run --classes` gives them ("a=0.75,b=0.25").
// The limit's definition in Redis holds the classes' shares by position only; the runs keep their names beside it.
[[nodiscard]] inline std::string run_classes_key(const std::string& name) { return "{" + name + "}:run-classes"; }

// A run's entry: who it is, and how long its lease lives unless renewed.
struct run_entry {
  run::entry_info info;  // started_unix_ms: when it joined the queue (a waiter) or was admitted (a holder)
  std::chrono::milliseconds lease_ttl{0};
};

[[nodiscard]] std::string to_json(const run_entry& e);
// nullopt for text that is not a run's entry (another program's key, a damaged value).
[[nodiscard]] std::optional<run_entry> parse_run_entry(std::string_view text);

// Why the run of `e` is dead, in words ("pid 4711 is gone"), or nullopt when nothing says so. On this host (its host
// name is this one's), a pid that no longer exists; anywhere, for a holder (`lease_left`: its lease's time left), a
// lease its run has not renewed for two of its renewal periods (a run renews every third of the lifetime: less than
// a third left). A stopped (SIGSTOP) run whose lease runs out is named as not renewed too: it may come back, its
// lease is lost all the same.
[[nodiscard]] std::optional<std::string> run_entry_death(const run_entry& e,
                                                         std::optional<std::chrono::microseconds> lease_left);

// Why the run of `e` is stopped, in words ("pid 4711 is stopped (SIGSTOP, Ctrl-Z): ..."), or nullopt when it is not
// or nothing says so: on this host only, a pid whose state in /proc/<pid>/stat is T or t (stopped by a signal or a
// tracer). A stopped run of a local limit keeps what it has — a holder its permits, a waiter its place, holding back
// everyone behind it — until it is continued (SIGCONT) or killed; on Redis, until its lease or waiter TTL runs out.
[[nodiscard]] std::optional<std::string> run_entry_stopped(const run_entry& e);

}  // namespace admit::cli
