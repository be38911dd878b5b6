// admit::admission's share rule between classes: the guaranteed permits (shares apportioned by largest remainder),
// a class borrowing what others leave unused, a class below its share served before a borrower, and a borrower that
// takes neither the tokens nor the permits an entitled class waits for — deterministic (manual clock, observers of
// the queue; nothing sleeps to make time pass).
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "admission_testing.hpp"
#include "admit/admission.hpp"

// In the helpers' namespace (admission_testing.hpp), so that their names are found before any other file's when a
// unity build compiles several test files as one.
namespace admit::testing::admission_tests {

using namespace std::chrono_literals;

TEST_F(Admission, ALargeHeadHoldsBackSmallerRequestsOfItsClassButNotOtherClasses) {
  manual_admission adm{{.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.5}}}};
  auto held = adm.try_acquire(0, 2);
  ASSERT_TRUE(held);
  auto large = std::async(std::launch::async, [&] { return adm.acquire({}, 0, 3); });
  wait_for_waiters(adm, 1);
  EXPECT_EQ(adm.try_acquire(0, 1).error(), errc::would_block);  // FIFO: behind the large head of its class
  auto other = adm.try_acquire(1, 2);                           // b's own share is free
  ASSERT_TRUE(other);
  other->release();
  held->release();
  auto r = large.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->count(), 3);
}

TEST_F(Admission, GuaranteedPermitsAreTheSharesApportionedByLargestRemainder) {
  manual_admission adm{{.max_in_flight = 10, .classes = {{"a", 0.55}, {"b", 0.25}, {"c", 0.2}}}};
  EXPECT_EQ(adm.guaranteed_permits(0), 6);  // 5.5 and 2.5: the tie goes to the lower index
  EXPECT_EQ(adm.guaranteed_permits(1), 2);
  EXPECT_EQ(adm.guaranteed_permits(2), 2);
  manual_admission partial{{.max_in_flight = 10, .classes = {{"a", 0.34}, {"b", 0.34}}}};
  EXPECT_EQ(partial.guaranteed_permits(0), 3);  // 3.4 and 3.4: together floor(6.8) = 6, the floors already
  EXPECT_EQ(partial.guaranteed_permits(1), 3);
  manual_admission thirds{{.max_in_flight = 10, .classes = {{"a", 0.3}, {"b", 0.3}, {"c", 0.4}}}};
  EXPECT_EQ(thirds.guaranteed_permits(0), 3);
  EXPECT_EQ(thirds.guaranteed_permits(1), 3);
  EXPECT_EQ(thirds.guaranteed_permits(2), 4);
  manual_admission odd{{.max_in_flight = 3, .classes = {{"a", 0.5}, {"b", 0.5}}}};
  EXPECT_EQ(odd.guaranteed_permits(0), 2);  // 1.5 and 1.5: the tie goes to the lower index
  EXPECT_EQ(odd.guaranteed_permits(1), 1);
}

// Shares a hair above 1 in sum (accepted: 0.1 · 10 is not 1 in double) never guarantee more than max_in_flight, also
// where the hair is many permits: 10^-9 of 2^59 is 5.8·10^8 (they added up to 2^59 + 288,230,400 before).
TEST_F(Admission, TheGuaranteesNeverAddUpToMoreThanMaxInFlight) {
  const std::int64_t m = std::int64_t{1} << 59;
  manual_admission adm{{.max_in_flight = m, .classes = {{"a", 0.5}, {"b", 0.5000000005}}}};
  EXPECT_EQ(adm.guaranteed_permits(0) + adm.guaranteed_permits(1), m);
  EXPECT_GE(adm.guaranteed_permits(0), m / 2 - 1);  // the excess came off the larger guarantee
  std::vector<priority_class> ten;
  for (int c = 0; c < 10; ++c) ten.push_back({"c" + std::to_string(c), 0.1});
  manual_admission tenths{{.max_in_flight = 10, .classes = ten}};
  std::int64_t sum = 0;
  for (std::size_t c = 0; c < 10; ++c) sum += tenths.guaranteed_permits(c);
  EXPECT_EQ(sum, 10);
}

TEST_F(Admission, AClassBorrowsTheShareOthersLeaveUnused) {
  event_log log;
  manual_admission adm{{.max_in_flight = 2, .classes = {{"a", 0.5}, {"b", 0.5}}, .on_admitted = log.hook()}};
  auto first = adm.try_acquire(0);
  auto second = adm.try_acquire(0);  // b's permit, borrowed: b wants none
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  EXPECT_EQ(adm.in_flight(0), 2);
  const auto events = log.snapshot();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].within_guarantee);
  EXPECT_FALSE(events[1].within_guarantee);
}

// While nobody waits, released permits are collected only when a decision needs them; until then the class's
// standing (within its guarantee or borrowing) and the gauges still count them as free.
TEST_F(Admission, PermitsReleasedWhileNobodyWaitsAreFreeAtOnceForTheShareRuleAndTheGauges) {
  event_log log;
  manual_admission adm{{.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.5}}, .on_admitted = log.hook()}};
  for (int i = 0; i < 10; ++i) {
    auto p = adm.try_acquire(0);
    ASSERT_TRUE(p) << "round " << i;
    EXPECT_EQ(adm.in_flight(), 1);
    EXPECT_EQ(adm.in_flight(0), 1);
    p->release();
    EXPECT_EQ(adm.in_flight(), 0);
    EXPECT_EQ(adm.in_flight(0), 0);
  }
  auto held = {adm.try_acquire(0), adm.try_acquire(0), adm.try_acquire(0), adm.try_acquire(0)};  // 2 borrowed
  for (const auto& r : held) EXPECT_TRUE(r);
  EXPECT_FALSE(adm.try_acquire(1)) << "all 4 permits are held";
  const auto events = log.snapshot();
  ASSERT_EQ(events.size(), 14u);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_TRUE(events[i].within_guarantee) << "admission " << i;
  EXPECT_FALSE(events[12].within_guarantee);
  EXPECT_FALSE(events[13].within_guarantee);
}

TEST_F(Admission, AClassBelowItsShareIsServedBeforeABorrowingClass) {
  manual_admission adm{{.max_in_flight = 2, .classes = {{"a", 0.5}, {"b", 0.5}}}};
  auto a1 = adm.try_acquire(0);
  auto a2 = adm.try_acquire(0);  // borrowed
  ASSERT_TRUE(a1 && a2);
  auto a3 = std::async(std::launch::async, [&] { return adm.acquire({}, 0); });
  wait_for_waiters(adm, 1);
  auto b1 = std::async(std::launch::async, [&] { return adm.acquire({}, 1); });
  wait_for_waiters(adm, 2);
  a1->release();  // b holds nothing, below its guarantee of 1: it goes first although a's request came first
  auto rb = b1.get();
  ASSERT_TRUE(rb);
  EXPECT_EQ(adm.in_flight(1), 1);
  EXPECT_EQ(adm.waiting(0), 1u);
  a2->release();  // now a's waiter is within its guarantee again
  auto ra = a3.get();
  ASSERT_TRUE(ra);
}

TEST_F(Admission, ABorrowerDoesNotTakeTokensAClassWithinItsRateShareWaitsFor) {
  event_log log;
  manual_admission adm{
      {.rate = admit::rate::every(10ms), .burst = 2, .classes = {{"a", 0.5}, {"b", 0.5}}, .on_admitted = log.hook()}};
  // Each class's assured bucket: 50/s, burst 1. a spends its own token and borrows the rest of the burst.
  ASSERT_TRUE(adm.try_acquire(0));
  ASSERT_TRUE(adm.try_acquire(0));
  auto a = std::async(std::launch::async, [&] { return adm.acquire({}, 0); });
  wait_for_waiters(adm, 1);
  auto b = std::async(std::launch::async, [&] { return adm.acquire({}, 1); });
  wait_for_waiters(adm, 2);
  clock_type::advance(10ms);  // one global token: b is within its rate share (its assured token is unused), a is not
  ASSERT_TRUE(b.get());
  EXPECT_EQ(adm.waiting(0), 1u);
  clock_type::advance(10ms);  // the next token: a's own assured token is back too
  ASSERT_TRUE(a.get());
  const auto events = log.snapshot();
  ASSERT_EQ(events.size(), 4u);
  for (const auto& e : events) {
    if (e.order == 3) {
      EXPECT_EQ(e.priority, 1u);
      EXPECT_TRUE(e.within_guarantee);
      EXPECT_EQ(e.at, 10ms);
    }
    if (e.order == 4) {
      EXPECT_EQ(e.priority, 0u);
      EXPECT_EQ(e.at, 20ms);
    }
  }
}

TEST_F(Admission, ABorrowerTakesOnlyWhatTheEntitledHeadsDoNotNeed) {
  manual_admission adm{{.rate = admit::rate::every(10ms), .burst = 4, .classes = {{"a", 0.5}, {"b", 0.5}}}};
  // Assured buckets: 50/s, burst 2 each. a spends its two assured tokens and borrows one more.
  ASSERT_TRUE(adm.try_acquire(0, 2));
  ASSERT_TRUE(adm.try_acquire(0, 1));
  // One global token left. b's head asks for 2 (entitled: its assured bucket is full) and waits for the second.
  auto b = std::async(std::launch::async, [&] { return adm.acquire({}, 1, 2); });
  wait_for_waiters(adm, 1);
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);  // a would borrow the token b is entitled to
  clock_type::advance(10ms);
  auto rb = b.get();
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->count(), 2);
  EXPECT_EQ(adm.in_flight(1), 2);
}

// A borrower used to count only the entitled class's head against what it may take: with two permits freed at once
// it took one, and the entitled class's second waiter waited while the class held less than its guarantee (class a
// of shares 0.5/0.3/0.2 got 44 % of the admissions under saturation).
TEST_F(Admission, ABorrowerDoesNotTakeAPermitTheEntitledClassesSecondWaiterIsEntitledTo) {
  manual_admission adm{{.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.5}}}};
  auto b1 = adm.try_acquire(1);
  auto b2 = adm.try_acquire(1);
  auto a12 = adm.try_acquire(0, 2);
  ASSERT_TRUE(b1 && b2 && a12);
  auto b3 = std::async(std::launch::async, [&] { return adm.acquire({}, 1); });  // would borrow: b holds its 2
  wait_for_waiters(adm, 1);
  auto a1 = std::async(std::launch::async, [&] { return adm.acquire({}, 0); });
  wait_for_waiters(adm, 2);
  auto a2 = std::async(std::launch::async, [&] { return adm.acquire({}, 0); });
  wait_for_waiters(adm, 3);
  a12->release();  // two permits free at once: both are a's by its guarantee, although b's waiter came first
  while (adm.waiting() > 1) std::this_thread::yield();
  EXPECT_EQ(adm.in_flight(0), 2);
  EXPECT_EQ(adm.in_flight(1), 2);
  EXPECT_EQ(adm.waiting(1), 1u);
  b1->release();  // the last waiter, whichever it is, goes now
  auto r1 = a1.get();
  auto r2 = a2.get();
  auto r3 = b3.get();
  EXPECT_TRUE(r1 && r2 && r3);
}

}  // namespace admit::testing::admission_tests
