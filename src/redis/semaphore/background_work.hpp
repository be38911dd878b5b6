// redis/semaphore/background_work.hpp — the work a semaphore object sends and does not wait for (releases from a
// completion handler, the queue-leaves of cancelled waits), counted from its start to Redis's answer, so that
// semaphore::shutdown() can wait for it: how many are still in flight, how many were not delivered, and the first
// failure since the last drain.
//
//   background_work work;
//   work.begin();                                  // before the call is sent
//   ...                                            // its answer, on another thread:
//   work.end(delivered, why);                      // why: the failure when not delivered
//   auto [undelivered, first_failure] = work.drain(deadline);
//
// Thread safety: every member may be called concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <system_error>
#include <utility>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::redis::detail {

class background_work {
 public:
  // What a drain reports: the pieces of work not delivered (failed, or still in flight at the drain's deadline) since
  // the last drain, and the first failure among them (errc::timeout when some were still in flight).
  using drained = std::pair<std::size_t, std::error_code>;

  // One piece of work starts.
  void begin();
  // One piece of work ends: delivered (Redis answered it), or not, for `why`. Runs the when_drained callbacks
  // waiting for the last one, on this thread, without the lock held.
  void end(bool delivered, std::error_code why);
  // Waits until nothing is in flight or `deadline`; returns what was not delivered since the last drain, and starts
  // counting again.
  drained drain(std::chrono::steady_clock::time_point deadline);
  // Calls `done` once nothing is in flight (at once if nothing is; else on the thread of the last end()), with what a
  // drain would return then.
  void when_drained(std::function<void(std::size_t, std::error_code)> done);

 private:
  // What was not delivered since the last drain, counted again from zero.
  drained take_failures() ADMIT_REQUIRES(mutex_);

  admit::detail::mutex mutex_;
  std::condition_variable idle_;  // notified when in_flight_ falls
  std::size_t in_flight_ ADMIT_GUARDED_BY(mutex_) = 0;
  std::size_t undelivered_ ADMIT_GUARDED_BY(mutex_) = 0;
  std::error_code first_failure_ ADMIT_GUARDED_BY(mutex_);
  std::vector<std::function<void(std::size_t, std::error_code)>> drain_waiters_ ADMIT_GUARDED_BY(mutex_);
};

}  // namespace admit::redis::detail
