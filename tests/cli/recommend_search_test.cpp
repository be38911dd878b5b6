// Tests of `admit recommend`'s search (cli/recommend/search.hpp): the bracketing and halving over whole positions,
// the grid of rates and its decimals, and the exact shares of cli/recommend/recommend.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cli/recommend/recommend.hpp"
#include "cli/recommend/search.hpp"

namespace recommend_search_test {
namespace {

using namespace admit::cli;

TEST(LeastMeeting, FindsTheThresholdFromAnyStartWithFewProbes) {
  for (const std::int64_t threshold : {1, 2, 7, 100, 999, 1000, 123'456}) {
    for (const std::int64_t start : {1, 5, 500, 1000, 1'000'000}) {
      std::set<std::int64_t> probed;
      const auto found = least_meeting({1, 1'000'000, start, 1}, [&](std::int64_t k) {
        probed.insert(k);
        return k >= threshold;
      });
      SCOPED_TRACE("threshold " + std::to_string(threshold) + " start " + std::to_string(start));
      ASSERT_TRUE(found.least);
      EXPECT_EQ(*found.least, threshold);
      EXPECT_EQ(found.below_fails, threshold > 1);
      if (threshold > 1) {
        EXPECT_TRUE(probed.count(threshold - 1));  // the one below was replayed
      }
      EXPECT_LE(probed.size(), 45U);  // O(log): bracketing by fourfold steps, then halving
    }
  }
}

TEST(LeastMeeting, NothingMeetsAtTheTop) {
  const auto found = least_meeting({1, 50, 3, 1}, [](std::int64_t) { return false; });
  EXPECT_FALSE(found.least);
}

TEST(LeastMeeting, EndsOnAMeetingPositionWhoseNeighbourFailsEvenWhenNotMonotone) {
  // Meets on [10, 20) and from 40 on: either edge is an answer; whichever it finds, the one below must fail.
  const auto meets = [](std::int64_t k) { return (k >= 10 && k < 20) || k >= 40; };
  for (std::int64_t start = 1; start <= 60; ++start) {
    const auto found = least_meeting({1, 100, start, 1}, meets);
    ASSERT_TRUE(found.least);
    EXPECT_TRUE(meets(*found.least));
    EXPECT_TRUE(found.below_fails);
    EXPECT_FALSE(meets(*found.least - 1)) << "start " << start;
  }
}

TEST(Decimal, TextIsExactWithoutExponentOrTrailingZeros) {
  EXPECT_EQ((decimal{123, -2}).text(), "1.23");
  EXPECT_EQ((decimal{120, -2}).text(), "1.2");
  EXPECT_EQ((decimal{100, -2}).text(), "1");
  EXPECT_EQ((decimal{123, 1}).text(), "1230");
  EXPECT_EQ((decimal{100, -8}).text(), "0.000001");
  EXPECT_EQ((decimal{0, 0}).text(), "0");
  EXPECT_EQ((decimal{342, 0}).tighter().text(), "338.58");
  EXPECT_DOUBLE_EQ((decimal{342, 0}).tighter().value(), 338.58);
}

// The value is the double nearest the decimal, as a rate written on the command line is read (the JSON of recommend
// said 1.1500000000000001 for 1.15).
TEST(Decimal, ValueIsTheNearestDouble) {
  EXPECT_EQ((decimal{115, -2}).value(), 1.15);
  EXPECT_EQ((decimal{123, -2}).value(), 1.23);
  EXPECT_EQ((decimal{1, -6}).value(), 0.000001);
  EXPECT_EQ((decimal{999, 6}).value(), 999e6);
  for (std::int64_t p = 0; p <= rate_grid::last; p += 7) {
    const decimal d = rate_grid::at(p);
    EXPECT_EQ(d.value(), std::stod(d.text())) << d.text();
  }
}

TEST(RateGrid, NeighboursAreAtMostOnePercentApartAndFloorIsExact) {
  for (std::int64_t p = 0; p < rate_grid::last; ++p) {
    const double here = rate_grid::at(p).value(), next = rate_grid::at(p + 1).value();
    ASSERT_LT(here, next) << p;
    ASSERT_LE(next, here * 1.0100000001) << p;
    ASSERT_EQ(rate_grid::floor(here), p) << rate_grid::at(p).text();
    ASSERT_EQ(rate_grid::floor((here + next) / 2), p) << rate_grid::at(p).text();
  }
  EXPECT_EQ(rate_grid::at(0).text(), "0.000001");
  EXPECT_EQ(rate_grid::at(rate_grid::last).text(), "999000000");
  EXPECT_EQ(rate_grid::floor(0), 0);
  EXPECT_EQ(rate_grid::floor(1e12), rate_grid::last);
  EXPECT_EQ(rate_grid::at(rate_grid::floor(342)).text(), "342");
  EXPECT_EQ(rate_grid::at(rate_grid::floor(338.58)).text(), "338");
}

TEST(Percentage, AdmitsExactlyAtItsBound) {
  const percentage one{1'000'000'000};  // 1%
  EXPECT_TRUE(one.admits(100, 10'000));
  EXPECT_FALSE(one.admits(101, 10'000));
  EXPECT_TRUE(one.admits(0, 0));
  EXPECT_FALSE(one.admits(1, 99));
  EXPECT_TRUE(one.admits(1, 100));
  const percentage tiny{1};  // 0.000000001%: one in 10^11
  EXPECT_TRUE(tiny.admits(1, 100'000'000'000));
  EXPECT_FALSE(tiny.admits(1, 99'999'999'999));
  EXPECT_EQ(one.text(), "1%");
  EXPECT_EQ((percentage{250'000'000}).text(), "0.25%");
  EXPECT_DOUBLE_EQ(one.fraction(), 0.01);
}

TEST(FrontierKnee, IsThePointFarthestBelowTheChordOnLogScales) {
  std::vector<rate_point> frontier;
  for (const auto& [burst, rate] :
       {std::pair{1, 1000.0}, std::pair{10, 120.0}, std::pair{100, 100.0}, std::pair{1000, 90.0}}) {
    rate_point p;
    p.burst = burst;
    p.rate_per_second = rate;
    frontier.push_back(p);
  }
  ASSERT_NE(frontier_knee(frontier), nullptr);
  EXPECT_EQ(frontier_knee(frontier)->burst, 10);
  EXPECT_EQ(frontier_knee({}), nullptr);
  // A last point whose burst holds the whole trace (its rate only the least the search tried) takes no part: it made
  // the line end far below the others, and the knee the first point.
  rate_point holds_all;
  holds_all.burst = 10'000;
  holds_all.rate_per_second = 0.00000217;
  frontier.push_back(holds_all);
  EXPECT_EQ(frontier_knee(frontier, 7'525)->burst, 10);
  EXPECT_EQ(frontier_knee(frontier)->burst, 1);  // without the trace's tokens: it counts
  frontier.resize(1);
  EXPECT_EQ(frontier_knee(frontier)->burst, 1);
}

}  // namespace
}  // namespace recommend_search_test
