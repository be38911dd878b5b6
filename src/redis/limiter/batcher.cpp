// Many callers, one script call (see batcher.hpp).
#include "batcher.hpp"

#include <algorithm>
#include <iterator>
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
    std::lock_guard lock(mutex_);
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
    std::lock_guard lock(mutex_);
    queued.swap(queued_);
    flush_scheduled_ = false;
  }
  drop_completed(queued);
  auto first = queued.begin();
  for (const std::size_t size : call_sizes(queued.size(), max_batch_)) {
    const auto last = first + static_cast<std::ptrdiff_t>(size);
    sink.send(std::vector<batch_entry>(std::make_move_iterator(first), std::make_move_iterator(last)));
    first = last;
  }
}

std::vector<std::size_t> batcher::call_sizes(std::size_t queued, std::size_t max_batch) {
  std::vector<std::size_t> sizes;
  if (queued == 0) return sizes;
  const std::size_t calls = (queued + max_batch - 1) / max_batch;
  const std::size_t per_call = (queued + calls - 1) / calls;
  for (std::size_t first = 0; first < queued; first += per_call) sizes.push_back(std::min(per_call, queued - first));
  return sizes;
}

}  // namespace admit::redis::detail
