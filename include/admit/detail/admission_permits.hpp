// admit/detail/admission_permits.hpp — where one class of admit::admission gets its permits and where they come back:
// a semaphore_state engine (admit::permit releases into it), watched while requests wait.
//
// The engine's count is not the limit: the admission counts the permits it hands out itself, and the engine's count is
// the permits released since the admission last collected them. Two modes, switched under the admission's mutex:
// - disarmed (nobody waits): a release is the engine's lock-free fetch_add; the admission collects what came back
//   (reclaim) at its next decision. An uncontended admission and release cost no engine lock and no callback.
// - armed (requests wait): a watch is queued on the engine, so that a release hands it one unit and calls back
//   (without the engine's lock); the callback collects every permit released meanwhile and queues the watch again,
//   and the admission serves its waiters.
// Thread safety: release from any thread; every member under the admission's mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "admit/detail/semaphore_state.hpp"
#include "admit/errc.hpp"

namespace admit::detail {

class admission_permits {
 public:
  using on_release_fn = void (*)(void* owner, std::size_t cls) noexcept;

  admission_permits(void* owner, std::size_t cls, on_release_fn on_release) noexcept {
    watch_.owner = owner;
    watch_.cls = cls;
    watch_.on_release = on_release;
    watch_.notify = &watch::notified;
    (void)reclaim();  // the engine's one initial permit (not a request's)
  }
  admission_permits(const admission_permits&) = delete;
  admission_permits& operator=(const admission_permits&) = delete;
  ~admission_permits() {
    if (armed_ && !callback_due_) (void)engine_.cancel_wait(watch_);
  }

  // What admit::permit releases into.
  semaphore_state& engine() noexcept { return engine_; }
  const semaphore_state& engine() const noexcept { return engine_; }

  // Takes every permit released into the engine (disarmed, or before queueing the watch); returns how many.
  std::int64_t reclaim() noexcept {
    std::int64_t got = 0;
    for (std::int64_t free = engine_.available(); free > 0; free = engine_.available()) {
      if (engine_.try_acquire(free)) got += free;
    }
    return got;
  }

  // Switches to armed: from now on every release calls back. Returns the permits released before (collected).
  std::int64_t arm() noexcept {
    armed_ = true;
    return callback_due_ ? reclaim() : queue_watch();  // a callback still due queues the watch when it runs
  }
  // Switches to disarmed: releases no longer call back. Returns the permits released before (collected).
  std::int64_t disarm() noexcept {
    armed_ = false;
    if (!callback_due_ && !engine_.cancel_wait(watch_)) callback_due_ = true;  // granted first: its callback comes
    return reclaim();
  }

  // The callback's share of the work: collects every permit released meanwhile and, armed, queues the watch again.
  // Returns how many it took (the unit that called back is not counted: the caller adds it).
  std::int64_t called_back() noexcept {
    callback_due_ = false;
    return armed_ ? queue_watch() : reclaim();
  }

 private:
  // Queues the watch, collecting what was released first. Releases that race with it either add to what it takes or
  // find the watch queued (and call back).
  std::int64_t queue_watch() noexcept {
    std::int64_t got = reclaim();
    for (;;) {
      watch_.needed = 1;
      const auto begun = engine_.begin_wait(watch_);
      if (begun.queued) return got;
      if (begun.error != errc{}) return got;  // cannot happen: never closed, capacity 1, no waiter bound
      got += 1 + reclaim();
    }
  }

 private:
  struct watch : semaphore_waiter {
    void* owner = nullptr;
    std::size_t cls = 0;
    on_release_fn on_release = nullptr;
    static void notified(semaphore_waiter* w) noexcept {
      auto* self = static_cast<watch*>(w);
      self->on_release(self->owner, self->cls);
    }
  };

  semaphore_state engine_{1, std::numeric_limits<std::size_t>::max()};
  watch watch_;
  bool armed_ = false;         // the watch is queued, or its callback is due
  bool callback_due_ = false;  // the watch was granted (a release) and its callback has not run yet
};

}  // namespace admit::detail
