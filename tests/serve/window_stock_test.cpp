// serve/engine/window_stock.hpp: a fixed-window counter's prefetched hits — spent here until gone, refilled by one call
// at a time and never above N − 1, never by a check of 0 or a hit as large as the prefetch, never spent after its
// window's end; and a window a reply showed full refused here. The hits that wait for a refill: handed back by it,
// whatever happened meanwhile (the window's end, a reload).
#include "serve/engine/window_stock.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace admit::serve::detail {
namespace {

TEST(WindowStock, OneCallRefillsAndTheHitsAreSpentUntilGone) {
  window_stock<int> s;
  auto p = s.take("k", 1, 20, 1000, false, 100, 10);
  EXPECT_FALSE(p.served);
  EXPECT_TRUE(p.refill);
  EXPECT_EQ(p.take, 20U);
  // While that call is out, a hit that cannot wait asks Redis for itself.
  auto q = s.take("k", 1, 20, 1000, false, 100, 10);
  EXPECT_FALSE(q.served);
  EXPECT_FALSE(q.refill);
  EXPECT_EQ(q.take, 1U);
  (void)s.refilled("k", 19);  // Redis added 20: the call's 1 and 19 for the stock
  for (std::uint32_t left = 18;; --left) {
    const auto r = s.take("k", 1, 20, 1000, false, 100, 11);
    ASSERT_TRUE(r.served);
    EXPECT_EQ(r.left, left);
    if (left == 0) break;
  }
  EXPECT_TRUE(s.take("k", 1, 20, 1000, false, 100, 11).refill);  // gone: the next refills
}

TEST(WindowStock, NeverHoldsNOrMore) {
  window_stock<int> s;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0).refill);
  (void)s.refilled("k", 9);
  ASSERT_TRUE(s.take("k", 5, 10, 1000, false, 100, 0).served);  // 4 left
  const auto p = s.take("k", 6, 10, 1000, false, 100, 0);       // 4 < 6: refills, asking for 10 of which 6 are its own
  ASSERT_TRUE(p.refill);
  EXPECT_EQ(p.take, 10U);
  (void)s.refilled("k", 4);  // at most take − n = 4 more: 8 <= N − 1
  EXPECT_TRUE(s.take("k", 8, 10, 1000, false, 100, 0).served);
  EXPECT_FALSE(s.take("k", 1, 10, 1000, false, 100, 0).served);
}

TEST(WindowStock, AChecksAndLargeHitsNeverPrefetch) {
  window_stock<int> s;
  const auto check = s.take("k", 0, 10, 1000, false, 100, 0);
  EXPECT_FALSE(check.served);
  EXPECT_FALSE(check.refill);
  EXPECT_EQ(check.take, 0U);
  const auto large = s.take("k", 10, 10, 1000, false, 100, 0);
  EXPECT_FALSE(large.refill);
  EXPECT_EQ(large.take, 10U);
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0).refill);
  (void)s.refilled("k", 3);
  EXPECT_TRUE(s.take("k", 0, 10, 1000, false, 100, 0).served);  // a check with hits in stock is answered here
}

TEST(WindowStock, TheStockEndsWithItsWindow) {
  window_stock<int> s;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 99).refill);
  (void)s.refilled("k", 9);
  EXPECT_TRUE(s.take("k", 1, 10, 1000, false, 100, 99).served);
  EXPECT_FALSE(s.take("k", 1, 10, 1000, false, 100, 100).served);  // the window ended at 100: its 8 hits are dropped
}

TEST(WindowStock, AFullWindowAReplyShowedIsRefusedHere) {
  window_stock<int> s;
  s.learned("k", 50, 100);  // the counter holds 50 of a limit of 50
  const auto p = s.take("k", 1, 10, 50, false, 100, 0);
  EXPECT_TRUE(p.refused);
  EXPECT_EQ(p.known, 50U);
  EXPECT_FALSE(s.take("k", 0, 10, 50, false, 100, 0).refused) << "exactly at the limit: a check of 0 is not over it";
  s.learned("k", 51, 100);
  EXPECT_TRUE(s.take("k", 0, 10, 50, false, 100, 0).refused);
  EXPECT_FALSE(s.take("k", 1, 10, 50, false, 200, 100).refused) << "the next window knows nothing";
  s.learned("j", 49, 100);
  EXPECT_FALSE(s.take("j", 1, 10, 50, false, 100, 0).refused) << "one hit still fits";
  // Where refused hits are counted, exactly at the limit is sent to Redis (to be counted), above it refused here.
  s.learned("c", 50, 100);
  EXPECT_FALSE(s.take("c", 1, 10, 50, true, 100, 0).refused);
  s.learned("c", 51, 100);
  EXPECT_TRUE(s.take("c", 1, 10, 50, true, 100, 0).refused);
}

TEST(WindowStock, AFullTableOfLiveWindowsIsSweptOncePerWindowEnd) {
  window_stock<int> s(2);
  EXPECT_TRUE(s.take("a", 1, 10, 1000, false, 100, 0).refill);
  EXPECT_TRUE(s.take("b", 1, 10, 1000, false, 300, 0).refill);
  EXPECT_FALSE(s.take("c", 1, 10, 1000, false, 300, 50).refill) << "full, and no window has ended";
  EXPECT_FALSE(s.take("d", 1, 10, 1000, false, 300, 99).refill);
  EXPECT_TRUE(s.take("e", 1, 10, 1000, false, 300, 100).refill) << "a's window ended at 100: swept";
  EXPECT_EQ(s.size(), 2U);
}

TEST(WindowStock, AReloadForgetsEveryStock) {
  window_stock<int> s;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0).refill);
  (void)s.refilled("k", 9);
  s.clear();
  EXPECT_FALSE(s.take("k", 1, 10, 1000, false, 100, 0).served);
}

TEST(WindowStock, AFailedRefillEndsTheRefill) {
  window_stock<int> s;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0).refill);
  (void)s.refilled("k", 0);
  EXPECT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0).refill);
}

TEST(WindowStock, BeyondMaxKeysOtherCountersAskForThemselves) {
  window_stock<int> s(2);
  EXPECT_TRUE(s.take("a", 1, 10, 1000, false, 100, 0).refill);
  EXPECT_TRUE(s.take("b", 1, 10, 1000, false, 100, 0).refill);
  EXPECT_FALSE(s.take("c", 1, 10, 1000, false, 100, 0).refill);
  (void)s.refilled("a", 0);
  (void)s.refilled("b", 0);
  EXPECT_TRUE(s.take("c", 1, 10, 1000, false, 200, 150).refill);  // a and b's windows ended: swept
  EXPECT_EQ(s.size(), 1U);
}

TEST(WindowStock, HitsWaitForTheRefillUnderWayAndComeBackFromIt) {
  window_stock<int> s;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0).refill);
  for (int id = 1; id <= 3; ++id) {
    int waiter = id;
    const auto p = s.take("k", 2, 10, 1000, false, 100, 0, &waiter);
    EXPECT_TRUE(p.waiting);
    EXPECT_FALSE(p.served || p.refill || p.refused);
  }
  int large = 7;
  EXPECT_FALSE(s.take("k", 10, 10, 1000, false, 100, 0, &large).waiting) << "as large as the prefetch: its own call";
  EXPECT_EQ(s.refilled("k", 9), (std::vector<int>{1, 2, 3}));  // in their order, once
  EXPECT_TRUE(s.refilled("k", 0).empty());
  // Taken again, they are served from the new stock: 9 = 2 + 2 + 2 + 3 left.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.take("k", 2, 10, 1000, false, 100, 0).served);
  EXPECT_EQ(s.take("k", 3, 10, 1000, false, 100, 0).left, 0U);
}

TEST(WindowStock, AReloadDuringARefillKeepsItTheOnlyRefillAndDropsItsHits) {
  window_stock<int> s;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0).refill);
  s.clear();  // a reload while that refill is out
  int waiter = 5;
  EXPECT_TRUE(s.take("k", 1, 10, 1000, false, 100, 0, &waiter).waiting) << "not a second refill of the counter";
  s.learned("k", 10, 100);  // the refill's reply, seen first by learned(): it must not revive the dropped stock
  EXPECT_EQ(s.refilled("k", 9), (std::vector<int>{5}));
  const auto again = s.take("k", 1, 10, 1000, false, 100, 0);
  EXPECT_FALSE(again.served) << "hits taken under the old rule are not spent under the new one";
  EXPECT_TRUE(again.refill);
}

TEST(WindowStock, WaitingHitsOutliveTheWindowsEndAndAReload) {
  window_stock<int> s;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 99).refill);
  int waiter = 42;
  ASSERT_TRUE(s.take("k", 1, 10, 1000, false, 100, 99, &waiter).waiting);
  // The window ends, a sweep and a reload pass: the waiting hit stays, and nothing of the ended window is served.
  const auto late = s.take("k", 1, 10, 1000, false, 100, 100);
  EXPECT_FALSE(late.served || late.refill || late.waiting) << "a hit of an ended window asks for itself";
  s.clear();
  EXPECT_EQ(s.size(), 1U);
  EXPECT_EQ(s.refilled("k", 9), (std::vector<int>{42}));
  EXPECT_FALSE(s.take("k", 1, 10, 1000, false, 200, 150).served) << "the refill's hits were not kept after the reload";
}

}  // namespace
}  // namespace admit::serve::detail
