#include "cli/replay/rate_timeline.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "cli/common/duration.hpp"
#include "cli/replay/replay.hpp"

namespace admit::cli {

namespace {

// The grid steps: each divides the next.
constexpr std::int64_t grid_steps[] = {
    ns_per_ms,         10 * ns_per_ms,     100 * ns_per_ms,      ns_per_second,
    5 * ns_per_second, 60 * ns_per_second, 3600 * ns_per_second, 86400 * ns_per_second};

// The largest grid step dividing `width` (a width choose_bucket_width gives: a multiple of 1 ms).
std::int64_t grid_for(std::int64_t width) {
  std::int64_t g = ns_per_ms;
  for (const std::int64_t step : grid_steps) {
    if (width % step == 0) g = step;
  }
  // Past a day, choose_bucket_width doubles: 2 d, 4 d... each a grid step of its own.
  if (width > 86400 * ns_per_second && width % (86400 * ns_per_second) == 0) g = width;
  return g;
}

}  // namespace

void rate_timeline::cover(std::int64_t t_ns) {
  end_ = std::max(end_, t_ns);
  if (static_cast<std::uint64_t>(t_ns / grid_) < grid_buckets_.size()) return;
  const std::int64_t g = std::max(grid_, grid_for(choose_bucket_width(end_, min_grid_buckets)));
  if (g != grid_) {
    const std::int64_t factor = g / grid_;  // a whole number: each step divides the next
    std::vector<cell> merged((grid_buckets_.size() + static_cast<std::size_t>(factor) - 1) /
                             static_cast<std::size_t>(factor));
    for (std::size_t i = 0; i < grid_buckets_.size(); ++i) {
      cell& m = merged[i / static_cast<std::size_t>(factor)];
      m.offered += grid_buckets_[i].offered;
      m.admitted += grid_buckets_[i].admitted;
      m.rejected += grid_buckets_[i].rejected;
    }
    grid_buckets_ = std::move(merged);
    grid_ = g;
  }
  grid_buckets_.resize(static_cast<std::size_t>(end_ / grid_) + 1);
}

void rate_timeline::add_offered(std::int64_t t_ns, std::int64_t n, bool rejected) {
  t_ns = std::max<std::int64_t>(t_ns, 0);
  cover(t_ns);
  cell& c = grid_buckets_[static_cast<std::size_t>(t_ns / grid_)];
  c.offered += n;
  if (rejected) c.rejected += n;
}

void rate_timeline::add_admitted(std::int64_t t_ns, std::int64_t n) {
  t_ns = std::max<std::int64_t>(t_ns, 0);
  cover(t_ns);
  grid_buckets_[static_cast<std::size_t>(t_ns / grid_)].admitted += n;
}

std::vector<bucket> rate_timeline::buckets(std::int64_t width_ns) const {
  if (width_ns <= 0) {
    throw std::invalid_argument("rate_timeline: bucket width must be positive, got " + std::to_string(width_ns));
  }
  constexpr std::int64_t max_buckets = 1'000'000;
  const std::int64_t count = std::min(end_ / width_ns + 1, max_buckets);
  std::vector<bucket> out(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < out.size(); ++i) out[i].start_ns = static_cast<std::int64_t>(i) * width_ns;
  for (std::size_t i = 0; i < grid_buckets_.size(); ++i) {
    const std::int64_t start = static_cast<std::int64_t>(i) * grid_;
    bucket& b = out[static_cast<std::size_t>(std::min(start / width_ns, count - 1))];
    b.offered += grid_buckets_[i].offered;
    b.admitted += grid_buckets_[i].admitted;
    b.rejected += grid_buckets_[i].rejected;
  }
  return out;
}

double rate_timeline::until(std::int64_t t_ns, std::int64_t cell::*field) const {
  if (t_ns < 0 || grid_buckets_.empty()) return 0;
  const auto k = static_cast<std::size_t>(t_ns / grid_);
  double sum = 0;
  const std::size_t whole = std::min(k, grid_buckets_.size());
  for (std::size_t i = 0; i < whole; ++i) sum += static_cast<double>(grid_buckets_[i].*field);
  if (k < grid_buckets_.size()) {
    // Inside bucket k: the share of it up to and including t_ns.
    const double part =
        static_cast<double>(t_ns - static_cast<std::int64_t>(k) * grid_ + 1) / static_cast<double>(grid_);
    sum += part * static_cast<double>(grid_buckets_[k].*field);
  }
  return sum;
}

double rate_timeline::offered_until(std::int64_t t_ns) const { return until(t_ns, &cell::offered); }
double rate_timeline::admitted_until(std::int64_t t_ns) const { return until(t_ns, &cell::admitted); }

}  // namespace admit::cli
