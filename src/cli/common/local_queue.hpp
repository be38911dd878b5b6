// cli/common/local_queue.hpp — the files of one local limit (see local_limit.hpp for the design): the name's directory,
// its `lock`, `sequence` and `rate` files and the entries `w.<ticket>` / `h.<ticket>`. Internal to local_limit.cpp.
//
// Every function that reads or changes the queue must be called while holding the lock that queue_dir::lock() returns:
// that is what makes the liveness test (flock LOCK_NB on an entry) sound, because an entry is created and flock'ed by
// its owner in one hold of `lock` (create_entry), so no checker can see an entry that is not yet locked.
// Errors of the file system throw std::system_error naming the path.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/common/local_limit.hpp"
#include "cli/common/unique_fd.hpp"

namespace admit::cli::run::local {

using run::unique_fd;

// One entry as read from its file (live entries only).
struct entry_record {
  std::uint64_t ticket = 0;
  bool holder = false;  // h.<ticket> (admitted), else w.<ticket> (waiting)
  std::int64_t weight = 1;
  std::size_t priority = 0;  // the class it asks in (an index into its definition's classes)
  entry_info info;
  std::optional<limit_definition> definition;  // absent in an entry written before definitions were kept
};

// `w.<ticket>` or `h.<ticket>`, the ticket zero-padded to 20 digits.
std::string entry_name(bool holder, std::uint64_t ticket);
// The reverse: whether it names a holder, and its ticket; nullopt for any other name.
std::optional<std::pair<bool, std::uint64_t>> parse_entry_name(const char* name);

// /tmp/admit-<uid>: this user's directory of limits when no other is named (see default_lock_directory).
std::filesystem::path per_user_tmp_directory();
// $XDG_RUNTIME_DIR/admit when XDG_RUNTIME_DIR names a directory of this user's: an absolute path (the XDG Base
// Directory specification has a relative one ignored) to an existing directory that this user owns. Else nullopt:
// after `su` without `-`, root's environment still names the user's runtime directory, and a directory of root's made
// in it would lock the user out of every limit.
std::optional<std::filesystem::path> runtime_directory();
// Throws std::system_error (EACCES) naming `directory` and what is wrong unless it is a directory (not a symbolic
// link) of this user that nobody else can write; nothing when it does not exist. Its what() is the message alone.
void check_private(const std::filesystem::path& directory);

// The directory `<directory>/<name>/`, opened. `create`: creates it (and `directory`, mode 0700, with its parents)
// when absent; otherwise an absent name leaves exists() false. When `directory` is one of this user's default ones —
// per_user_tmp_directory(), in /tmp, where anyone may have made it first, or runtime_directory(), where root may have
// — it must be a directory (not a symbolic link) of this user that nobody else can write: otherwise
// std::system_error (EACCES) naming its owner and mode.
class queue_dir {
 public:
  queue_dir(const std::filesystem::path& directory, const std::string& name, bool create);
  bool exists() const noexcept { return static_cast<bool>(dir_); }
  const std::filesystem::path& path() const noexcept { return path_; }
  int fd() const noexcept { return dir_.get(); }
  // Takes flock(LOCK_EX) on `lock` (creating it), blocking; the lock is held until the returned fd is closed.
  unique_fd lock() const;
  // The same, waiting at most `patience` (tried again after 0.1 ms, doubling to 5 ms): a process stopped (SIGSTOP,
  // Ctrl-Z) while it held the lock holds it until continued. std::nullopt when it was not free in time.
  std::optional<unique_fd> lock_within(std::chrono::milliseconds patience) const;

 private:
  unique_fd open_lock() const;  // `lock`, opened (created) for flock

  std::filesystem::path path_;
  unique_fd dir_;
};

// Under lock: the live entries in ticket order (entries of other processes' owners that are gone are removed).
// Entries this process owns are live (their flock is held on another open file description).
std::vector<entry_record> scan_live(const queue_dir& q);

// Without the lock, a look at one waiter's entry: whether it is still there with its owner alive (its flock held).
// O(1) where scan_live reads every entry; false also when it cannot tell (the caller then scans, under the lock).
// (Testing the flock takes it for a moment when the owner is gone: a scan in that moment keeps the entry one round
// more.)
bool waiter_alive(const queue_dir& q, std::uint64_t ticket);

// Under lock: the next ticket, above both `sequence` and every entry in `seen`; `sequence` is updated.
std::uint64_t next_ticket(const queue_dir& q, const std::vector<entry_record>& seen);

// Under lock: creates `w.<ticket>` (O_EXCL), takes its flock and writes `r`. The fd is close-on-exec.
unique_fd create_entry(const queue_dir& q, const entry_record& r);
// Under lock: replaces the content of the entry open on `fd` by `r` (for the admission's time).
void rewrite_entry(const queue_dir& q, int fd, const entry_record& r);
// Under lock: renames w.<ticket> to h.<ticket>.
void promote_entry(const queue_dir& q, std::uint64_t ticket);
// Under lock: removes the entry (absent already: nothing). Never throws.
void remove_entry(const queue_dir& q, bool holder, std::uint64_t ticket) noexcept;

// The clock the rate state counts on: CLOCK_MONOTONIC nanoseconds of this boot.
struct clock_reading {
  std::int64_t now_ns = 0;  // CLOCK_MONOTONIC
  std::string boot_id;      // /proc/sys/kernel/random/boot_id ("" when unreadable)
};
clock_reading read_clock();
// The rate state as the file `rate` keeps it. `tat_ns` is GCRA's theoretical arrival time (the global token bucket's
// state plus its tolerance: the representation every version of the file has used); `assured_tat_ns` holds each
// class's assured bucket in the token bucket's representation (admit/detail/token_bucket_math.hpp), empty without
// classes.
struct stored_rate {
  std::int64_t tat_ns = 0;
  std::vector<std::int64_t> assured_tat_ns;
};
// Under lock: the stored state when it belongs to this boot (nullopt: none, another boot's, or unreadable).
std::optional<stored_rate> read_rate(const queue_dir& q, const std::string& boot_id);
void write_rate(const queue_dir& q, const std::string& boot_id, const stored_rate& r);

}  // namespace admit::cli::run::local
