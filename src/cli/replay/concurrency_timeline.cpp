#include "cli/replay/concurrency_timeline.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

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

concurrency_timeline::level concurrency_timeline::state_in(std::size_t k) const {
  if (k < filled_) return buckets_[k].peak;
  if (k >= buckets) return pending_;  // past the span, which holds pending_t_
  // Past the last committed change: the current state until pending_t_, the pending one from then on.
  const std::int64_t start = static_cast<std::int64_t>(k) * width_;  // below the span: no overflow
  const bool current_in = start < pending_t_;
  const bool pending_in = pending_t_ - start < width_;
  if (current_in && pending_in) return max_of(current_, pending_);
  return current_in ? current_ : pending_;
}

std::pair<std::size_t, std::size_t> concurrency_timeline::middles_in(std::int64_t from_ns, std::int64_t to_ns) const {
  from_ns = std::max<std::int64_t>(from_ns, 0);
  const std::int64_t half = width_ / 2;
  // The smallest k with k * width + half >= t: ceil((t - half) / width), without overflow for any t.
  const auto first_middle_at = [&](std::int64_t t) -> std::int64_t {
    if (t <= half) return 0;
    const std::int64_t x = t - half;
    return x / width_ + (x % width_ != 0 ? 1 : 0);
  };
  // The first bucket whose middle is at least from_ns; then on while the middle is below to_ns.
  std::int64_t first = first_middle_at(from_ns);
  std::int64_t last = first_middle_at(to_ns);  // one past
  if (last <= first) {
    first = from_ns / width_;  // a bucket wider than the range: the one holding from_ns
    last = first + 1;
  }
  const auto cap = static_cast<std::int64_t>(buckets);
  // Past the span only the pending state holds: one bucket index stands for all of it.
  return {static_cast<std::size_t>(std::min(first, cap)), static_cast<std::size_t>(std::min(last, cap + 1))};
}

concurrency_timeline::level concurrency_timeline::peak(std::int64_t from_ns, std::int64_t to_ns) const {
  const auto [first, last] = middles_in(from_ns, to_ns);
  level most = state_in(first);
  for (std::size_t k = first + 1; k < last; ++k) most = max_of(most, state_in(k));
  return most;
}

template <bool concurrency_timeline::bucket::*Flag>
bool concurrency_timeline::marked_in(std::int64_t from_ns, std::int64_t to_ns) const {
  const auto [first, last] = middles_in(from_ns, to_ns);
  for (std::size_t k = first; k < last && k < buckets; ++k) {
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
