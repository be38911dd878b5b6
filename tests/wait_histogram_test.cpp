// Tests of admit::wait_histogram (include/admit/wait_histogram.hpp): the bucket layout, percentiles exact to the
// documented relative error against a sorted copy, exact small values and maximum, concurrent recording.
#include "admit/wait_histogram.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"

namespace {

using namespace std::chrono_literals;
using admit::wait_histogram;

std::int64_t nearest_rank(std::vector<std::int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  auto rank = static_cast<std::size_t>(std::ceil(q * n / 100.0));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

TEST(WaitHistogram, BucketsCoverTheRangeWithoutGaps) {
  EXPECT_EQ(wait_histogram::bucket_count, 1888u);
  EXPECT_EQ(wait_histogram::bucket_lower(0), 0);
  for (std::size_t i = 0; i + 1 < wait_histogram::bucket_count; ++i) {
    ASSERT_EQ(wait_histogram::bucket_upper(i) + 1, wait_histogram::bucket_lower(i + 1)) << i;
    ASSERT_EQ(wait_histogram::bucket_of(wait_histogram::bucket_lower(i)), i);
    ASSERT_EQ(wait_histogram::bucket_of(wait_histogram::bucket_upper(i)), i);
    // The documented bound: a bucket's width is below 1/32 of its smallest value (beyond the exact ones).
    const std::int64_t lo = wait_histogram::bucket_lower(i);
    const std::int64_t width = wait_histogram::bucket_upper(i) - lo;
    if (lo >= wait_histogram::exact_below) {
      ASSERT_LT(width * wait_histogram::sub_buckets, lo) << i;  // in integers: no rounding near 2^63
    } else {
      ASSERT_EQ(width, 0);
    }
  }
  EXPECT_EQ(wait_histogram::bucket_upper(wait_histogram::bucket_count - 1), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(wait_histogram::bucket_of(std::numeric_limits<std::int64_t>::max()), wait_histogram::bucket_count - 1);
  EXPECT_EQ(wait_histogram::bucket_of(64), 64u);
  EXPECT_EQ(wait_histogram::bucket_of(65), 64u);
  EXPECT_EQ(wait_histogram::bucket_of(66), 65u);
}

TEST(WaitHistogram, EmptyReportsZero) {
  wait_histogram h;
  const auto s = h.summarize();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p99, 0ns);
  EXPECT_EQ(s.max, 0ns);
  EXPECT_EQ(s.mean, 0ns);
  EXPECT_EQ(h.percentile(50), 0ns);
}

TEST(WaitHistogram, SmallValuesAreExact) {
  wait_histogram h;
  for (int v = 1; v <= 60; ++v) h.record(std::chrono::nanoseconds(v));
  h.record(-5ns);  // counts as 0
  const auto s = h.summarize();
  EXPECT_EQ(s.count, 61u);
  EXPECT_EQ(s.p50, 30ns);  // rank ceil(30.5) = 31 of 0, 1, ..., 60: the value 30
  EXPECT_EQ(s.p90, 54ns);  // rank ceil(54.9) = 55: the value 54
  EXPECT_EQ(s.p99, 60ns);  // rank ceil(60.39) = 61: the value 60
  EXPECT_EQ(s.max, 60ns);
  EXPECT_EQ(s.mean, 30ns);  // 1830 / 61
  EXPECT_EQ(h.percentile(0), 0ns);
  EXPECT_EQ(h.percentile(100), 60ns);
}

TEST(WaitHistogram, PercentilesWithinTheRelativeErrorOfTheExactOnes) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(2e6), 1.5);  // ~2 ms median, long tail
  wait_histogram h;
  std::vector<std::int64_t> values;
  for (int i = 0; i < 20000; ++i) {
    const auto v = static_cast<std::int64_t>(dist(rng));
    values.push_back(v);
    h.record(std::chrono::nanoseconds(v));
  }
  for (double q : {1.0, 10.0, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0}) {
    const std::int64_t exact = nearest_rank(values, q);
    const std::int64_t got = h.percentile(q).count();
    EXPECT_GE(got, exact) << q;
    EXPECT_LT(static_cast<double>(got), static_cast<double>(exact) * (1 + wait_histogram::relative_error)) << q;
  }
  const auto s = h.summarize();
  EXPECT_EQ(s.max.count(), *std::max_element(values.begin(), values.end()));
  EXPECT_EQ(s.p99, h.percentile(99));
  std::uint64_t sum = 0;
  for (auto v : values) sum += static_cast<std::uint64_t>(v);
  EXPECT_EQ(static_cast<std::uint64_t>(s.mean.count()), sum / values.size());
}

// cumulative_counts never counts a value above its bound, and counts every value up to within 1/32 below it.
TEST(WaitHistogram, CumulativeCountsHonourTheirBoundsWithinTheRelativeError) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> dist(std::log(1e6), 2.5);  // spans ns to seconds
  wait_histogram h;
  std::vector<std::int64_t> values;
  for (int i = 0; i < 20000; ++i) {
    const auto v = static_cast<std::int64_t>(dist(rng));
    values.push_back(v);
    h.record(std::chrono::nanoseconds(v));
  }
  std::vector<std::chrono::nanoseconds> bounds = {0ns, 63ns, 64ns, 1us, 2500ns, 1ms, 2500us, 1s, 10s};
  bounds.push_back(std::chrono::nanoseconds(wait_histogram::bucket_upper(wait_histogram::bucket_of(777'777))));
  std::sort(bounds.begin(), bounds.end());
  std::vector<std::uint64_t> out(bounds.size());
  EXPECT_EQ(h.cumulative_counts(bounds, out), values.size());
  const auto at_most = [&](double b) {
    return static_cast<std::uint64_t>(
        std::count_if(values.begin(), values.end(), [&](std::int64_t v) { return static_cast<double>(v) <= b; }));
  };
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    const auto b = static_cast<double>(bounds[i].count());
    EXPECT_LE(out[i], at_most(b)) << b;
    EXPECT_GE(out[i], at_most(b * (1 - wait_histogram::relative_error))) << b;
    if (i > 0) {
      EXPECT_GE(out[i], out[i - 1]);
    }
    const auto top = wait_histogram::bucket_upper(wait_histogram::bucket_of(bounds[i].count()));
    if (bounds[i].count() < wait_histogram::exact_below || top == bounds[i].count()) {
      EXPECT_EQ(out[i], at_most(b)) << b;  // a bound at the top of its bucket is exact
    }
  }
  std::uint64_t sum = 0;
  for (auto v : values) sum += static_cast<std::uint64_t>(v);
  EXPECT_EQ(static_cast<std::uint64_t>(h.sum().count()), sum);
}

TEST(WaitHistogram, CumulativeCountsRejectUnsortedBoundsAndAShortOutput) {
  wait_histogram h;
  const std::vector<std::chrono::nanoseconds> unsorted = {2us, 1us};
  std::vector<std::uint64_t> out(2);
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)h.cumulative_counts(unsorted, out); }),
              ::testing::HasSubstr("bounds must be ascending, got 1000ns after 2000ns"));
  std::vector<std::uint64_t> short_out(1);
  const std::vector<std::chrono::nanoseconds> sorted = {1us, 2us};
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)h.cumulative_counts(sorted, short_out); }),
              ::testing::HasSubstr("out has 1 elements, must have as many as bounds (2)"));
}

TEST(WaitHistogram, HugeDurationsDoNotOverflow) {
  wait_histogram h;
  h.record(std::chrono::nanoseconds::max());
  h.record(std::chrono::hours(24 * 365));
  EXPECT_EQ(h.percentile(100), std::chrono::nanoseconds::max());
  const auto year = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::hours(24 * 365));
  EXPECT_GE(h.percentile(50), year);
  EXPECT_LT(static_cast<double>(h.percentile(50).count()),
            static_cast<double>(year.count()) * (1 + wait_histogram::relative_error));
}

TEST(WaitHistogram, RejectsPercentilesOutsideZeroToHundred) {
  wait_histogram h;
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)h.percentile(101); }),
              ::testing::HasSubstr("got 101"));
  EXPECT_THAT(admit::testing::invalid_argument_message([&] { (void)h.percentile(-1); }),
              ::testing::HasSubstr("got -1"));
}

TEST(WaitHistogram, ConcurrentRecordsAreAllCounted) {
  wait_histogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) h.record(std::chrono::microseconds(t * 10000 + i));
      (void)h.summarize();  // readers run alongside writers
    });
  }
  for (auto& th : threads) th.join();
  const auto s = h.summarize();
  EXPECT_EQ(s.count, 40000u);
  EXPECT_EQ(s.max, std::chrono::microseconds(39999));
}

}  // namespace
