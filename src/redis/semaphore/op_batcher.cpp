#include "op_batcher.hpp"

#include <algorithm>
#include <atomic>
#include <boost/system/errc.hpp>
#include <cstdint>
#include <exception>
#include <iterator>
#include <optional>
#include <thread>
#include <utility>

#include "admit/asio/error_code.hpp"
#include "admit/errc.hpp"

namespace admit::redis::detail {

// Held by the completion of a call in flight (every copy of it): when the last copy goes without having been called —
// its executor was destroyed with the call pending — what waited for the slot can never leave either. Those
// operations are dropped as the executor dropped the call: their handlers destroyed, not called (they may hold the
// semaphore, which holds this batcher: a cycle otherwise). `owner` keeps the batcher alive meanwhile.
struct op_batcher::call_guard {
  op_batcher* batcher;
  std::shared_ptr<void> owner;
  bool answered = false;
  call_guard(op_batcher* b, std::shared_ptr<void> o) : batcher(b), owner(std::move(o)) {}
  call_guard(const call_guard&) = delete;
  call_guard& operator=(const call_guard&) = delete;
  ~call_guard() {
    if (answered) return;
    std::vector<op> dropped;  // (destroyed after the lock is released)
    const admit::detail::lock_guard lock(batcher->mutex_);
    dropped = batcher->drop_waiting();
    --batcher->in_flight_;
  }
};

// A call while its sender runs: an answer that comes on the sending thread before the sender returns (a connection
// that completes a call at once) is kept, and handled by send() once it has released the send lock. An answer on
// another thread, or later, is handled where it comes.
struct op_batcher::call_in_sending {
  const std::thread::id sender = std::this_thread::get_id();
  std::atomic<bool> sending{true};
  std::optional<std::pair<boost::system::error_code, reply>> kept;  // written and read on the sending thread only
  // Whether an answer coming now must be kept for send().
  bool keeps_answer() const noexcept { return sending.load() && std::this_thread::get_id() == sender; }
};

// A flush on its way through the executor's turns. Destroyed without having run (its executor destroyed first), it
// drops what waited as call_guard does: nothing would ever send it.
struct op_batcher::flush_task {
  op_batcher* batcher;
  std::shared_ptr<void> owner;
  int turns;
  bool ran = false;
  flush_task(op_batcher* b, std::shared_ptr<void> o, int t) : batcher(b), owner(std::move(o)), turns(t) {}
  flush_task(const flush_task&) = delete;
  flush_task& operator=(const flush_task&) = delete;
  ~flush_task() {
    if (ran) return;
    std::vector<op> dropped;  // (destroyed after the lock is released)
    const admit::detail::lock_guard lock(batcher->mutex_);
    dropped = batcher->drop_waiting();
  }
  // Posts the task's next turn (called without the batcher's mutex: a post that fails destroys the task, which takes
  // it); at its last, the flush runs.
  static void start(std::shared_ptr<flush_task> task) {
    op_batcher& b = *task->batcher;
    b.post_([task = std::move(task)] {
      if (--task->turns > 0) return start(task);
      task->ran = true;
      task->batcher->flush(task->owner);
    });
  }
};

void op_batcher::submit(op o, std::shared_ptr<void> owner) {
  if (queued_unless_alone(o, owner, false)) return;
  std::unique_lock sending(send_mutex_);            // before taking a slot: calls leave in the order they form
  if (queued_unless_alone(o, owner, true)) return;  // another call formed meanwhile
  std::vector<op> now;
  now.push_back(std::move(o));
  send(std::move(now), std::move(owner), false, sending);
}

bool op_batcher::queued_unless_alone(op& o, const std::shared_ptr<void>& owner, bool take) {
  std::shared_ptr<flush_task> flush;
  {
    const admit::detail::lock_guard lock(mutex_);
    if (goes_alone()) {
      if (take) ++in_flight_;
      return false;
    }
    queued_.push_back(std::move(o));
    if (!flush_pending_ && !held_) flush = make_flush(owner, 1);
  }
  if (flush) flush_task::start(std::move(flush));
  return true;
}

std::vector<op_batcher::op> op_batcher::drop_waiting() {
  std::vector<op> dropped;
  dropped.swap(queued_);
  flush_pending_ = false;
  held_ = false;
  return dropped;
}

std::shared_ptr<op_batcher::flush_task> op_batcher::make_flush(const std::shared_ptr<void>& owner, int turns) {
  flush_pending_ = true;
  return std::make_shared<flush_task>(this, owner, turns);
}

void op_batcher::flush(const std::shared_ptr<void>& owner) {
  std::unique_lock sending(send_mutex_);  // before taking from the queue: calls leave in the order they form
  std::vector<op> now;
  {
    const admit::detail::lock_guard lock(mutex_);
    flush_pending_ = false;
    if (queued_.empty()) return;
    if (in_flight_ >= max_in_flight_) {
      held_ = true;
      return;
    }
    // Fewer calls in flight than waves wanted: a wave split in two (see the header).
    now = take_queued(in_flight_ + 1 < max_in_flight_ ? (queued_.size() + 1) / 2 : max_batch);
    held_ = !queued_.empty();
    ++in_flight_;
  }
  send(std::move(now), owner, true, sending);
}

bool op_batcher::begin_alone() {
  const admit::detail::lock_guard lock(mutex_);
  if (!goes_alone()) return false;
  ++in_flight_;
  ++calls_;
  ++ops_;
  return true;
}

void op_batcher::end_alone(std::shared_ptr<void> owner) { call_ended(owner, 1); }

void op_batcher::call_ended(const std::shared_ptr<void>& owner, std::size_t carried) {
  std::unique_lock sending(send_mutex_);  // in the order calls form
  std::vector<op> next;
  std::shared_ptr<flush_task> flush;
  bool sends = false;
  {
    const admit::detail::lock_guard lock(mutex_);
    if (!held_) {  // nothing waits, or a flush is posted for it
      --in_flight_;
      // What the completions of several operations ask for leaves together, none of it alone (see the header).
      if (carried > 1 && !flush_pending_) flush = make_flush(owner, reach_ + 1);
    } else if (in_flight_ > 1) {
      // Redis has the other call: what waited leaves with what this answer's completions ask for.
      --in_flight_;
      held_ = false;
      flush = make_flush(owner, reach_ + 1);
    } else {
      next = take_queued();  // at once, in this call's slot: nothing else keeps Redis busy
      held_ = !queued_.empty();
      sends = true;
    }
  }
  if (flush) return flush_task::start(std::move(flush));
  if (sends) send(std::move(next), owner, true, sending);  // (gives the slot back if nothing is left to send)
}

std::pair<std::size_t, std::size_t> op_batcher::sent() const {
  const admit::detail::lock_guard lock(mutex_);
  return {calls_, ops_};
}

std::vector<op_batcher::op> op_batcher::take_queued(std::size_t most) {
  std::vector<op> taken;
  most = std::min(most, max_batch);
  if (queued_.size() <= most) {
    taken.swap(queued_);
    return taken;
  }
  const auto end = queued_.begin() + static_cast<std::ptrdiff_t>(most);
  taken.assign(std::make_move_iterator(queued_.begin()), std::make_move_iterator(end));
  queued_.erase(queued_.begin(), end);
  return taken;
}

// Holds one call's slot (counted in in_flight_), and `sending`, which it releases once the call is on the connection.
void op_batcher::send(std::vector<op> ops, std::shared_ptr<void> owner, bool waited,
                      std::unique_lock<std::mutex>& sending) {
  // What waited past its deadline is not sent (what did not wait is: completing it here would complete it from
  // within submit; the connection completes a call already past its deadline unsent). Completed after the call
  // leaves, the send lock released.
  std::vector<op> late;
  while (waited) {
    const auto now = steady::now();
    const auto expired =
        std::stable_partition(ops.begin(), ops.end(), [&](const op& o) { return !o.deadline || *o.deadline > now; });
    late.insert(late.end(), std::make_move_iterator(expired), std::make_move_iterator(ops.end()));
    ops.erase(expired, ops.end());
    if (!ops.empty()) break;
    const admit::detail::lock_guard lock(mutex_);
    ops = take_queued();
    held_ = !queued_.empty();  // (for this call's answer: it stays in flight)
    if (ops.empty()) {
      --in_flight_;
      break;
    }
  }
  if (!ops.empty()) {
    // The call's deadline is the latest of its operations': an operation whose own deadline matters more than
    // waiting a little longer enforces it itself (a blocking caller, a waiter's timer) or is not batched (renewals).
    std::optional<steady::time_point> deadline = ops.front().deadline;
    for (const auto& o : ops) {
      if (!deadline || !o.deadline) {
        deadline.reset();
        break;
      }
      deadline = std::max(*deadline, *o.deadline);
    }
    {
      const admit::detail::lock_guard lock(mutex_);
      ++calls_;
      ops_ += ops.size();
    }
    auto carried = std::make_shared<std::vector<op>>(std::move(ops));
    auto guard = std::make_shared<call_guard>(this, owner);
    auto call = std::make_shared<call_in_sending>();
    try {
      send_(*carried, deadline, [this, carried, guard, call](boost::system::error_code ec, reply r) {
        guard->answered = true;
        if (call->keeps_answer()) {
          call->kept.emplace(ec, std::move(r));
          return;
        }
        answered(*carried, ec, std::move(r), guard->owner);
      });
      call->sending = false;
      if (call->kept) {
        sending.unlock();
        answered(*carried, call->kept->first, std::move(call->kept->second), owner);
      }
    } catch (const std::exception&) {
      // Not sent (memory ran out building it): each operation fails as a call that could not be made, and the slot
      // goes on.
      guard->answered = true;
      sending.unlock();
      answered(*carried, boost::system::errc::make_error_code(boost::system::errc::not_enough_memory), reply(), owner);
    }
  }
  if (sending.owns_lock()) sending.unlock();
  for (auto& o : late) o.done(admit::asio::to_error_code(errc::timeout), reply());
}

void op_batcher::answered(std::vector<op>& ops, boost::system::error_code ec, reply r,
                          const std::shared_ptr<void>& owner) {
  // The next call first (when it goes now): the server works on it while these completions run.
  call_ended(owner, ops.size());
  if (ops.size() == 1) return ops.front().done(ec, std::move(r));
  // Unsplit: the call's failure or its error reply (a copy each) is every operation's; a reply of another shape is an
  // error reply for each (never read as theirs: its first element would pass for a status).
  std::vector<reply> each;
  if (!ec && !r.is_error()) {
    each = split(std::move(r), ops.size());
    if (each.empty()) r = reply::error("ERR admit semaphore: a batch's reply that is not one reply per operation");
  }
  for (std::size_t i = 0; i < ops.size(); ++i) ops[i].done(ec, each.empty() ? r : std::move(each[i]));
}

std::vector<reply> op_batcher::split(reply&& r, std::size_t ops) {
  if (!r.is_array()) return {};
  std::vector<reply>& e = r.elements();
  // Read through first (where each reply starts, and its length; -1: an error reply), so that a reply of another
  // shape is left whole.
  std::vector<std::pair<std::size_t, std::int64_t>> parts;
  parts.reserve(ops);
  std::size_t at = 0;
  while (parts.size() < ops && at < e.size() && e[at].is_integer()) {
    const std::int64_t length = e[at].integer();
    if (length < -1 || (length == -1 ? 1 : static_cast<std::uint64_t>(length)) > e.size() - at - 1) return {};
    parts.emplace_back(at + 1, length);
    at += 1 + static_cast<std::size_t>(length == -1 ? 1 : length);
  }
  if (parts.size() != ops || at != e.size()) return {};
  std::vector<reply> each;
  each.reserve(ops);
  for (const auto& [first, length] : parts) {
    const auto from = e.begin() + static_cast<std::ptrdiff_t>(first);
    if (length == -1) {
      each.push_back(std::move(*from));
    } else {
      each.push_back(
          reply::array(std::vector<reply>(std::make_move_iterator(from), std::make_move_iterator(from + length))));
    }
  }
  return each;
}

}  // namespace admit::redis::detail
