// cli/run/options.hpp — `admit run`'s options: the text the command line gives (run_options), checked into what the
// command does (run_settings). Every message names the option and the value and says what would be accepted.
//
//   admit run --concurrency 3 --name db -- ./query.sh 42
//   admit run --redis redis://10.0.0.5:6379 --concurrency 3 --rate 10/s --name db -- psql -f job.sql
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "admit/priority_class.hpp"
#include "admit/rate.hpp"

namespace admit::cli::run {

// Exit statuses of `admit run` besides the command's own (which it passes through, 128+N for a signal N).
inline constexpr int exit_not_admitted = 75;   // sysexits' EX_TEMPFAIL: the command did not run
inline constexpr int exit_cannot_create = 73;  // sysexits' EX_CANTCREAT: the lock directory cannot be made or used
inline constexpr int exit_lease_lost = 124;    // the permit was lost while the command ran (as timeout(1)'s 124)
inline constexpr int exit_not_executable = 126;
inline constexpr int exit_not_found = 127;

// What happens to the command when its lease is lost.
enum class lease_lost_action { term, kill, ignore };

// As the command line gives them (CLI11 fills these; check() reads them).
struct run_options {
  std::string name;
  std::optional<std::string> concurrency, weight, rate, burst, redis, lock_dir, timeout, max_waiters, lease_ttl,
      kill_after, classes, class_name;
  std::string on_lease_lost = "term";
  bool no_wait = false, quiet = false, json = false;
  bool set_capacity = false;         // --redis: make --concurrency the semaphore's capacity
  std::vector<std::string> command;  // COMMAND [ARGS...]
};

struct run_settings {
  std::string name;
  std::int64_t concurrency = 0;  // 0: no concurrency limit
  std::int64_t weight = 1;
  std::optional<admit::rate> rate;
  std::string rate_text;  // --rate as given, for the messages that name it
  std::int64_t burst = 1;
  // --classes: the limit's priority classes and their shares (part of its definition; empty: none), and --class: this
  // run's, an index into them.
  std::vector<admit::priority_class> classes;
  std::size_t priority = 0;
  std::optional<std::string> redis;      // the URL
  std::filesystem::path lock_directory;  // local only
  std::optional<std::chrono::nanoseconds> timeout;
  bool no_wait = false;
  std::optional<std::size_t> max_waiters;
  std::chrono::nanoseconds lease_ttl = std::chrono::seconds(10);
  lease_lost_action on_lease_lost = lease_lost_action::term;
  std::chrono::nanoseconds kill_after = std::chrono::seconds(10);
  bool quiet = false, json = false;
  // With --redis: a limit that exists with another definition (--concurrency, --rate, --burst) gets this run's, for
  // the whole fleet (without it, such a limit is refused: two definitions for one name would each hold for nobody).
  bool set_capacity = false;
  std::vector<std::string> command;
};

// Checks the options (usage_error naming the option and value): --name and COMMAND required, at least one of
// --concurrency and --rate (a rate of inf limits nothing), --weight at most --concurrency and --burst, --burst only
// with --rate, --lease-ttl, --on-lease-lost, --kill-after and --set-capacity only with --redis (--set-capacity also
// needs --concurrency), --lock-dir only without, --no-wait not with --timeout, --classes (two or more NAME=SHARE, the
// shares from 0 to 1 and summing to at most 1), --class one of them.
run_settings check(const run_options& options);

// What a run refused at the end of --timeout says: "not admitted: no permit of WHERE within --timeout 2s" (with a
// rate alone, "no start by the rate of WHERE"; with both, "no permit of WHERE with a start by its rate").
std::string not_admitted_in_time(const run_settings& s, const std::string& where);

}  // namespace admit::cli::run
