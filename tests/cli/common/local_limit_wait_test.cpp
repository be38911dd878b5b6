// The bounds of waiting for the host-local limit of `admit run` (src/cli/common/local_limit.hpp): max_waiters, no
// wait, a deadline and a stop_token, each leaving no entry behind; and its GCRA rate (spacing, a burst counting
// weights, the state of another boot ignored).
#include <gtest/gtest.h>

#include "local_limit_testing.hpp"

namespace {

using namespace admit::cli::local_limit_testing;

TEST_F(LocalLimit, MaxWaitersRefusesOneMore) {
  auto c = config(1);
  c.max_waiters = 1;
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::stop_source stop;
  std::optional<admit::expected<local_permit, std::error_code>> first;
  std::jthread waiter([&] { first.emplace(local_limit(c).acquire(in(10s), false, stop.get_token())); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  auto start = steady_clock::now();
  EXPECT_EQ(local_limit(c).acquire(in(10s), false, {}).error(), admit::errc::queue_full);
  EXPECT_LT(steady_clock::now() - start, 2s);
  EXPECT_EQ(files("w."), 1u);
  stop.request_stop();
  waiter.join();
  EXPECT_EQ(first->error(), admit::errc::cancelled);
  // Admitted at once needs no place in the queue, even with max_waiters 0.
  held->release();
  c.max_waiters = 0;
  EXPECT_TRUE(local_limit(c).acquire(in(10s), false, {}));
}

TEST_F(LocalLimit, NoWaitFailsAtOnceAndLeavesNoEntry) {
  auto c = config(2, 2);
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  EXPECT_EQ(files("w."), 0u);
  EXPECT_EQ(files("h."), 1u);
  held->release();
  EXPECT_EQ(files("h."), 0u);
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
}

TEST_F(LocalLimit, TimeoutLeavesTheQueue) {
  auto c = config(1);
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  auto start = steady_clock::now();
  auto r = local_limit(c).acquire(start + 100ms, false, {});
  EXPECT_EQ(r.error(), admit::errc::timeout);
  EXPECT_GE(steady_clock::now() - start, 100ms);
  EXPECT_EQ(files("w."), 0u);
  EXPECT_EQ(local_limit(c).acquire(steady_clock::now() - 1s, false, {}).error(), admit::errc::timeout);
}

TEST_F(LocalLimit, StopTokenCancelsAtOnce) {
  auto c = config(1);
  c.poll_interval = 30s;
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::stop_source stop;
  std::optional<admit::expected<local_permit, std::error_code>> r;
  steady_clock::time_point returned;
  std::jthread waiter([&] {
    r.emplace(local_limit(c).acquire(std::nullopt, false, stop.get_token()));
    returned = steady_clock::now();
  });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  auto requested = steady_clock::now();
  stop.request_stop();
  waiter.join();
  EXPECT_EQ(r->error(), admit::errc::cancelled);
  EXPECT_LT(returned - requested, 2s);  // a wake-up, not the 30 s poll
  EXPECT_EQ(files("w."), 0u);
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, false, stop.get_token()).error(), admit::errc::cancelled);
}

TEST_F(LocalLimit, RateSpacesAdmissions) {
  auto c = config(0);
  c.interval = 50ms;
  std::vector<std::chrono::nanoseconds> rate_waits;
  auto before = steady_clock::now();
  for (int k = 0; k < 4; ++k) {
    auto p = local_limit(c).acquire(in(5s), false, {}, [&](const wait_progress& w) {
      if (w.rate_wait) rate_waits.push_back(*w.rate_wait);
    });
    ASSERT_TRUE(p);
    EXPECT_GE(steady_clock::now() - before, k * 50ms) << "admission " << k;
  }
  ASSERT_FALSE(rate_waits.empty());
  for (auto w : rate_waits) EXPECT_LE(w, 50ms);
}

// The rate's wait that progress reports counts down between the checks (it was the last check's figure, unchanged
// for up to poll_interval: "in 1.98s" for the first second of a 2 s wait, then "980ms" for the next).
TEST_F(LocalLimit, TheRatesWaitCountsDownBetweenChecks) {
  auto c = config(0);
  c.interval = 10s;
  c.poll_interval = 30s;
  c.watched_poll_interval = 30s;
  ASSERT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));  // the bucket's one token
  std::vector<std::chrono::nanoseconds> seen;
  std::stop_source stop;
  const auto r = local_limit(c).acquire(
      std::nullopt, false, stop.get_token(),
      [&](const wait_progress& w) {
        if (w.rate_wait) seen.push_back(*w.rate_wait);
        if (seen.size() == 3) stop.request_stop();
      },
      20ms);
  EXPECT_EQ(r.error(), admit::errc::cancelled);
  ASSERT_EQ(seen.size(), 3u);
  // Down at every report, with no check in between (the next is 30 s away): it stood still until the next check.
  for (std::size_t k = 1; k < seen.size(); ++k) EXPECT_LT(seen[k], seen[k - 1]) << "report " << k;
}

TEST_F(LocalLimit, RateBurstCountsWeights) {
  auto c = config(0, 2);
  c.interval = 10s;
  c.burst = 3;
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  c.weight = 1;
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  c.weight = 4;
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::exceeds_capacity);
}

// As admit::admission: a deadline by which the rate cannot have the tokens fails at once, leaving no entry.
TEST_F(LocalLimit, ADeadlineTheRateCannotMeetFailsAtOnce) {
  auto c = config(0);
  c.interval = 1000s;
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  const auto start = steady_clock::now();
  EXPECT_EQ(local_limit(c).acquire(in(100s), false, {}).error(), admit::errc::timeout);
  EXPECT_LT(steady_clock::now() - start, 10s);  // not the 100 s deadline
  EXPECT_EQ(files("w."), 0u);
  // Once nobody takes part, a faster rate may be given: the slower rate's state, far ahead of anything this one can
  // make, counts as an empty bucket that refills from now (it used to be re-clamped at each look, and never refilled).
  c.interval = 20ms;
  const auto faster = steady_clock::now();
  EXPECT_TRUE(local_limit(c).acquire(in(10s), false, {}));
  EXPECT_LT(steady_clock::now() - faster, 5s);
}

TEST_F(LocalLimit, RateStateOfAnotherBootIsIgnored) {
  auto c = config(0);
  c.interval = 10s;
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  std::ofstream(name_dir() / "rate") << R"({"boot_id":"another boot","tat_ns":9000000000000000000})" << '\n';
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
}

}  // namespace
