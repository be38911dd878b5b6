// src/redis/limiter/epoch_tracker.hpp — lost-state detection (private to admit_redis): what one process has seen of a
// limiter's epoch, and whether a new reply reveals that Redis lost state this process wrote.
//
//   epoch_tracker t;
//   if (t.observe({.id = "a1", .seq = 4, .now_us = now, .granted = 1, .reset_us = 1000})) report_lost_state();
//
// The epoch (the hash "{name}" in Redis, see src/redis/lua/common.lua) is an id chosen when it is created and a count
// of admissions (seq) under it; the scripts report both with every decision, with the server time. Two signs of loss:
// - a new id while state this process saw written could still be alive (the epoch outlives every state key written
//   under it, so an epoch that expired naturally comes back only after that state is gone: not a loss);
// - the same id with a lower seq, in a reply of a later server time (a failover to a replica that lacked the last
//   admissions).
// Pure logic on the values passed in: deterministic, no clock, no I/O.
//
// Thread safety: observe() may be called concurrently (one mutex; a few comparisons under it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::redis::detail {

// What one decision's reply says about the epoch. Times are server times in microseconds since the Unix epoch.
struct epoch_sighting {
  std::string_view id;        // the epoch's id; empty when detection is off (observe() then returns false)
  std::int64_t seq = 0;       // admissions counted under the epoch, as of this reply
  std::int64_t now_us = 0;    // the server time of the reply
  bool wrote = false;         // the decision wrote state: it took tokens, or was a refusal charged
  std::int64_t reset_us = 0;  // how long that state lives after now_us (the decision's reset_after)
};

class epoch_tracker {
 public:
  // Records `s` and returns true when it reveals lost state. Reported once: after a loss the tracker follows the new
  // epoch (or the regressed count) and the next replies are judged against it.
  bool observe(const epoch_sighting& s);

 private:
  admit::detail::mutex mutex_;
  std::string id_ ADMIT_GUARDED_BY(mutex_);             // the epoch this process follows; empty before the first one
  std::int64_t seq_ ADMIT_GUARDED_BY(mutex_) = 0;       // the highest seq seen under id_
  std::int64_t seq_time_ ADMIT_GUARDED_BY(mutex_) = 0;  // the server time (µs) of the reply that carried it
  // Server time (µs) until which state this process saw written must still exist.
  std::int64_t state_until_ ADMIT_GUARDED_BY(mutex_) = 0;
};

}  // namespace admit::redis::detail
