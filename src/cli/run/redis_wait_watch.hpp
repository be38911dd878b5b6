// cli/run/redis_wait_watch.hpp — what a waiting `admit run --redis` tells while it waits (private to cli/run/): the
// "waiting" event and, on a terminal, a status line kept up to date; once each time Redis goes away and comes back,
// that it cannot be reached and why (refused or lost — the client's own state — or connected and silent, which a PING
// a second finds), and that it answers again, also when the wait ends as soon as it does. It also writes the waiter's
// entry for `admit inspect` again every --lease-ttl.
//
//   redis_run::wait_watch watch(st, deadline, progress, status_line);  // from the moment the wait is queued
//   ... the wait ...
//   watch.finish(/*redis_answered=*/true);
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "cli/common/local_limit.hpp"
#include "cli/run/redis_run_state.hpp"

namespace admit::cli::redis_run {

class liveness_probe;

class wait_watch {
 public:
  using progress_fn = std::function<void(const run::wait_progress&)>;
  // Watches `st`'s wait from the moment it is queued (st.on_queued is this watch's until finish()). `progress` (may be
  // empty) hears what is told; it must outlive the watch. Each inspect call ends by `deadline` + past_deadline, so that
  // ending the watch cannot hold the run past --timeout.
  wait_watch(state& st, std::optional<steady::time_point> deadline, const progress_fn& progress, bool status_line);
  ~wait_watch();
  wait_watch(const wait_watch&) = delete;
  wait_watch& operator=(const wait_watch&) = delete;

  // Ends the watch (its thread joined); then, when the last thing told was that Redis could not be reached and
  // `redis_answered` (the wait ended by Redis's answer), tells that it answers again. Idempotent.
  void finish(bool redis_answered);

 private:
  void watch(const std::stop_token& done);

  state& st_;
  std::optional<steady::time_point> deadline_;
  const progress_fn& progress_;
  bool status_line_;
  admit::detail::mutex mutex_;
  std::condition_variable_any cv_;
  bool queued_ ADMIT_GUARDED_BY(mutex_) = false;
  // Touched by the watch's thread only, then by finish() once it is joined.
  bool trouble_told_ = false;  // the last thing told was that Redis could not be reached
  run::wait_progress last_;    // as told last: told again with the trouble when Redis goes away or comes back
  std::shared_ptr<liveness_probe> probe_;
  bool finished_ = false;
  std::jthread thread_;  // last: started once everything it uses is made
};

}  // namespace admit::cli::redis_run
