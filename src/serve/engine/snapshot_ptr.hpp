// serve/engine/snapshot_ptr.hpp — a std::shared_ptr<const T> that one writer replaces while many readers take
// copies: the configuration a decision starts on, the backend's table of rule states.
//
//   snapshot_ptr<const table> current{std::make_shared<const table>()};
//   std::shared_ptr<const table> t = current.load();   // stays valid however often it is replaced meanwhile
//
// A mutex held for the copy of one pointer (a reference count increment), not std::atomic<std::shared_ptr>: the
// latter in libstdc++ 12 locks a bit of the pointer word that ThreadSanitizer cannot see, so every use under the
// tsan preset would be reported as a race. Uncontended this costs about as much as the atomic form.
//
// Thread safety: load and store may be called concurrently.
#pragma once

#include <memory>
#include <utility>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::serve {

template <class T>
class snapshot_ptr {
 public:
  explicit snapshot_ptr(std::shared_ptr<T> p = {}) : p_(std::move(p)) {}
  [[nodiscard]] std::shared_ptr<T> load() const {
    const admit::detail::lock_guard lock(mutex_);
    return p_;
  }
  void store(std::shared_ptr<T> next) {
    std::shared_ptr<T> old;
    {
      const admit::detail::lock_guard lock(mutex_);
      old = std::exchange(p_, std::move(next));
    }  // the old one is released outside the lock: its destructor may be long (a configuration, a table of states)
  }

 private:
  mutable admit::detail::mutex mutex_;
  std::shared_ptr<T> p_ ADMIT_GUARDED_BY(mutex_);
};

}  // namespace admit::serve
