// Many callers, one script call (see batcher.hpp).
#include "batcher.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace admit::redis::detail {

namespace {

void drop_completed(std::vector<batch_entry>& batch) {
  std::erase_if(batch, [](const batch_entry& e) { return e.req->done(); });
}

}  // namespace

void batcher::submit(batch_entry entry, batch_sink& sink) {
  std::vector<batch_entry> full;
  {
    const admit::detail::lock_guard lock(mutex_);
    queued_.push_back(std::move(entry));
    if (queued_.size() >= std::min(max_batch_, stream_batch)) {
      full.swap(queued_);  // the scheduled flush, if any, finds the queue empty or refilled
    } else if (flush_scheduled_) {
      return;
    } else {
      flush_scheduled_ = true;
    }
  }
  if (full.empty()) return sink.schedule_flush();
  drop_completed(full);
  if (!full.empty()) sink.send(std::move(full));
}

void batcher::flush(batch_sink& sink) {
  std::vector<batch_entry> queued;
  {
    const admit::detail::lock_guard lock(mutex_);
    queued.swap(queued_);
    flush_scheduled_ = false;
  }
  // submit sends a queue as soon as it reaches min(max_batch_, stream_batch), so this one is smaller: one call.
  assert(queued.size() < std::min(max_batch_, stream_batch));
  drop_completed(queued);
  if (!queued.empty()) sink.send(std::move(queued));
}

}  // namespace admit::redis::detail
