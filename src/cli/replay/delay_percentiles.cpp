#include "cli/replay/delay_percentiles.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace admit::cli {

namespace {

constexpr std::size_t sub_count = std::size_t{1} << delay_percentiles::sub_bits;
// Values below sub_count have a bucket each; each power of two from 2^sub_bits to 2^62 has sub_count buckets.
constexpr std::size_t bucket_count = sub_count + (63 - delay_percentiles::sub_bits) * sub_count;

}  // namespace

delay_percentiles::delay_percentiles(std::size_t exact_count) : limit_(exact_count) {
  if (exact_count == 0) throw std::invalid_argument("delay_percentiles: exact_limit must be at least 1");
}

std::size_t delay_percentiles::bucket_of(std::int64_t ns) noexcept {
  const auto v = static_cast<std::uint64_t>(ns);
  if (v < sub_count) return static_cast<std::size_t>(v);
  const int e = static_cast<int>(std::bit_width(v)) - 1;  // sub_bits .. 62
  const int shift = e - sub_bits;
  const auto sub = static_cast<std::size_t>((v >> shift) & (sub_count - 1));
  return sub_count + static_cast<std::size_t>(shift) * sub_count + sub;
}

std::int64_t delay_percentiles::bucket_top(std::size_t bucket) noexcept {
  if (bucket < sub_count) return static_cast<std::int64_t>(bucket);
  const std::size_t shift = (bucket - sub_count) / sub_count;
  const std::uint64_t sub = (bucket - sub_count) % sub_count;
  const std::uint64_t low = (sub_count + sub) << shift;  // the leading bit and the sub-bucket's bits
  return static_cast<std::int64_t>(low + ((std::uint64_t{1} << shift) - 1));
}

void delay_percentiles::add(std::int64_t ns) {
  ++count_;
  if (ns <= 0) {
    ++zeros_;
    return;
  }
  sum_ += ns;
  max_ = std::max(max_, ns);
  if (!histogram_.empty()) {
    ++histogram_[bucket_of(ns)];
    return;
  }
  if (exact_.size() == limit_) {
    to_histogram();
    ++histogram_[bucket_of(ns)];
    return;
  }
  if (!exact_.empty() && ns < exact_.back()) sorted_ = false;
  exact_.push_back(ns);
}

void delay_percentiles::to_histogram() {
  histogram_.assign(bucket_count, 0);
  for (const std::int64_t v : exact_) ++histogram_[bucket_of(v)];
  std::vector<std::int64_t>().swap(exact_);
  sorted_ = true;
}

std::int64_t delay_percentiles::rank(int percent) {
  // 1-based nearest rank over all count_ delays, the zeros first.
  const std::int64_t k = std::max<std::int64_t>(1, (count_ * percent + 99) / 100);
  if (k <= zeros_) return 0;
  std::int64_t left = k - zeros_;
  if (histogram_.empty()) return exact_[static_cast<std::size_t>(left - 1)];
  for (std::size_t b = 0; b < histogram_.size(); ++b) {
    if (histogram_[b] >= left) return std::min(bucket_top(b), max_);
    left -= histogram_[b];
  }
  return max_;  // cannot happen: the buckets hold every non-zero delay
}

delay_stats delay_percentiles::summarize() {
  delay_stats s;
  if (count_ == 0) return s;
  if (!sorted_) {
    std::sort(exact_.begin(), exact_.end());
    sorted_ = true;
  }
  s.p50 = rank(50);
  s.p90 = rank(90);
  s.p99 = rank(99);
  s.max = max_;
  s.mean = static_cast<double>(static_cast<long double>(sum_) / static_cast<long double>(count_));
  return s;
}

std::size_t delay_percentiles::bytes() const noexcept {
  return (exact_.capacity() + histogram_.capacity()) * sizeof(std::int64_t);
}

}  // namespace admit::cli
