// redis/semaphore/wake_registry.hpp — the waiters of one semaphore object that a grant can wake, by their ids, and the
// wake-up loop that brings the grants: while anyone waits, a client of the registry's own blocks in BLMPOP on the
// object's wake list, where semaphore.lua pushes each grant it makes to one of its waiters, and each grant goes to its
// waiter's callback. A release or a cancel hands over the grants its own reply carries (deliver) without the loop. A
// grant for an id nobody waits on any more is dropped (the waiter's leave finds its lease in Redis and gives it back).
// Nobody else is woken; a lost wake-up costs at most the waiters' poll interval (they poll as a backstop).
//
// A grant travels as "id:n:token:expiry_us:now_us" and reaches the callback as {0, n, token, expiry_us, now_us} (a
// granted reply of the script), or empty when it cannot be read (the waiter then asks with a poll).
//
// The loop runs from the first add() while anyone is registered, one BLMPOP at a time on the waker client's executor,
// each blocking for at most poll_interval; after a failed BLMPOP (Redis away) it pauses poll_interval before the next.
// It stops when nobody waits (the next add() starts it again) and for good after close(), which also closes the waker
// client so that a BLMPOP in flight ends at once.
//
// Thread safety: every member may be called concurrently. Callbacks run under the registry's lock, on the thread that
// delivers: they must not block or call back into the registry (the waiters post to their strands). The loop's
// handlers keep the registry alive (it is made by make_shared and owned by a shared_ptr).
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/redis/client/client.hpp"
#include "admit/redis/client/reply.hpp"

namespace admit::redis::detail {

class wake_registry : public std::enable_shared_from_this<wake_registry> {
 public:
  using grant = std::vector<std::int64_t>;
  using callback = std::function<void(const grant&)>;

  // `waker`: a client of the same server(s), used only for the blocking BLMPOP on `wake_key`; `close_waker` closes it
  // (called once, by close()). `poll_interval` (at least 1 ms is used) bounds each BLMPOP's block; `timeout` is added
  // to it for the call's deadline. A null `waker`: no loop ever runs (the waiters learn of grants by their polls, and
  // from the replies handed to deliver).
  wake_registry(std::unique_ptr<client> waker, std::function<void()> close_waker, std::string wake_key,
                std::chrono::milliseconds poll_interval, std::chrono::milliseconds timeout);
  wake_registry(const wake_registry&) = delete;
  wake_registry& operator=(const wake_registry&) = delete;

  // Registers waiter `id` (replacing a callback registered under it) and starts the loop when it is not running.
  void add(const std::string& id, callback on_wake);
  void remove(const std::string& id);
  // Hands every grant among the string elements of `grants` from index `from` on to its waiter.
  void deliver(const reply& grants, std::size_t from);
  // Stops the loop for good and closes the waker client. Registered waiters stay registered (deliver still reaches
  // them); they learn of grants by their polls.
  void close();

  const std::string& wake_key() const noexcept { return wake_key_; }

  // "id:n:token:expiry_us:now_us" -> {0, n, token, expiry_us, now_us}; empty when unreadable (a field missing or not
  // a decimal integer).
  static grant parse(std::string_view text);

 private:
  // One BLMPOP, then the next, while keep_running(); on the waker's executor.
  void loop();
  // Before each wait: false (and the loop counted as stopped) once nobody waits or after close().
  bool keep_running();
  bool keep_running_locked() ADMIT_REQUIRES(mutex_);
  // After a failed BLMPOP (Redis away): the next one after a pause of poll_interval, unless the loop stops now (as
  // keep_running()).
  void pause_then_loop();

  std::unique_ptr<client> waker_;
  std::function<void()> close_waker_;
  std::string wake_key_;
  std::chrono::milliseconds poll_interval_;
  std::chrono::milliseconds timeout_;

  // Looked up by a grant's id as a view into its text (no copy of the id per grant).
  struct id_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view id) const noexcept { return std::hash<std::string_view>{}(id); }
  };

  admit::detail::mutex mutex_;
  std::unordered_map<std::string, callback, id_hash, std::equal_to<>> waiters_ ADMIT_GUARDED_BY(mutex_);
  bool running_ ADMIT_GUARDED_BY(mutex_) = false;
  bool closed_ ADMIT_GUARDED_BY(mutex_) = false;
  // The pause after a failed BLMPOP: armed by the loop and cancelled by close(), each under mutex_ (they may run on two
  // threads), so that a pause never keeps the waker's executor busy after close().
  std::optional<boost::asio::steady_timer> pause_ ADMIT_GUARDED_BY(mutex_);
};

}  // namespace admit::redis::detail
