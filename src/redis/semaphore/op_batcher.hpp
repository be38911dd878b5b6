// src/redis/semaphore/op_batcher.hpp — one semaphore object's script calls, several operations to a call (private to
// src/redis/semaphore/). semaphore.lua's fixed work (the call, the clock, the semaphore's own fields, the expiry
// check) and Redis's work for a call (its read, its reply's write, waking the reader) are shared by the operations of
// a call instead of being done for each.
//
//   op_batcher b(sender, poster, /*reach=*/2, /*max_in_flight=*/2);
//   b.submit({{"release", id, wake_key, "1"}, deadline, done}, owner);  // done(error_code, reply): its own reply
//
// When operations leave:
// - An operation asked for while no call is unanswered, nothing waits and no flush is posted leaves at once, alone: a
//   lone caller pays no wait.
// - Any other waits, and leaves in a call that a flush forms: posted on the executor when the first of them waits, it
//   runs once the handlers queued before it have run, so that what the completions of one reply ask for leaves as one
//   call. At most `max_in_flight` calls are unanswered (the semaphore's: two); a flush that finds that many leaves
//   its operations waiting for an answer, and one that finds fewer than max_in_flight - 1 sends half of them (the rest
//   wait for an answer).
// - An answer that finds operations waiting for it sends them at once when it was the only call unanswered (Redis
//   would idle otherwise); else it posts a flush that runs after its own completions' handlers (`reach` turns of the
//   executor), so that those operations leave with what its completions ask for.
// - An answer to a call of several operations that finds none waiting posts that flush too: what its completions ask
//   for leaves in one call, none of it alone. (Without it, two answers read together — Redis wrote both replies at
//   once — left the first operation asked for free to leave alone, the rest right behind it in a second call; Redis,
//   woken by the first, read both together and answered both together again, and the waves stayed merged for good,
//   Redis and the client taking turns: at 64 callers on 8 permits, 31,000-37,000 cycles/s against 52,000-64,000 with
//   the flush, in alternating runs. A lone caller's call carries one operation, and its next still leaves at once.)
// Under load this keeps a semaphore's calls in waves: while Redis runs one call, the completions of another's reply
// form the next, and every hand-off of a permit (a grant in a reply, its release in the next call of that wave)
// travels with the others of its wave. Waves merge when two replies are read together, and would then stay merged —
// Redis and the completions taking turns instead of working at once — so the halving splits them again. Fewer waves
// make larger calls (less of Redis's work per grant: a call's own work and its read and reply are shared by more
// grants); more waves let Redis run one while the client answers another and the wake-ups between them travel. At 64
// callers on 8 permits on a 2-core machine, two waves (max_in_flight 2) made 4.1 grants a call and three 3.2; three
// were up to 4 % faster in long runs, but in runs of 3 s they fell into one wave more often and further (two ahead in
// ten of twelve alternating runs), at 12 % more CPU per grant. (Sending what waited at each answer instead made 2.7
// grants a call at two calls in flight, a third of each wave's time spent waiting in the queue.)
//
// Order: the operations of a call run in the order they were submitted, and a call is on the connection's queue when
// send returns, so one thread's operations reach Redis in the order it submitted them (as separate calls would).
// Between threads there is no order, as between separate calls. An operation whose deadline passed while it waited
// completes with errc::timeout, never sent (one that did not wait is sent: the connection completes it unsent if its
// deadline has passed). A call's failure (no answer, connection lost, an error reply to the whole call) is each of its
// operations' outcome. Thread safety: submit may be called from any thread. Completions never run within submit: they
// run on the thread that answers the call (the connection's executor), or, for an operation that waited past its
// deadline, on the thread that took it out of the queue (a flush on the executor, an answer, or a blocking caller's
// thread in end_alone). An executor destroyed with a flush pending drops what waited: its completions destroyed, not
// called (as the executor drops a call's).
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

  // Posts a task on the executor that answers the calls (never runs it within the post).
  using poster = std::function<void(std::function<void()>)>;

  // At most this many operations to a call: a call blocks the server for its whole run.
  static constexpr std::size_t max_batch = 32;

  // `reach`: the turns of the executor after an answer within which its completions' callers ask for what they do
  // next (the handlers an answer's completions post, and those that these post in turn). `max_in_flight`: at least 1.
  op_batcher(sender send, poster post, int reach, std::size_t max_in_flight)
      : send_(std::move(send)), post_(std::move(post)), reach_(reach), max_in_flight_(max_in_flight) {}

  // Sends `o` now, or queues it for a flush or an answer. `owner` is kept alive until the call carrying `o` is
  // answered (the object the sender belongs to).
  void submit(op o, std::shared_ptr<void> owner);

  // Takes a slot for a call of one operation that the caller sends itself (a blocking call, which waits on its own
  // thread: the fastest way for a lone caller), when submit would send it at once; then true, and the caller calls
  // end_alone once the call is answered or given up (an answer, as far as what waits is concerned).
  [[nodiscard]] bool begin_alone();
  void end_alone(std::shared_ptr<void> owner);

  // The calls sent so far and the operations they carried (for tests and statistics).
  [[nodiscard]] std::pair<std::size_t, std::size_t> sent() const;

 private:
  struct call_guard;
  struct call_in_sending;
  struct flush_task;
  // Whether an operation may leave at once, alone.
  bool goes_alone() const ADMIT_REQUIRES(mutex_) { return in_flight_ == 0 && queued_.empty() && !flush_pending_; }
  // Queues `o` (then true) unless it may leave at once, alone; then, when `take`, it takes a slot.
  bool queued_unless_alone(op& o, const std::shared_ptr<void>& owner, bool take) ADMIT_EXCLUDES(mutex_);
  // A flush that runs `turns` turns of the executor after flush_task::start (flush_pending_ is set).
  std::shared_ptr<flush_task> make_flush(const std::shared_ptr<void>& owner, int turns) ADMIT_REQUIRES(mutex_);
  void flush(const std::shared_ptr<void>& owner);
  // A call of `carried` operations was answered or given up (its slot is free): what waited for it leaves now, or
  // with the next flush.
  void call_ended(const std::shared_ptr<void>& owner, std::size_t carried);
  // `waited`: the operations come from the queue (those past their deadline are then completed, not sent).
  // `sending` holds send_mutex_ and is released once the call is on the connection.
  void send(std::vector<op> ops, std::shared_ptr<void> owner, bool waited, std::unique_lock<std::mutex>& sending);
  void answered(std::vector<op>& ops, boost::system::error_code ec, reply r, const std::shared_ptr<void>& owner);
  // A batch call's reply cut into its `ops` operations' replies (semaphore.lua's `batch`: each as its length and
  // elements, an error as -1 and the error); empty when it is not such a reply (then `r` is left as it was).
  static std::vector<reply> split(reply&& r, std::size_t ops);
  // Everything waiting, taken out to be dropped, handlers not called (the executor is gone: nothing would send it).
  std::vector<op> drop_waiting() ADMIT_REQUIRES(mutex_);
  // The first `most` operations of the queue (at most max_batch).
  std::vector<op> take_queued(std::size_t most = max_batch) ADMIT_REQUIRES(mutex_);

  sender send_;
  poster post_;
  int reach_;
  std::size_t max_in_flight_;
  // Held from taking operations out of the queue (or a submit's own) until their call is on the connection, so that
  // calls reach the connection in the order they formed. A call answered at once, on the sending thread, within the
  // sender, is handled once the send returns and this is released (call_in_sending), so nothing takes it twice.
  // Taken before mutex_. It guards no data (it orders the calls), so it is not annotated for clang's analysis.
  std::mutex send_mutex_;
  mutable admit::detail::mutex mutex_;
  std::vector<op> queued_ ADMIT_GUARDED_BY(mutex_);
  std::size_t in_flight_ ADMIT_GUARDED_BY(mutex_) = 0;  // calls sent and not yet answered
  // Whether a flush is posted (also with the queue empty: for what an answer's completions will ask for), and whether
  // the queue waits for the answer of a call in flight instead (one of them whenever the queue is not empty).
  bool flush_pending_ ADMIT_GUARDED_BY(mutex_) = false;
  bool held_ ADMIT_GUARDED_BY(mutex_) = false;
  std::size_t calls_ ADMIT_GUARDED_BY(mutex_) = 0;
  std::size_t ops_ ADMIT_GUARDED_BY(mutex_) = 0;
};

}  // namespace admit::redis::detail
