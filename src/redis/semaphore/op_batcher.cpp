#include "op_batcher.hpp"

#include <algorithm>
#include <utility>

#include "admit/asio/error_code.hpp"
#include "admit/errc.hpp"

namespace admit::redis::detail {

void op_batcher::submit(op o, std::shared_ptr<void> owner) {
  std::vector<op> now;
  {
    const std::lock_guard lock(mutex_);
    if (in_flight_ >= max_in_flight) {
      queued_.push_back(std::move(o));
      return;
    }
    ++in_flight_;
    now = take_queued();  // empty but for a moment after an answer: what waited goes first
    now.push_back(std::move(o));
  }
  send(std::move(now), std::move(owner), false);
}

bool op_batcher::begin_alone() {
  const std::lock_guard lock(mutex_);
  if (in_flight_ >= max_in_flight || !queued_.empty()) return false;
  ++in_flight_;
  ++calls_;
  ++ops_;
  return true;
}

void op_batcher::end_alone(std::shared_ptr<void> owner) {
  std::vector<op> next;
  {
    const std::lock_guard lock(mutex_);
    next = take_queued();
    if (next.empty()) {
      --in_flight_;
      return;
    }
  }
  send(std::move(next), std::move(owner), true);  // the slot goes on to what waited
}

std::pair<std::size_t, std::size_t> op_batcher::sent() const {
  const std::lock_guard lock(mutex_);
  return {calls_, ops_};
}

std::vector<op_batcher::op> op_batcher::take_queued() {
  std::vector<op> taken;
  if (queued_.size() <= max_batch) {
    taken.swap(queued_);
    return taken;
  }
  const auto end = queued_.begin() + static_cast<std::ptrdiff_t>(max_batch);
  taken.assign(std::make_move_iterator(queued_.begin()), std::make_move_iterator(end));
  queued_.erase(queued_.begin(), end);
  return taken;
}

// Holds one call's slot (counted in in_flight_).
void op_batcher::send(std::vector<op> ops, std::shared_ptr<void> owner, bool waited) {
  while (waited) {
    // What can no longer be answered in time is not sent. (What did not wait is sent: completing it here would
    // complete it from within submit; the connection completes a call already past its deadline unsent.)
    const auto now = steady::now();
    const auto expired =
        std::stable_partition(ops.begin(), ops.end(), [&](const op& o) { return !o.deadline || *o.deadline > now; });
    std::vector<op> late(std::make_move_iterator(expired), std::make_move_iterator(ops.end()));
    ops.erase(expired, ops.end());
    for (auto& o : late) o.done(admit::asio::to_error_code(errc::timeout), reply());
    if (!ops.empty()) break;
    const std::lock_guard lock(mutex_);
    ops = take_queued();
    if (ops.empty()) {
      --in_flight_;
      return;
    }
  }
  std::optional<steady::time_point> deadline = ops.front().deadline;  // the latest: each op keeps its own besides
  for (const auto& o : ops) {
    if (!deadline || !o.deadline) {
      deadline.reset();
      break;
    }
    deadline = std::max(*deadline, *o.deadline);
  }
  {
    const std::lock_guard lock(mutex_);
    ++calls_;
    ops_ += ops.size();
  }
  auto carried = std::make_shared<std::vector<op>>(std::move(ops));
  send_(*carried, deadline, [this, carried, owner](boost::system::error_code ec, reply r) mutable {
    answered(*carried, ec, std::move(r), owner);
  });
}

void op_batcher::answered(std::vector<op>& ops, boost::system::error_code ec, reply r,
                          const std::shared_ptr<void>& owner) {
  std::vector<op> next;
  {
    const std::lock_guard lock(mutex_);
    next = take_queued();
    if (next.empty()) --in_flight_;  // else the slot goes on to the next call
  }
  // The next call first: the server works on it while these completions run.
  if (!next.empty()) send(std::move(next), owner, true);
  if (ops.size() == 1) return ops.front().done(ec, std::move(r));
  const bool split = !ec && r.is_array() && r.elements().size() == ops.size();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    // Unsplit: the call's failure or its error reply (a copy each) is every operation's.
    ops[i].done(ec, split ? std::move(r.elements()[i]) : r);
  }
}

}  // namespace admit::redis::detail
