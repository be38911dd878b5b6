// admit/detail/annotated_mutex.hpp — std::mutex and its scoped locks, annotated for clang's thread-safety analysis
// (admit/detail/thread_annotations.hpp): libstdc++'s own carry no annotations, so members ADMIT_GUARDED_BY a
// std::mutex could not be checked.
//
//   admit::detail::mutex m;
//   int n ADMIT_GUARDED_BY(m) = 0;
//   { const admit::detail::lock_guard lock(m); ++n; }        // checked: n only with m held
//   admit::detail::unique_lock lock(m);
//   cv.wait(lock.native(), [&] { return n > 0; });            // a std::condition_variable waits on the
//   std::unique_lock
//
// Thread safety: as std::mutex and std::unique_lock.
#pragma once

#include <mutex>

#include "admit/detail/thread_annotations.hpp"

namespace admit::detail {

class ADMIT_CAPABILITY("mutex") mutex {
 public:
  mutex() = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  void lock() ADMIT_ACQUIRE() { m_.lock(); }
  [[nodiscard]] bool try_lock() ADMIT_TRY_ACQUIRE(true) { return m_.try_lock(); }
  void unlock() ADMIT_RELEASE() { m_.unlock(); }
  // The std::mutex itself, for a std::unique_lock that a std::condition_variable waits on (unique_lock::native()).
  std::mutex& native() noexcept { return m_; }

 private:
  std::mutex m_;
};

// std::lock_guard<mutex>, annotated.
class ADMIT_SCOPED_CAPABILITY lock_guard {
 public:
  explicit lock_guard(mutex& m) ADMIT_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~lock_guard() ADMIT_RELEASE() { m_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  mutex& m_;
};

// std::unique_lock<std::mutex> on a mutex, annotated: held from construction until unlock() or destruction, and
// again after lock().
class ADMIT_SCOPED_CAPABILITY unique_lock {
 public:
  explicit unique_lock(mutex& m) ADMIT_ACQUIRE(m) : lock_(m.native()) {}
  ~unique_lock() ADMIT_RELEASE() {}
  unique_lock(const unique_lock&) = delete;
  unique_lock& operator=(const unique_lock&) = delete;

  void lock() ADMIT_ACQUIRE() { lock_.lock(); }
  void unlock() ADMIT_RELEASE() { lock_.unlock(); }
  // For std::condition_variable::wait and wait_until, which give the mutex back while they wait and hold it again
  // when they return: to the analysis it stays held throughout, as it is wherever the caller's code runs.
  std::unique_lock<std::mutex>& native() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace admit::detail
