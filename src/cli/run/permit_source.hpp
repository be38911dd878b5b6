// cli/run/permit_source.hpp — where `admit run`'s permit comes from: this host (local_source, cli/run/local_source.hpp)
// or Redis (cli/run/redis_source.hpp). run.cpp waits through this interface and knows neither.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

#include "cli/common/local_limit.hpp"

namespace admit::cli::run {

// What giving a permit back found.
struct release_result {
  std::optional<std::string> problem;  // the release could not be confirmed: why (the permit then expires by itself)
  bool found_lost = false;             // the permit was no longer held when the command ended (a Redis lease lost)
};

// A permit held while the command runs. Destroying it releases it (and waits for that to be done, bounded).
class held_permit {
 public:
  virtual ~held_permit() = default;
  virtual std::string lease_id() const = 0;
  virtual std::int64_t fencing_token() const = 0;
  // A file descriptor the command inherits (the local permit's lock), or -1.
  virtual int inherited_fd() const { return -1; }
  // A file descriptor that becomes readable when the permit is lost (a Redis lease that expired), or -1 (never).
  virtual int lost_fd() const { return -1; }
  // Called now and then while the command runs (at most every maintenance_interval()): e.g. refreshing what
  // `admit inspect` shows of this holder. Must not block for long.
  virtual void maintain() {}
  virtual std::optional<std::chrono::nanoseconds> maintenance_interval() const { return std::nullopt; }
  // Gives the permit back now.
  virtual release_result release() = 0;
};

// Why there is no permit.
struct refusal {
  std::error_code error;  // admit::errc::timeout, would_block, queue_full, cancelled, exceeds_capacity, or Redis's
  std::string message;    // for the user: what happened and, for Redis, the server
  std::string reason;     // the "reason" of the not_admitted event when the error alone does not say it ("redis")
  int exit_status = 75;   // exit_not_admitted, or 69 / 2 for a Redis failure waiting cannot fix / bad input
};

// The message of a queue that is full: with --max-waiters N, N or more wait (how many exactly is not known).
inline std::string queue_full_message(std::size_t max_waiters, const std::string& what) {
  if (max_waiters == 0) return "not admitted: " + what + " is busy and --max-waiters 0 lets nobody wait";
  return "not admitted: " + std::to_string(max_waiters) + " or more already wait for " + what + " (--max-waiters " +
         std::to_string(max_waiters) + ")";
}

class permit_source {
 public:
  virtual ~permit_source() = default;
  // Waits for the permit (no_wait: only now; deadline: until then; stop: until requested), blocking. `progress` is
  // called once the request waits in the queue, and then, when `status_line` (a terminal shows the waiting), as the
  // state changes or at least twice a second: from this thread as local_limit::acquire does, or from another (the
  // Redis source, with position 0: unknown).
  virtual std::unique_ptr<held_permit> acquire(std::optional<std::chrono::steady_clock::time_point> deadline,
                                               bool no_wait, std::stop_token stop,
                                               const std::function<void(const wait_progress&)>& progress,
                                               bool status_line, refusal& why) = 0;
};

}  // namespace admit::cli::run
