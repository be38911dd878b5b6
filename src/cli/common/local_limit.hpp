// cli/common/local_limit.hpp — `admit run`'s limit on one host, with no server: at most `capacity` permits held at once
// by the processes that use the same directory and name, and optionally at most `rate` starts, as one admission with
// admit::admission's decisions: FIFO, and with priority classes their guaranteed shares (each class FIFO).
//
//   local_limit limit({.directory = lock_directory(), .name = "db", .capacity = 3});
//   auto p = limit.acquire(deadline, stop, progress);   // admit::expected<local_permit, std::error_code>
//   if (p) run(p->inherited_fd());                       // released by p's destructor or release()
//
// How it works (a directory `<directory>/<name>/` of small files; nothing runs in the background):
// - `lock`: every change to the queue, and every liveness test of an entry, is made holding flock(LOCK_EX) on it
//   (microseconds; the kernel frees it when its holder dies, so a crash mid-change blocks nobody). Opened read-only.
// - `sequence`: the last ticket given, read and incremented under `lock`; tickets order the queue (FIFO).
// - One entry per participant, `w.<ticket>` while waiting and `h.<ticket>` once admitted (renamed under `lock`),
//   ticket zero-padded to 20 digits so that names sort as tickets. Its content is one JSON line (entry_info below,
//   plus weight). Its owner holds flock(LOCK_EX) on it for as long as it takes part: an entry whose lock another
//   process can take (LOCK_NB) belongs to a process that is gone, and whoever finds it removes it. An entry is
//   created (O_EXCL), flock'ed and written in one hold of `lock`, and liveness is tested only under `lock`: no one can
//   see an entry that is not yet locked, so a LOCK_NB that succeeds always means the owner is gone. A holder's entry
//   lock is on an open file description that the command inherits (inherited_fd()), so the permit is held until both
//   `admit run` and the command have ended, even when `admit run` is SIGKILLed; release() unlocks it for both.
// - `rate`: the rate state, in CLOCK_MONOTONIC ns with the boot id it belongs to: the token bucket's state (kept as
//   GCRA's theoretical arrival time, its state plus the burst's tolerance, as every version wrote it) and, with
//   classes, each class's assured bucket. A state from an earlier boot or that cannot be read is ignored; one this
//   definition cannot have made at this boot's clock (a slower rate's, say) is clamped to an empty bucket, or a class's
//   bucket to one request's debt, and written back at once. Read and written under `lock`.
// - Admission (under `lock`): the live entries are the queue (holders, and each class's waiters in ticket order), and
//   admit::admission's share rule (admit/detail/admission_rule.hpp) picks which class's head goes next, given the
//   permits held and the buckets. A waiter admits itself when it is the head picked; every other waiter looks again at
//   the next change. Waiters wait on inotify (a release, an admission, a removal, and the last close of an entry's
//   writable description — its owner's exit, even by SIGKILL — wake them), until the time alone could change the
//   decision (its tokens): the head of each class on any change of the holders or of a waiter ahead of it, a waiter
//   behind the head only when the one right ahead of it in its class goes — so a release wakes the heads, not the
//   crowd, and nobody wakes for a newcomer behind it. They re-check every watched_poll_interval besides (every
//   poll_interval without a watch), so a change whose event was missed is found within that time. Within a class only
//   the head may be admitted: a later waiter that would fit waits behind it (strict FIFO, no starvation of heavy
//   weights).
// - A process that forks without exec while one of its threads waits (or holds `lock`) gives the child a copy of that
//   open file description: the entry stays alive (or `lock` held) until the child exits. `admit run` forks only the
//   command, after admission, and the command is meant to inherit the permit.
//
// Thread safety: one local_limit or local_permit per thread; different objects (in one process or many) may be used
// concurrently — that is the point.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "admit/detail/admission_classes.hpp"
#include "admit/expected.hpp"
#include "admit/priority_class.hpp"

namespace admit::cli::run {

// Who takes part: what `admit inspect` shows of each entry.
struct entry_info {
  std::string host;                  // gethostname()
  std::int64_t pid = 0;              // the `admit run` process
  std::string command;               // the command line, arguments joined by spaces (for people to read)
  std::int64_t started_unix_ms = 0;  // when it joined (waiters) or was admitted (holders), Unix time in ms
};

// What a participant says the limit is: local_limit_config's capacity, rate interval, burst and classes. Every
// participant of one name must say the same while any of them takes part; acquire() refuses another
// (definition_conflict).
struct limit_definition {
  std::int64_t capacity = 0;                   // 0: no concurrency limit
  std::int64_t interval_ns = 0;                // 0: no rate
  std::int64_t burst = 1;                      // counts only with a rate
  std::vector<admit::priority_class> classes;  // empty: none (one class with the whole share)
  bool operator==(const limit_definition& o) const noexcept;
};
// The definition as the options that give it: "--concurrency 2 --rate 10/s --burst 5 --classes a=0.75,b=0.25".
std::string describe(const limit_definition& d);

// acquire()'s refusal when a live holder or waiter of the same name gave another definition; what() names both, and
// the process that gave the other.
class definition_conflict : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Now, in ms since the Unix epoch by the system clock (as entry_info::started_unix_ms counts).
std::int64_t unix_time_ms() noexcept;
// This host's name (gethostname(), as entry_info::host holds it); empty when it cannot be read.
std::string host_name();
// How long ago `unix_ms` was, in ns; 0 when it is ahead (another host's clock may be).
std::int64_t ns_since(std::int64_t unix_ms) noexcept;

struct local_limit_config {
  std::filesystem::path directory;  // where the names live (created, mode 0700 when it does not exist)
  std::string name;                 // [A-Za-z0-9._-]+, at most 200 bytes (a file name; not "." or "..")
  std::int64_t capacity = 0;        // permits held at once at most; 0: no concurrency limit (a rate alone)
  // Permits (and rate tokens) this participant takes, >= 1. Above capacity (when capacity > 0) or above burst (with a
  // rate), acquire() fails with errc::exceeds_capacity (the constructor accepts it).
  std::int64_t weight = 1;
  // The rate: one token every `interval` (nullopt: no rate), at most `burst` banked (burst >= 1). At least one of a
  // capacity and a rate is required. burst * interval must be below 2^61 ns.
  std::optional<std::chrono::nanoseconds> interval;
  std::int64_t burst = 1;
  // The priority classes and their guaranteed shares of capacity and of the rate, decided by admit::admission's share
  // rule (admit/detail/admission_rule.hpp); empty: none. Part of the definition. `priority` is this participant's
  // class, an index into them (0 without classes).
  std::vector<admit::priority_class> classes;
  std::size_t priority = 0;
  // Waiters (this one included) that may wait at once; one more fails with errc::queue_full. Counted only when this one
  // must wait: 0 admits when free at once, else fails with queue_full. nullopt: unbounded.
  std::optional<std::size_t> max_waiters;
  // How often a waiter re-checks when it has no inotify watch (the user's watches used up): it finds releases and dead
  // holders and waiters in this time. > 0.
  std::chrono::nanoseconds poll_interval = std::chrono::milliseconds(10);
  // With a watch, the events say when to look again (see above), and a waiter re-checks every
  // max(poll_interval, watched_poll_interval) besides, a backstop for an event it could miss. > 0.
  std::chrono::nanoseconds watched_poll_interval = std::chrono::seconds(1);
  entry_info info;
};

// Throws std::invalid_argument naming the name and what is accepted when `name` cannot name a local limit.
void check_local_name(const std::string& name);

// What a waiter is told while it waits (for the status line and the JSON events).
struct wait_progress {
  std::size_t position = 0;  // in its class's queue (the only queue without classes): 1 = the head
  std::size_t waiting = 0;   // live waiters in all (every class)
  std::int64_t held = 0;     // permits held by live holders
  std::int64_t capacity = 0;
  std::optional<std::chrono::nanoseconds> rate_wait;  // at the head, waiting only for the rate: how much longer
  // With --redis: why Redis cannot be reached now ("cannot connect to redis://...: connection refused"); empty when it
  // can. The wait goes on meanwhile (until --timeout, if any) and resumes where it was once Redis is back.
  std::string trouble;
};

// A held permit. Move-only; the destructor releases.
class local_permit {
 public:
  local_permit() noexcept = default;
  local_permit(local_permit&&) noexcept;
  local_permit& operator=(local_permit&&) noexcept;
  local_permit(const local_permit&) = delete;
  local_permit& operator=(const local_permit&) = delete;
  ~local_permit();

  // Gives the permits back at once (unlocks and removes the entry). Idempotent.
  void release() noexcept;
  // The entry's file descriptor, for the command to inherit (see above); -1 once released. acquire() has cleared its
  // FD_CLOEXEC already (every other descriptor of this file is close-on-exec): any exec'd child keeps the permit held
  // while it lives, unless release() is called.
  int inherited_fd() const noexcept { return fd_; }
  std::uint64_t ticket() const noexcept { return ticket_; }

 private:
  friend class local_limit;
  local_permit(int fd, std::filesystem::path entry, std::filesystem::path lock, std::uint64_t ticket,
               int watch) noexcept;
  int fd_ = -1;
  // The inotify descriptor a waiter watched the queue with, closed only after the release: closing one waits for
  // the kernel's grace period (about 20 ms), which must delay neither the command's start nor the next waiter.
  int watch_ = -1;
  std::filesystem::path entry_, lock_;
  std::uint64_t ticket_ = 0;
};

class local_limit {
 public:
  // Checks the configuration (std::invalid_argument naming the bad value) and creates the directories if needed
  // (`directory` with mode 0700 and its parents, `directory/name` with 0777 less the umask; std::system_error naming
  // the path when it cannot).
  explicit local_limit(local_limit_config config);

  // Joins the queue and waits until admitted (the permit), `deadline` passes (errc::timeout), `stop` is requested
  // (errc::cancelled), or at once: errc::queue_full (max_waiters already wait), errc::exceeds_capacity (weight above
  // capacity, or above burst), and with no_wait errc::would_block when it cannot be admitted now. A wait that ends
  // without a permit has left the queue before this returns. `progress` (may be empty) is called on the calling
  // thread when the state it reports changes (rate_wait: only whether it is set), once before the first wait, and at
  // least every `progress_every` (at least 1 ms). A deadline already past still tries once (as no_wait, but failing
  // with errc::timeout). Errors of the file system: std::system_error naming the path (the entry is removed). A live
  // participant of this name with another definition: definition_conflict, before joining.
  admit::expected<local_permit, std::error_code> acquire(
      std::optional<std::chrono::steady_clock::time_point> deadline, bool no_wait, std::stop_token stop,
      const std::function<void(const wait_progress&)>& progress = {},
      std::chrono::nanoseconds progress_every = std::chrono::milliseconds(250));

  const local_limit_config& config() const noexcept { return config_; }
  limit_definition definition() const;

 private:
  local_limit_config config_;
  detail::admission_plan plan_;  // the configuration as admit::admission's numbers
};

// The live state of `name` under `directory` (dead entries are not listed, and are removed): for `admit inspect`.
struct local_snapshot {
  struct entry {
    std::uint64_t ticket = 0;
    std::int64_t weight = 0;
    std::size_t priority = 0;  // its class (an index into `classes`)
    entry_info info;
  };
  std::vector<entry> holders;  // by ticket
  std::vector<entry> waiters;  // in queue order
};
// Throws std::invalid_argument as check_local_name for a bad name, std::system_error naming the path when the directory
// cannot be read (or its `lock` opened); an absent name is an empty snapshot with `exists` false (nothing is created).
struct local_inspection {
  bool exists = false;
  local_snapshot snapshot;
  // The limit as its live participants define it (nullopt: nobody takes part), and with a rate the whole tokens in its
  // bucket now.
  std::optional<limit_definition> definition;
  std::optional<std::int64_t> tokens;
  // The limit's lock, when another process held it for all of inspect_patience (a run stopped inside its short
  // critical section holds it until continued): nothing else is read then.
  std::optional<std::filesystem::path> lock_held;
};
inline constexpr std::chrono::milliseconds inspect_patience{2000};
local_inspection inspect_local(const std::filesystem::path& directory, const std::string& name);

// The default directory of local limits: $ADMIT_LOCK_DIR when set; else $XDG_RUNTIME_DIR/admit when XDG_RUNTIME_DIR
// is an absolute path to a directory of this user's (local::runtime_directory); else /tmp/admit-<uid>. (Per user by
// default; a directory several users can write shares a limit between them.)
std::filesystem::path default_lock_directory();

}  // namespace admit::cli::run
