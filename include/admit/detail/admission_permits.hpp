// admit/detail/admission_permits.hpp — where one class of admit::admission gets its permits and where they come back:
// a semaphore_state engine (admit::permit releases into it) with a watch always queued on it, so that every release
// takes the engine's slow path and reaches the admission's callback.
//
// The engine's count is not the limit: the admission counts the permits it hands out itself. The engine holds one
// permit of its own (taken at construction) and the watch waits for one more; a release hands that unit to the watch
// and calls back (without the engine's lock), and take_back() collects every permit released meanwhile and queues the
// watch again. Thread safety: release from any thread; take_back() under the admission's mutex.
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
    (void)take_back();  // takes the engine's one initial permit (not a request's)
  }
  admission_permits(const admission_permits&) = delete;
  admission_permits& operator=(const admission_permits&) = delete;
  ~admission_permits() { (void)engine_.cancel_wait(watch_); }

  // What admit::permit releases into.
  semaphore_state& engine() noexcept { return engine_; }

  // Takes back every permit released into the engine and queues the watch again; returns how many it took (the unit
  // that called back is not counted: the caller adds it). Releases that race with it either add to what it takes or
  // find the watch queued (and call back).
  std::int64_t take_back() noexcept {
    std::int64_t got = 0;
    for (;;) {
      const std::int64_t free = engine_.available();
      if (free > 0 && engine_.try_acquire(free)) {
        got += free;
        continue;
      }
      watch_.needed = 1;
      const auto begun = engine_.begin_wait(watch_);
      if (begun.queued) return got;
      if (begun.error != errc{}) return got;  // cannot happen: never closed, capacity 1, no waiter bound
      got += 1;
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
};

}  // namespace admit::detail
