// cli/replay/delay_percentiles.hpp — the delay (or wait) percentiles of a replay, in memory that does not grow with the
// trace: exact for the first million non-zero delays, then within 1/256 of the exact value, never below it.
//
//   delay_percentiles d;
//   d.add(0);              // admitted at once: counted, nothing stored
//   d.add(4'000'000);      // admitted after 4 ms
//   delay_stats s = d.summarize();   // s.p50 == 0, s.p90 == s.p99 == s.max == 4'000'000
//
// Zero delays are only counted. Non-zero delays are kept exactly (8 bytes each) until there are exact_limit of them
// (8 MB); then they are moved into a log-linear histogram of 256 sub-buckets per power of two (115 KB, fixed), and so
// is every later one. A percentile read from the histogram is the largest value its bucket holds, capped at the exact
// maximum: at least the exact nearest-rank value and less than 1/256 (0.4%) above it — values below 256 ns are held
// exactly. The maximum and the mean are always exact (the mean of the whole int64 sum, divided once).
//
// Thread safety: none (one replay per object).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace admit::cli {

// Nearest-rank percentiles of the delays of admitted arrivals (zero delays included), in ns.
struct delay_stats {
  std::int64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
  double mean = 0;
};

class delay_percentiles {
 public:
  // Non-zero delays kept exactly before the histogram takes over.
  static constexpr std::size_t exact_limit = std::size_t{1} << 20;
  // Sub-buckets per power of two in the histogram: the relative error bound is 1 / 2^sub_bits.
  static constexpr int sub_bits = 8;

  delay_percentiles() = default;
  // A lower exact limit (tests of the histogram). Throws std::invalid_argument when it is 0.
  explicit delay_percentiles(std::size_t exact_count);

  // One admitted arrival's delay, ns >= 0 (a negative value counts as 0). Amortized O(1); allocates only while the
  // exact list grows (to exact_limit) and once for the histogram.
  void add(std::int64_t ns);

  // The percentiles so far (sorts the exact list in place; later add()s are still allowed). O(n log n) while exact,
  // O(histogram) after.
  [[nodiscard]] delay_stats summarize();

  [[nodiscard]] std::int64_t count() const noexcept { return count_; }
  // Whether summarize() is exact (no more than exact_limit non-zero delays were added).
  [[nodiscard]] bool exact() const noexcept { return histogram_.empty(); }
  // Non-zero delays kept exactly (0 once the histogram took over).
  [[nodiscard]] std::size_t kept() const noexcept { return exact_.size(); }
  // Bytes held for the delays, for tests of the memory bound.
  [[nodiscard]] std::size_t bytes() const noexcept;

 private:
  void to_histogram();
  [[nodiscard]] static std::size_t bucket_of(std::int64_t ns) noexcept;
  [[nodiscard]] static std::int64_t bucket_top(std::size_t bucket) noexcept;  // largest value in the bucket
  [[nodiscard]] std::int64_t rank(int percent);

  std::size_t limit_ = exact_limit;
  std::int64_t count_ = 0, zeros_ = 0, max_ = 0;
  __extension__ typedef __int128 wide_sum;  // the sum of up to 2^63 delays of up to 2^63 ns
  wide_sum sum_ = 0;
  std::vector<std::int64_t> exact_;  // non-zero delays, while exact
  bool sorted_ = true;
  std::vector<std::int64_t> histogram_;  // counts of non-zero delays per bucket, once exact_ overflowed
};

}  // namespace admit::cli
