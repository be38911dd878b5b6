// redis/semaphore/open_waits.hpp — the waits of one semaphore object still in progress, each with the function that
// ends it. Closing the set (the semaphore object destroyed) ends them all, as destroying an I/O object ends its
// operations: otherwise they would wait on, and their handlers run with leases after the object is gone.
//
//   open_waits waits;
//   open_waits::ticket t;  // the wait's own
//   waits.add(t, [weak] { if (auto op = weak.lock()) op->cancel(errc::closed); });
//   waits.remove(t);       // the wait completed
//   waits.close();         // calls each function still there, once; a wait added later is ended at once
//
// Thread safety: every member may be called concurrently; the functions run without the lock held (they may call
// remove()).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::redis::detail {

class open_waits {
 public:
  using ticket = std::uint64_t;

  // `t` is written, and read by remove(), under the set's lock: a close() on another thread may end the wait, and
  // the wait remove() itself, before add() has returned.
  void add(ticket& t, std::function<void()> end) {
    {
      const admit::detail::lock_guard lock(mutex_);
      if (!closed_) {
        t = ++last_;
        ends_.emplace(t, std::move(end));
        return;
      }
    }
    end();
  }
  void remove(const ticket& t) {
    std::function<void()> gone;  // (destroyed after the lock is released: it may hold the wait's last reference)
    const admit::detail::lock_guard lock(mutex_);
    if (auto it = ends_.find(t); it != ends_.end()) {
      gone = std::move(it->second);
      ends_.erase(it);
    }
  }
  void close() {
    std::unordered_map<ticket, std::function<void()>> ends;
    {
      const admit::detail::lock_guard lock(mutex_);
      closed_ = true;
      ends.swap(ends_);
    }
    for (auto& [t, end] : ends) end();
  }

 private:
  admit::detail::mutex mutex_;
  std::unordered_map<ticket, std::function<void()>> ends_ ADMIT_GUARDED_BY(mutex_);
  ticket last_ ADMIT_GUARDED_BY(mutex_) = 0;
  bool closed_ ADMIT_GUARDED_BY(mutex_) = false;
};

}  // namespace admit::redis::detail
