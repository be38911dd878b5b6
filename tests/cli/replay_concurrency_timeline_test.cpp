// Tests of cli/replay/concurrency_timeline.hpp: the bounded, bucketed record of permits in flight and requests waiting
// that the concurrency chart draws from.
#include "cli/replay/concurrency_timeline.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <utility>

namespace {

using admit::cli::concurrency_timeline;
using level = concurrency_timeline::level;

std::pair<std::int64_t, std::int64_t> peak(const concurrency_timeline& t, std::int64_t from, std::int64_t to) {
  const level l = t.peak(from, to);
  return {l.in_flight, l.waiting};
}

using pair = std::pair<std::int64_t, std::int64_t>;

TEST(ConcurrencyTimeline, KeepsTheLastStateOfAnInstant) {
  concurrency_timeline t;
  t.record(5, {3, 2});
  t.record(5, {1, 0});  // replaces the state at 5
  t.record(10, {0, 0});
  EXPECT_EQ(t.bucket_ns(), 1);
  EXPECT_EQ(peak(t, 0, 5), pair(0, 0));
  EXPECT_EQ(peak(t, 5, 6), pair(1, 0));
  EXPECT_EQ(peak(t, 0, 11), pair(1, 0));
  EXPECT_EQ(peak(t, 10, 1000), pair(0, 0));  // past the last report, its state holds
}

TEST(ConcurrencyTimeline, StateHeldBetweenReportsIsCounted) {
  concurrency_timeline t;
  t.record(0, {2, 1});
  t.record(3000, {0, 0});
  EXPECT_EQ(peak(t, 1000, 2000), pair(2, 1));  // no report inside: the state since 0
  EXPECT_EQ(peak(t, 3000, 4000), pair(0, 0));
}

TEST(ConcurrencyTimeline, WidensBucketsAndKeepsShortPeaks) {
  concurrency_timeline t;
  t.record(100, {5, 7});
  t.record(101, {0, 0});  // a 1 ns peak
  t.record(1'000'000'000, {1, 0});
  // 1 s in 4096 buckets: widths double from 1 ns to 2^18 ns.
  EXPECT_EQ(t.bucket_ns(), std::int64_t{1} << 18);
  EXPECT_EQ(peak(t, 0, 1000), pair(5, 7));  // the bucket [0, 2^18 ns) holds the peak
  EXPECT_EQ(peak(t, 500'000'000, 600'000'000), pair(0, 0));
  EXPECT_EQ(peak(t, 999'000'000, 2'000'000'000), pair(1, 0));
}

TEST(ConcurrencyTimeline, MarksSurviveWidening) {
  concurrency_timeline t;
  t.record(0, {1, 1});
  t.mark_queue_full(10);
  t.record(2'000, {1, 1});
  t.mark_timeout(1'999);
  t.record(1'000'000, {0, 0});
  const std::int64_t w = t.bucket_ns();
  ASSERT_EQ(w, 256);  // 1 ms in 4096 buckets; the marks land in buckets 0 and 7
  EXPECT_TRUE(t.queue_full_in(0, w));
  EXPECT_FALSE(t.queue_full_in(w, 1'000'000));
  EXPECT_FALSE(t.timeout_in(0, 1'999 / w * w));
  EXPECT_TRUE(t.timeout_in(1'999 / w * w, 1'999 / w * w + w));
  EXPECT_FALSE(t.timeout_in(8 * w, 1'000'000));
}

// Times up to the end of the int64 range (a saturated completion) widen the buckets without overflow.
TEST(ConcurrencyTimeline, HandlesTheEndOfTheTimeRange) {
  constexpr std::int64_t end = std::numeric_limits<std::int64_t>::max();
  concurrency_timeline t;
  t.record(0, {1, 0});
  t.mark_timeout(0);
  t.record(end - 1, {2, 0});
  t.record(end, {0, 0});
  EXPECT_EQ(peak(t, 0, end), pair(2, 0));
  EXPECT_EQ(peak(t, end / 2, end / 2 + 1), pair(1, 0));
  EXPECT_TRUE(t.timeout_in(0, end));
  EXPECT_FALSE(t.queue_full_in(0, end));
}

}  // namespace
