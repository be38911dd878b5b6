// Tests of the nearest-name suggestion of unknown options (src/cli/common/suggest.hpp).
#include "cli/common/suggest.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using admit::cli::edit_distance;
using admit::cli::nearest_name;

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndTranspositions) {
  EXPECT_EQ(edit_distance("burst", "burst"), 0U);
  EXPECT_EQ(edit_distance("brust", "burst"), 1U);  // one transposition
  EXPECT_EQ(edit_distance("tiemout", "timeout"), 1U);
  EXPECT_EQ(edit_distance("rat", "rate"), 1U);
  EXPECT_EQ(edit_distance("rte", "rate"), 1U);
  EXPECT_EQ(edit_distance("rxte", "rate"), 1U);
  EXPECT_EQ(edit_distance("", "rate"), 4U);
  EXPECT_EQ(edit_distance("abc", ""), 3U);
}

TEST(NearestName, SuggestsOnlyWhatIsClose) {
  const std::vector<std::string> names{"algorithm", "rate", "burst", "window", "timeout", "max-waiters"};
  EXPECT_EQ(nearest_name("brust", names), "burst");
  EXPECT_EQ(nearest_name("tiemout", names), "timeout");
  EXPECT_EQ(nearest_name("max-waiter", names), "max-waiters");
  EXPECT_EQ(nearest_name("frobnicate", names), std::nullopt);
  EXPECT_EQ(nearest_name("x", names), std::nullopt);  // one letter is close to nothing
  EXPECT_EQ(nearest_name("rat", names), "rate");      // a letter short
  EXPECT_EQ(nearest_name("windwo", names), "window");
}

}  // namespace
