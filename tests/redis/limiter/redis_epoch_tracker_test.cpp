// The epoch tracker alone (src/redis/limiter/epoch_tracker.hpp), with explicit server times: a new epoch is lost
// state only while state this process saw written could still exist; a count that goes back in a later reply is lost
// state; each loss is reported once; detection off never reports.
#include "epoch_tracker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using admit::redis::detail::epoch_sighting;
using admit::redis::detail::epoch_tracker;

// An admission at server time `now` (µs) that wrote state living `reset` µs.
epoch_sighting admission(const char* id, std::int64_t seq, std::int64_t now, std::int64_t reset = 1000) {
  return {id, seq, now, true, reset};
}
// A refusal or a query: nothing written.
epoch_sighting refusal(const char* id, std::int64_t seq, std::int64_t now) { return {id, seq, now, false, 0}; }

TEST(RedisEpochTracker, ANewEpochWhileWrittenStateCouldLiveIsLostState) {
  epoch_tracker t;
  EXPECT_FALSE(t.observe(admission("a", 1, 10'000, 5'000)));  // state alive until 15,000
  EXPECT_FALSE(t.observe(admission("a", 2, 11'000, 5'000)));  // until 16,000
  EXPECT_TRUE(t.observe(refusal("b", 0, 15'999)));            // a flush: "b" replaced "a" before 16,000
  EXPECT_FALSE(t.observe(refusal("b", 0, 16'500)));           // reported once
}

TEST(RedisEpochTracker, ANewEpochAfterTheWrittenStateExpiredIsNot) {
  epoch_tracker t;
  EXPECT_FALSE(t.observe(admission("a", 1, 10'000, 5'000)));
  EXPECT_FALSE(t.observe(admission("b", 1, 15'000)));  // at the state's expiry: the epoch expired with it
  EXPECT_FALSE(t.observe(admission("c", 1, 90'000)));
}

TEST(RedisEpochTracker, ANewEpochWhenThisProcessWroteNothingIsNot) {
  epoch_tracker t;
  EXPECT_FALSE(t.observe(refusal("a", 7, 10'000)));
  EXPECT_FALSE(t.observe(refusal("b", 0, 10'001)));  // another process's state, not ours
}

TEST(RedisEpochTracker, ACountThatGoesBackInALaterReplyIsLostState) {
  epoch_tracker t;
  EXPECT_FALSE(t.observe(admission("a", 3, 10'000)));
  EXPECT_TRUE(t.observe(admission("a", 2, 10'001)));   // a failover to a replica that lacked the third admission
  EXPECT_FALSE(t.observe(admission("a", 3, 10'002)));  // the tracker follows the regressed count: once
  EXPECT_FALSE(t.observe(admission("a", 4, 10'003)));
}

TEST(RedisEpochTracker, ALowerCountAtTheSameOrAnEarlierTimeIsReordering) {
  // Replies of one batch share a server time, and concurrent replies may be read out of order: a lower count at a
  // time not later than the highest seen is an older reply, not a regression.
  epoch_tracker t;
  EXPECT_FALSE(t.observe(admission("a", 5, 10'000)));
  EXPECT_FALSE(t.observe(admission("a", 4, 10'000)));
  EXPECT_FALSE(t.observe(admission("a", 3, 9'999)));
  EXPECT_FALSE(t.observe(admission("a", 6, 10'001)));
}

TEST(RedisEpochTracker, DetectionOffNeverReports) {
  epoch_tracker t;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(t.observe({{}, 10 - i, 1'000 + i, 1, 1'000'000}));
}

TEST(RedisEpochTracker, ConcurrentObserversReportOneLossOnce) {
  for (int round = 0; round < 50; ++round) {
    epoch_tracker t;
    ASSERT_FALSE(t.observe(admission("a", 1, 10'000, 1'000'000)));
    std::atomic<int> reported{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] {
        for (int j = 0; j < 100; ++j) {
          // The count grows with the server time (no regression): only the new epoch is a loss.
          const std::int64_t now = 20'000 + i * 100 + j;
          reported += t.observe(admission("b", now - 19'999, now)) ? 1 : 0;
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_EQ(reported.load(), 1) << "round " << round;
  }
}

}  // namespace
