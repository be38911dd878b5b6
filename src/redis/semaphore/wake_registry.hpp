// redis/semaphore/wake_registry.hpp — the waiters of one semaphore object that a grant can wake, by their ids: the
// wake-up loop (wakeup.cpp) hands it what BLMPOP took from the object's wake list, and a release or a cancel the
// grants its own reply carries; each grant goes to its waiter's callback, and a grant for an id nobody waits on any
// more is dropped (the waiter's leave finds its lease in Redis and gives it back).
//
// A grant travels as "id:n:token:expiry_us:now_us" and reaches the callback as {0, n, token, expiry_us, now_us} (a
// granted reply of the script), or empty when it cannot be read (the waiter then asks with a poll).
//
// Thread safety: every member may be called concurrently. Callbacks run under the registry's lock, on the thread
// that delivers: they must not block or call back into the registry (the waiters' post to their strands).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/redis/client/reply.hpp"

namespace admit::redis::detail {

class wake_registry {
 public:
  using grant = std::vector<std::int64_t>;
  using callback = std::function<void(const grant&)>;

  // Registers waiter `id`. True when the wake-up loop must be started: it was not running (and is counted as
  // running from now on).
  [[nodiscard]] bool add(const std::string& id, callback on_wake);
  void remove(const std::string& id);
  // Hands every grant among the string elements of `grants` from index `from` on to its waiter.
  void deliver(const reply& grants, std::size_t from);
  // For the wake-up loop, before each wait: false (and the loop is counted as stopped) once nobody waits or
  // `closing`; the next add() then starts it again.
  [[nodiscard]] bool keep_running(bool closing);

  // "id:n:token:expiry_us:now_us" -> {0, n, token, expiry_us, now_us}; empty when unreadable.
  static grant parse(const std::string& text);

 private:
  admit::detail::mutex mutex_;
  std::unordered_map<std::string, callback> waiters_ ADMIT_GUARDED_BY(mutex_);
  bool running_ ADMIT_GUARDED_BY(mutex_) = false;
};

}  // namespace admit::redis::detail
