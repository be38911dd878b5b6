#include "cli/concurrency_timeline.hpp"

#include <algorithm>
#include <stdexcept>

namespace admit::cli {

namespace {

concurrency_timeline::level max_of(concurrency_timeline::level a, concurrency_timeline::level b) {
  return {std::max(a.in_flight, b.in_flight), std::max(a.waiting, b.waiting)};
}

}  // namespace

void concurrency_timeline::record(std::int64_t t_ns, level state) {
  if (t_ns < pending_t_) throw std::logic_error("concurrency timeline: time went back");
  if (t_ns != pending_t_) commit();
  cover(t_ns);
  pending_t_ = t_ns;
  pending_ = state;
}

void concurrency_timeline::commit() {
  cover(pending_t_);
  const std::size_t b = index(pending_t_);
  if (b >= filled_) {
    // The current state held over [last committed time, pending_t_): every bucket in between, and this one unless
    // the change falls exactly at its start.
    for (std::size_t k = filled_; k < b; ++k) buckets_[k].peak = current_;
    const bool at_start = pending_t_ == static_cast<std::int64_t>(b) * width_;
    buckets_[b].peak = at_start ? pending_ : max_of(current_, pending_);
    filled_ = b + 1;
  } else {
    buckets_[b].peak = max_of(buckets_[b].peak, pending_);
  }
  current_ = pending_;
}

void concurrency_timeline::cover(std::int64_t t_ns) {
  while (index(t_ns) >= buckets) {
    for (std::size_t k = 0; k < buckets / 2; ++k) {
      bucket& merged = buckets_[k];
      const bucket& a = buckets_[2 * k];
      const bucket& b = buckets_[2 * k + 1];
      level peak = a.peak;
      if (2 * k + 1 < filled_) peak = max_of(peak, b.peak);
      const bool queue_full = a.queue_full || b.queue_full;
      const bool timeout = a.timeout || b.timeout;
      merged = {peak, queue_full, timeout};
    }
    std::fill(buckets_.begin() + buckets / 2, buckets_.end(), bucket{});
    filled_ = (filled_ + 1) / 2;
    width_ *= 2;
  }
}

void concurrency_timeline::mark_queue_full(std::int64_t arrival_ns) {
  cover(arrival_ns);
  buckets_[index(arrival_ns)].queue_full = true;
}

void concurrency_timeline::mark_timeout(std::int64_t arrival_ns) {
  cover(arrival_ns);
  buckets_[index(arrival_ns)].timeout = true;
}

concurrency_timeline::level concurrency_timeline::peak(std::int64_t from_ns, std::int64_t to_ns) const {
  // The pending report is the latest state: it holds from pending_t_ on.
  level most{};
  bool any = false;
  const auto take = [&](level l) {
    most = any ? max_of(most, l) : l;
    any = true;
  };
  if (to_ns <= from_ns) to_ns = from_ns + 1;
  const std::int64_t last = to_ns - 1;
  for (std::size_t k = index(std::max<std::int64_t>(from_ns, 0)); k < buckets; ++k) {
    const std::int64_t start = static_cast<std::int64_t>(k) * width_;
    if (start > last) break;
    if (start > pending_t_) break;  // past every report: the pending state, taken below
    if (k < filled_) {
      take(buckets_[k].peak);
    } else if (start < pending_t_) {
      take(current_);  // from the last committed change up to pending_t_
    }
  }
  if (pending_t_ <= last) take(pending_);
  if (!any) take(current_);  // [from_ns, to_ns) lies between the last committed change and pending_t_
  return most;
}

template <bool concurrency_timeline::bucket::*Flag>
bool concurrency_timeline::marked_in(std::int64_t from_ns, std::int64_t to_ns) const {
  if (from_ns < 0) from_ns = 0;
  // Buckets whose start lies in [from_ns, to_ns).
  std::size_t k = index(from_ns);
  if (static_cast<std::int64_t>(k) * width_ < from_ns) ++k;
  for (; k < buckets && static_cast<std::int64_t>(k) * width_ < to_ns; ++k) {
    if (buckets_[k].*Flag) return true;
  }
  return false;
}

bool concurrency_timeline::queue_full_in(std::int64_t from_ns, std::int64_t to_ns) const {
  return marked_in<&bucket::queue_full>(from_ns, to_ns);
}

bool concurrency_timeline::timeout_in(std::int64_t from_ns, std::int64_t to_ns) const {
  return marked_in<&bucket::timeout>(from_ns, to_ns);
}

}  // namespace admit::cli
