// admit::token_bucket's waiting members on the manual clock: sleeping until tokens arrive, failing at once when
// the deadline cannot be met or the request can never fit, cancellation giving tokens back, arrival order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"

namespace {

using namespace std::chrono_literals;
using admit::rate;

using manual = admit::testing::manual_clock;
using manual_bucket = admit::basic_token_bucket<manual>;

class TokenBucketWait : public ::testing::Test {
 protected:
  void SetUp() override { manual::reset(); }
};

TEST_F(TokenBucketWait, AcquireSleepsUntilTokensArrive) {
  manual_bucket lim{rate::per_second(10), 3};
  ASSERT_TRUE(lim.acquire(2));  // act now
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    EXPECT_TRUE(lim.acquire(3));  // needs 2 more: 200 ms
    done = true;
  });
  manual::wait_for_sleepers(1);
  EXPECT_EQ(manual::advance(100ms), 0U);
  EXPECT_FALSE(done.load());
  EXPECT_EQ(manual::advance(100ms), 1U);
  waiter.join();
  EXPECT_TRUE(done.load());
}

TEST_F(TokenBucketWait, AcquireFailsAtOnceAboveBurstOrWhenAlreadyStopped) {
  manual_bucket lim{rate::per_second(10), 3};
  EXPECT_EQ(lim.acquire(4).error(), admit::errc::exceeds_capacity);
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_EQ(lim.acquire(1, stopped.get_token()).error(), admit::errc::cancelled);
  EXPECT_EQ(lim.tokens_at(manual::now()), 3);
  manual_bucket unlimited{rate::inf(), 0};
  EXPECT_TRUE(unlimited.acquire(3));
}

TEST_F(TokenBucketWait, CancelledWaitGivesItsTokensBack) {
  manual_bucket lim{rate::per_second(10), 3};
  ASSERT_TRUE(lim.acquire(2));  // 1 token left
  std::stop_source stop;
  std::thread waiter([&] { EXPECT_EQ(lim.acquire(3, stop.get_token()).error(), admit::errc::cancelled); });
  manual::wait_for_sleepers(1);
  manual::advance(100ms);  // 2 tokens now, the waiter still needs 1 more
  stop.request_stop();
  waiter.join();
  // The 3 reserved tokens come back: 2 tokens at +100 ms, as if the wait never happened.
  EXPECT_EQ(lim.tokens_at(manual::now()), 2);
  EXPECT_TRUE(lim.try_acquire(2));
}

TEST_F(TokenBucketWait, TimedAcquireFailsAtOnceWhenTheDeadlineCannotBeMet) {
  manual_bucket lim{rate::per_second(10), 3};
  ASSERT_TRUE(lim.acquire(2));
  const auto start = manual::now();
  EXPECT_EQ(lim.try_acquire_for(100ms, 3).error(), admit::errc::timeout);  // needs 200 ms
  EXPECT_EQ(manual::now(), start);                                         // did not sleep in vain
  EXPECT_EQ(lim.tokens_at(start), 1);                                      // took nothing
  EXPECT_FALSE(lim.try_acquire_for(-5s, 2));                               // negative timeout: only an immediate grant
  EXPECT_TRUE(lim.try_acquire_for(0s, 1));
  EXPECT_EQ(lim.try_acquire_for(std::chrono::hours::max(), 4).error(),
            admit::errc::exceeds_capacity);  // above the burst: no overflow, fails at once
  std::thread waiter([&] { EXPECT_TRUE(lim.try_acquire_until(start + 1s, 1)); });
  manual::wait_for_sleepers(1);
  manual::advance(100ms);
  waiter.join();
}

// A wait with a deadline can be cancelled too (Go's WaitN with a context that has both): the tokens come back.
TEST_F(TokenBucketWait, ATimedWaitIsCancelledByItsStopToken) {
  manual_bucket lim{rate::per_second(10), 3};
  ASSERT_TRUE(lim.acquire(2));  // 1 token left
  std::stop_source stop;
  std::thread waiter([&] { EXPECT_EQ(lim.try_acquire_for(1s, 3, stop.get_token()).error(), admit::errc::cancelled); });
  manual::wait_for_sleepers(1);
  stop.request_stop();
  waiter.join();
  EXPECT_EQ(lim.tokens_at(manual::now()), 1);
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_EQ(lim.try_acquire_until(manual::now() + 1s, 2, stopped.get_token()).error(), admit::errc::cancelled);
  EXPECT_EQ(lim.tokens_at(manual::now()), 1);
}

TEST_F(TokenBucketWait, WaitersAreServedInArrivalOrder) {
  manual_bucket lim{rate::per_second(10), 1};
  ASSERT_TRUE(lim.try_acquire());
  std::vector<int> order;
  std::mutex m;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 5; ++i) {
    waiters.emplace_back([&, i] {
      ASSERT_TRUE(lim.acquire());
      std::lock_guard lock(m);
      order.push_back(i);
    });
    manual::wait_for_sleepers(static_cast<std::size_t>(i) + 1);  // i-th waiter queued before the next starts
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(manual::advance(100ms), 1U);  // exactly one waiter per token
    for (;;) {
      std::lock_guard lock(m);
      if (order.size() == static_cast<std::size_t>(i) + 1) break;
    }
  }
  for (auto& th : waiters) th.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

// A request that cannot be served does not block the requests behind it that would fit (as a queue whose head waits
// for more than the burst blocks everyone forever). A request that cannot be served within its deadline fails at once
// and takes nothing, so it never stands in front of a later small request; and a request larger than the burst is
// refused at once instead of waiting forever at the head. (The pacer's counterpart is in tests/pacer_test.cpp.)
TEST(TokenBucket, AnUnservableHeadDoesNotBlockThoseBehind) {
  using clock = admit::testing::manual_clock;
  clock::reset();
  admit::basic_token_bucket<clock> bucket{rate::per_second(10), 5};
  ASSERT_TRUE(bucket.try_acquire(4));                                         // 1 token left
  EXPECT_EQ(bucket.try_acquire_for(100ms, 5).error(), admit::errc::timeout);  // needs 400 ms: fails now, takes nothing
  EXPECT_EQ(bucket.acquire(6).error(), admit::errc::exceeds_capacity);        // can never fit: fails now
  EXPECT_TRUE(bucket.try_acquire(1));  // the small request behind them is served at once
}

}  // namespace
