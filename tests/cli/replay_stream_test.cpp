// Tests of the streaming rate replay (cli/replay/replay.hpp's rate_replayer, cli/replay/arrival_source.hpp), its
// bounded delay percentiles (cli/replay/delay_percentiles.hpp) and timeline (cli/replay/rate_timeline.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli/common/decimal.hpp"
#include "cli/replay/arrival_source.hpp"
#include "cli/replay/delay_percentiles.hpp"
#include "cli/replay/rate_timeline.hpp"
#include "cli/replay/replay.hpp"
#include "cli/replay/report.hpp"

#include "replay_testing.hpp"
#include "stream_testing.hpp"

namespace {

using namespace admit::cli;
using namespace admit::cli::replay_testing;

// The nearest-rank percentile of `values` (sorted here), as the replay defines it.
std::int64_t stream_exact_rank(std::vector<std::int64_t> values, int percent) {
  std::sort(values.begin(), values.end());
  const auto n = static_cast<std::int64_t>(values.size());
  const std::int64_t k = std::max<std::int64_t>(1, (n * percent + 99) / 100);
  return values[static_cast<std::size_t>(k - 1)];
}

TEST(DelayPercentiles, ExactWhileUnderTheLimit) {
  delay_percentiles d;
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{0}, 4 * ms, 2 * ms, 10 * ms}) d.add(v);
  const delay_stats s = d.summarize();
  EXPECT_TRUE(d.exact());
  EXPECT_EQ(s.p50, 2 * ms);  // ranks: 0, 0, 2, 4, 10 ms
  EXPECT_EQ(s.p90, 10 * ms);
  EXPECT_EQ(s.max, 10 * ms);
  EXPECT_DOUBLE_EQ(s.mean, 16.0 * ms / 5);
}

TEST(DelayPercentiles, HistogramIsNeverBelowAndWithinOnePart256) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(15, 3);
  std::vector<std::int64_t> values;
  delay_percentiles d(1000);  // the histogram takes over after 1000 non-zero delays
  for (int i = 0; i < 20'000; ++i) {
    const auto v = i % 10 == 0 ? 0 : static_cast<std::int64_t>(std::min(dist(rng), 1e18));
    values.push_back(v);
    d.add(v);
  }
  const delay_stats s = d.summarize();
  EXPECT_FALSE(d.exact());
  for (const auto& [percent, got] : {std::pair{50, s.p50}, std::pair{90, s.p90}, std::pair{99, s.p99}}) {
    const std::int64_t exact = stream_exact_rank(values, percent);
    EXPECT_GE(got, exact) << "p" << percent;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(exact) * (1 + 1.0 / 256)) << "p" << percent;
  }
  EXPECT_EQ(s.max, *std::max_element(values.begin(), values.end()));
  // The histogram's size does not grow with the values.
  const std::size_t bytes = d.bytes();
  for (int i = 0; i < 100'000; ++i) d.add(i + 1);
  EXPECT_EQ(d.bytes(), bytes);
  EXPECT_LT(bytes, 200'000u);
}

TEST(DelayPercentiles, SmallValuesStayExactInTheHistogram) {
  delay_percentiles d(1);
  for (std::int64_t v = 1; v <= 255; ++v) d.add(v);
  const delay_stats s = d.summarize();
  EXPECT_EQ(s.p50, 128);
  EXPECT_EQ(s.p99, 253);
  EXPECT_EQ(s.max, 255);
}

// Buckets of every width the reports use (15 and 120 buckets, and the 1024 the grid is chosen for) are exact: the
// same as counting each arrival into its bucket.
TEST(RateTimeline, BucketsOfTheReportsWidthsAreExact) {
  std::mt19937_64 rng(11);
  for (const std::int64_t span : {3 * ms, 999 * ms, 61 * s, 7'200 * s, 400'000 * s}) {
    rate_timeline t;
    std::vector<std::pair<std::int64_t, std::int64_t>> offered, admitted;
    std::uniform_int_distribution<std::int64_t> at(0, span);
    std::vector<std::int64_t> times(3000);
    for (auto& x : times) x = at(rng);
    std::sort(times.begin(), times.end());
    for (std::size_t i = 0; i < times.size(); ++i) {
      const std::int64_t n = 1 + static_cast<std::int64_t>(i % 3);
      const bool rejected = i % 4 == 0;
      t.add_offered(times[i], n, rejected);
      offered.emplace_back(times[i], rejected ? -n : n);
      if (!rejected) {
        const std::int64_t when = times[i] + static_cast<std::int64_t>(i % 7) * span / 50;
        t.add_admitted(when, n);
        admitted.emplace_back(when, n);
      }
    }
    EXPECT_LT(t.size(), 31u * rate_timeline::min_grid_buckets) << span;
    for (const std::int64_t buckets : {15, 120, 1024}) {
      const std::int64_t width = choose_bucket_width(t.end_ns(), buckets);
      const auto rows = t.buckets(width);
      ASSERT_EQ(static_cast<std::int64_t>(rows.size()), t.end_ns() / width + 1);
      std::vector<bucket> want(rows.size());
      for (const auto& [when, n] : offered) {
        auto& b = want[static_cast<std::size_t>(when / width)];
        b.offered += n < 0 ? -n : n;
        if (n < 0) b.rejected += -n;
      }
      for (const auto& [when, n] : admitted) want[static_cast<std::size_t>(when / width)].admitted += n;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i].offered, want[i].offered) << span << " " << width << " " << i;
        EXPECT_EQ(rows[i].admitted, want[i].admitted) << span << " " << width << " " << i;
        EXPECT_EQ(rows[i].rejected, want[i].rejected) << span << " " << width << " " << i;
      }
    }
  }
}

// A trace generated line by line as it is read: arrival i at i * step_ns. It holds one line at a time.
class stream_generated_trace : public std::streambuf {
 public:
  stream_generated_trace(std::int64_t lines, std::int64_t step_ns) : lines_(lines), step_(step_ns) {}

 protected:
  int_type underflow() override {
    if (i_ == lines_) return traits_type::eof();
    line_ = format_seconds(i_ * step_) + "\n";
    ++i_;
    setg(line_.data(), line_.data(), line_.data() + line_.size());
    return traits_type::to_int_type(line_[0]);
  }

 private:
  std::int64_t lines_, step_, i_ = 0;
  std::string line_;
};

// 1.5 million arrivals every 0.5 ms through a 1000/s token bucket that reserves: arrival i waits i * 0.5 ms. More
// delays than delay_percentiles keeps exactly, so the percentiles come from its histogram; the timeline and the
// percentiles stay within their bounds, and every count is exact.
TEST(RateStream, LongTraceStaysWithinItsBounds) {
  constexpr std::int64_t lines = 1'500'000;
  stream_generated_trace generator(lines, ms / 2);
  std::istream in(&generator);
  trace_source arrivals(in);
  const auto settings =
      settings_for(algorithm::token_bucket, "1000/s", [](replay_config& c) { c.mode = replay_mode::reserve; });
  std::int64_t events = 0;
  rate_replay_options options;
  options.on_event = [&](const event& e, std::string_view) {
    EXPECT_EQ(e.delay_ns, e.t_ns);  // admitted at 2 t: arrival i at i/2 ms, its token at i ms
    ++events;
  };
  const replay_result r = replay(settings, arrivals, options);
  EXPECT_EQ(events, lines);
  EXPECT_EQ(r.arrivals, lines);
  EXPECT_EQ(r.admitted, lines);
  EXPECT_EQ(r.delayed, lines - 1);
  EXPECT_TRUE(r.events.empty());
  EXPECT_FALSE(r.delay_exact);
  const std::int64_t last = (lines - 1) * (ms / 2);
  EXPECT_EQ(r.last_ns, last);
  EXPECT_EQ(r.last_admission_ns, 2 * last);
  EXPECT_EQ(r.delay.max, last);
  // Delays 0, 0.5 ms, ..., last: the nearest-rank p50 is the delay of arrival ceil(lines / 2) - 1.
  const std::int64_t p50 = (lines / 2 - 1) * (ms / 2);
  EXPECT_GE(r.delay.p50, p50);
  EXPECT_LE(static_cast<double>(r.delay.p50), static_cast<double>(p50) * (1 + 1.0 / 256));
  EXPECT_LT(r.timeline.size(), 31u * rate_timeline::min_grid_buckets);
  const auto per_second = r.timeline.buckets(s);
  EXPECT_EQ(per_second.front().offered, 2000);
  EXPECT_EQ(per_second.front().admitted, 1000);
}

#ifdef NDEBUG
constexpr std::int64_t rate_stream_arrivals = 12'000'000;  // optimized: a few seconds
#else
constexpr std::int64_t rate_stream_arrivals = 1'000'000;  // unoptimized parsing and replay
#endif

// 12,000,000 arrivals (in the release build; fewer unoptimized), 4,000 a second, through a 1000/s token bucket with
// a burst of 10: read line by line from a generator, decided, forgotten. The process's peak resident set grows by
// less than 100 MB (the replay keeps under 10 MB; the rest is slack for the allocator), where the replay that held the
// trace took about 64 bytes an arrival (770 MB for these). No timing is checked: the machine may be shared.
TEST(RateStream, TwelveMillionArrivalsInBoundedMemory) {
  const long before_kb = stream_testing::peak_rss_kb();
  stream_generated_trace generator(rate_stream_arrivals, ms / 4);
  std::istream in(&generator);
  trace_source arrivals(in);
  const auto settings = settings_for(algorithm::token_bucket, "1000/s", [](replay_config& c) { c.burst = 10; });
  const replay_result r = replay(settings, arrivals);
  EXPECT_EQ(r.arrivals, rate_stream_arrivals);
  // The burst, then one token a millisecond: every fourth arrival.
  const double expected = 10 + static_cast<double>(r.last_ns) / ms;
  EXPECT_NEAR(static_cast<double>(r.admitted), expected, 2);
  EXPECT_EQ(r.admitted + r.rejected, r.arrivals);
  EXPECT_LT(r.timeline.size(), 31u * rate_timeline::min_grid_buckets);
  if (!stream_testing::sanitized) {
    const long growth_kb = stream_testing::peak_rss_kb() - before_kb;
    EXPECT_LT(growth_kb, 100 * 1024);
  }
}

TEST(RateStream, TimesThatGoBackAreRefused) {
  rate_replayer replayer(settings_for(algorithm::gcra, "1/s"));
  (void)replayer.add(arrival{2 * s, 1, 1});
  EXPECT_THROW((void)replayer.add(arrival{1 * s, 1, 2}), std::invalid_argument);
}

}  // namespace
