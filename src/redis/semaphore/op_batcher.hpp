// src/redis/semaphore/op_batcher.hpp — one semaphore object's script calls, several operations to a call (private to
// src/redis/semaphore/). An operation asked for while fewer than max_in_flight calls are unanswered leaves at once,
// alone; one asked for while they all are waits, and leaves with the others that waited — in order, at most
// max_batch to a call — as soon as one of those calls is answered. So a lone caller pays no wait, and under load
// semaphore.lua's fixed work (the call, the clock, the semaphore's own fields, the expiry check) is shared by the
// operations of a call instead of being done for each.
//
//   op_batcher b(sender);
//   b.submit({{"release", id, wake_key, "1"}, deadline, done}, owner);  // done(error_code, reply): its own reply
//
// Order: the operations of a call run in the order they were submitted, and a call is on the connection's queue when
// send returns, so one thread's operations reach Redis in the order it submitted them (as separate calls would).
// Between threads there is no order, as between separate calls. An operation whose deadline passed while it waited
// completes
// with errc::timeout, never sent (one that did not wait is sent: the connection completes it unsent if its
// deadline has passed). A call's failure (no answer, connection lost, an error reply to the whole call)
// is each of its operations' outcome. Thread safety: submit may be called from any thread. Completions never run
// within submit: they run on the thread that answers the call (the connection's executor), or, for an operation
// that waited past its deadline, on the thread whose call's answer let it leave (that executor, or a blocking
// caller's thread in end_alone).
#pragma once

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/redis/client/reply.hpp"

namespace admit::redis::detail {

class op_batcher {
 public:
  using steady = std::chrono::steady_clock;
  using completion = std::function<void(boost::system::error_code, reply)>;

  struct op {
    std::vector<std::string> args;  // the operation's name, then its own arguments (semaphore.lua's A[3] onwards)
    std::optional<steady::time_point> deadline;  // std::nullopt: none
    completion done;                             // called exactly once
  };

  // Sends one script call running `ops` in order (one: that operation's own call; more: a `batch` call) until
  // `deadline`, and calls `answered` once with the call's outcome.
  using sender =
      std::function<void(const std::vector<op>& ops, std::optional<steady::time_point> deadline, completion answered)>;

  // Two calls in flight: Redis runs one while the other's reply travels and the next one forms.
  static constexpr std::size_t max_in_flight = 2;
  // At most this many operations to a call: a call blocks the server for its whole run.
  static constexpr std::size_t max_batch = 32;

  explicit op_batcher(sender send) : send_(std::move(send)) {}

  // Sends `o` now, or queues it behind the calls in flight. `owner` is kept alive until the call carrying `o` is
  // answered (the object the sender belongs to).
  void submit(op o, std::shared_ptr<void> owner);

  // Takes a slot for a call of one operation that the caller sends itself (a blocking call, which waits on its own
  // thread: the fastest way for a lone caller), when a slot is free and nothing waits; then true, and the caller
  // calls end_alone once the call is answered or given up (whatever waited for the slot meanwhile leaves then).
  [[nodiscard]] bool begin_alone();
  void end_alone(std::shared_ptr<void> owner);

  // The calls sent so far and the operations they carried (for tests and statistics).
  [[nodiscard]] std::pair<std::size_t, std::size_t> sent() const;

 private:
  struct call_guard;
  struct call_in_sending;
  // `waited`: the operations come from the queue (those past their deadline are then completed, not sent).
  // `sending` holds send_mutex_ and is released once the call is on the connection.
  void send(std::vector<op> ops, std::shared_ptr<void> owner, bool waited, std::unique_lock<std::mutex>& sending);
  void answered(std::vector<op>& ops, boost::system::error_code ec, reply r, const std::shared_ptr<void>& owner);
  // A batch call's reply cut into its `ops` operations' replies (semaphore.lua's `batch`: each as its length and
  // elements, an error as -1 and the error); empty when it is not such a reply (then `r` is left as it was).
  static std::vector<reply> split(reply&& r, std::size_t ops);
  std::vector<op> take_queued() ADMIT_REQUIRES(mutex_);
  // A call's slot is free: what waited leaves in it, else it is given back.
  void pass_slot_on(const std::shared_ptr<void>& owner);

  sender send_;
  // Held from taking operations out of the queue (or a submit's own) until their call is on the connection, so that
  // calls reach the connection in the order they formed. A call answered at once, on the sending thread, within the
  // sender, is handled once the send returns and this is released (call_in_sending), so nothing takes it twice.
  // Taken before mutex_. It guards no data (it orders the calls), so it is not annotated for clang's analysis.
  std::mutex send_mutex_;
  mutable admit::detail::mutex mutex_;
  std::vector<op> queued_ ADMIT_GUARDED_BY(mutex_);
  std::size_t in_flight_ ADMIT_GUARDED_BY(mutex_) = 0;  // calls sent and not yet answered
  std::size_t calls_ ADMIT_GUARDED_BY(mutex_) = 0;
  std::size_t ops_ ADMIT_GUARDED_BY(mutex_) = 0;
};

}  // namespace admit::redis::detail
