// admit::admission: rate and permits reserved together, FIFO within a class, the share rule between classes, bounded
// queue, fail-fast deadlines, cancellation, explicit-time forms — deterministic (manual clock, observers of the
// queue; nothing sleeps to make time pass).
#include "admit/admission.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/testing/invalid_argument_message.hpp"
#include "admit/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using clock_type = admit::testing::manual_clock;
using manual_admission = admit::basic_admission<clock_type>;
using testing::HasSubstr;

// Blocks until `n` requests wait (an observer of the queue) and as many threads sleep on the manual clock.
void wait_for_waiters(const manual_admission& adm, std::size_t n) {
  while (adm.waiting() < n) std::this_thread::yield();
  clock_type::wait_for_sleepers(n);
}

// Records the on_admitted events.
struct event_log {
  std::mutex mutex;
  std::vector<admit::admission_event> events;
  auto hook() {
    return [this](const admit::admission_event& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
    };
  }
  std::vector<admit::admission_event> snapshot() {
    std::lock_guard lock(mutex);
    return events;
  }
};

class Admission : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
};

TEST_F(Admission, WithoutLimitsAdmitsEverythingAndCountsPermits) {
  manual_admission adm{{}};
  auto a = adm.try_acquire(0, 3);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->count(), 3);
  EXPECT_EQ(adm.in_flight(), 3);
  a->release();
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST_F(Admission, PermitWithoutTokensWaitsWithoutHoldingAPermit) {
  manual_admission adm{{.rate = admit::rate::every(10ms), .burst = 1, .max_in_flight = 2}};
  auto first = adm.try_acquire(0);
  ASSERT_TRUE(first);
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);  // a permit is free, the token is not
  auto waiter = std::async(std::launch::async, [&] { return adm.acquire({}, 0); });
  wait_for_waiters(adm, 1);
  EXPECT_EQ(adm.in_flight(), 1);  // the waiter holds no permit while it waits for its token
  EXPECT_EQ(clock_type::advance(10ms), 1u);
  auto r = waiter.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(adm.in_flight(), 2);
}

TEST_F(Admission, TokensWithoutAPermitAreNotTaken) {
  manual_admission adm{{.rate = admit::rate::every(1s), .burst = 2, .max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  ASSERT_TRUE(held);
  // One token is left; a request that waits for the permit does not take it, even when it gives up.
  auto waiter = std::async(std::launch::async, [&] { return adm.try_acquire_until(clock_type::now() + 5ms, 0); });
  wait_for_waiters(adm, 1);
  clock_type::advance(5ms);
  EXPECT_EQ(waiter.get().error(), errc::timeout);
  held->release();
  auto second = adm.try_acquire(0);  // the token is still there (refilling one takes a second)
  ASSERT_TRUE(second);
  second->release();
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);  // and now it is spent
}

TEST_F(Admission, AReleaseHandsThePermitToTheWaiterWithItsTokens) {
  manual_admission adm{{.rate = admit::rate::every(1s), .burst = 2, .max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async, [&] { return adm.acquire({}, 0); });
  wait_for_waiters(adm, 1);
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);
  held->release();  // no time passes: the waiter's token was never spent by anyone else
  auto r = waiter.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(adm.in_flight(), 1);
}

TEST_F(Admission, FifoWithinAClass) {
  event_log log;
  manual_admission adm{{.max_in_flight = 1, .on_admitted = log.hook()}};
  auto held = adm.try_acquire(0);
  ASSERT_TRUE(held);
  std::vector<std::future<admit::acquire_result>> waiters;
  for (std::size_t i = 0; i < 3; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] {
      auto r = adm.acquire({}, 0);
      if (r) r->release();  // the next one goes when this one is done
      return r;
    }));
    wait_for_waiters(adm, i + 1);
  }
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);  // no queue jumping
  held->release();
  for (auto& w : waiters) EXPECT_TRUE(w.get());
  const auto events = log.snapshot();
  ASSERT_EQ(events.size(), 4u);
  std::vector<std::uint64_t> arrivals_in_admission_order(4);
  for (const auto& e : events) arrivals_in_admission_order.at(e.order - 1) = e.arrival;
  EXPECT_THAT(arrivals_in_admission_order, testing::ElementsAre(1, 2, 3, 4));
}

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

TEST_F(Admission, ADeadlineAlreadyPassedOnlyAdmitsAtOnce) {
  manual_admission adm{{.max_in_flight = 1}};
  clock_type::advance(1s);
  auto first = adm.try_acquire_until(clock_type::now() - 1ms, 0);
  ASSERT_TRUE(first);
  EXPECT_EQ(adm.try_acquire_until(clock_type::now(), 0).error(), errc::timeout);
  EXPECT_EQ(adm.try_acquire_for(-5s, 0).error(), errc::timeout);
  EXPECT_EQ(adm.waiting(), 0u);
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

TEST_F(Admission, MaxWaitersFailsTheNextWaiterAtOnceWithQueueFull) {
  manual_admission adm{{.max_in_flight = 1, .max_waiters = 1}};
  auto held = adm.try_acquire(0);
  ASSERT_TRUE(held);
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] { return adm.acquire(stop.get_token(), 0); });
  wait_for_waiters(adm, 1);
  EXPECT_EQ(adm.try_acquire_for(1s, 0).error(), errc::queue_full);  // returns without the clock moving
  EXPECT_EQ(adm.acquire({}, 0).error(), errc::queue_full);
  stop.request_stop();
  EXPECT_EQ(waiter.get().error(), errc::cancelled);
}

TEST_F(Admission, ARequestThatCanNeverBeAdmittedFailsWithExceedsCapacity) {
  manual_admission adm{{.rate = admit::rate::every(1s), .burst = 3, .max_in_flight = 5}};
  EXPECT_EQ(adm.try_acquire(0, 4).error(), errc::exceeds_capacity);  // above the burst
  EXPECT_EQ(adm.acquire({}, 0, 4).error(), errc::exceeds_capacity);
  manual_admission narrow{{.max_in_flight = 2}};
  EXPECT_EQ(narrow.try_acquire_for(1s, 0, 3).error(), errc::exceeds_capacity);  // above max_in_flight
  manual_admission frozen{{.rate = admit::rate{}, .burst = 2}};
  ASSERT_TRUE(frozen.try_acquire(0, 2));
  EXPECT_EQ(frozen.acquire({}, 0).error(), errc::exceeds_capacity);  // the zero rate never refills
}

TEST_F(Admission, ADeadlineTheRateCannotMeetFailsAtOnce) {
  manual_admission adm{{.rate = admit::rate::every(1s), .burst = 1}};
  ASSERT_TRUE(adm.try_acquire(0));
  EXPECT_EQ(adm.try_acquire_for(999ms, 0).error(), errc::timeout);  // the clock never moves: it did not wait
  EXPECT_EQ(adm.waiting(), 0u);
  auto first = std::async(std::launch::async, [&] { return adm.try_acquire_for(1s, 0); });
  wait_for_waiters(adm, 1);
  // Behind it in its class: two tokens are needed by 2 s at the earliest.
  EXPECT_EQ(adm.try_acquire_for(1999ms, 0).error(), errc::timeout);
  auto second = std::async(std::launch::async, [&] { return adm.try_acquire_for(2s, 0); });
  wait_for_waiters(adm, 2);
  clock_type::advance(1s);
  EXPECT_TRUE(first.get());
  clock_type::advance(1s);
  EXPECT_TRUE(second.get());
}

TEST_F(Admission, ADeadlinePassingWhileWaitingTimesOutAndFreesItsPlace) {
  manual_admission adm{{.max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  auto waiter = std::async(std::launch::async, [&] { return adm.try_acquire_for(10ms, 0); });
  wait_for_waiters(adm, 1);
  clock_type::advance(10ms);
  EXPECT_EQ(waiter.get().error(), errc::timeout);
  EXPECT_EQ(adm.waiting(), 0u);
  held->release();
  EXPECT_TRUE(adm.try_acquire(0));
}

TEST_F(Admission, AStopTokenCancelsTheWaitAndTakesNothing) {
  manual_admission adm{{.rate = admit::rate::every(1s), .burst = 1, .max_in_flight = 4}};
  ASSERT_TRUE(adm.try_acquire(0));
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] { return adm.acquire(stop.get_token(), 0); });
  wait_for_waiters(adm, 1);
  stop.request_stop();
  EXPECT_EQ(waiter.get().error(), errc::cancelled);
  EXPECT_EQ(adm.waiting(), 0u);
  EXPECT_EQ(adm.in_flight(), 0);
  std::stop_source already;
  already.request_stop();
  EXPECT_EQ(adm.acquire(already.get_token(), 0).error(), errc::cancelled);
  clock_type::advance(1s);
  EXPECT_TRUE(adm.acquire(already.get_token(), 0));  // a stop already requested still admits at once
}

TEST_F(Admission, TheAtFormsDecideAtTheCallersTime) {
  manual_admission adm{{.rate = admit::rate::every(10ms), .burst = 1}};
  const auto t0 = clock_type::now();
  EXPECT_TRUE(adm.try_acquire_at(t0, 0));
  EXPECT_EQ(adm.try_acquire_at(t0 + 9ms, 0).error(), errc::would_block);
  EXPECT_TRUE(adm.try_acquire_at(t0 + 10ms, 0));
  EXPECT_EQ(adm.try_acquire_at(t0 + 5ms, 0).error(), errc::would_block);  // time never goes back
  EXPECT_TRUE(adm.try_acquire_at(t0 + 20ms, 0));
  EXPECT_EQ(clock_type::now(), t0);  // the clock was never read for the decisions
}

TEST_F(Admission, MetricsCountOneOutcomePerDecisionAndReportTheGauges) {
  std::vector<std::string> calls;  // the event hook and on_admitted, in the order they ran
  std::mutex calls_mutex;
  auto note = [&](std::string what) {
    std::lock_guard lock(calls_mutex);
    calls.push_back(std::move(what));
  };
  manual_admission adm{{.rate = admit::rate::every(10ms),
                        .burst = 2,
                        .max_in_flight = 2,
                        .max_waiters = 1,
                        .on_admitted = [&](const admit::admission_event&) { note("on_admitted"); }}};
  EXPECT_EQ(adm.metrics().admitted, 0u);  // not enabled: counters stay 0, the gauges are there
  EXPECT_EQ(adm.metrics().limit, 2);
  EXPECT_EQ(&adm.wait_times(), &adm.wait_times());
  EXPECT_EQ(adm.wait_times().summarize().count, 0u);
  adm.enable_metrics(
      [&](const admit::limiter_event& e) { note(std::string("event ") + std::to_string(e.wait.count())); });
  auto a = adm.try_acquire(0);  // admitted at once
  ASSERT_TRUE(a);
  EXPECT_EQ(adm.try_acquire(0, 3).error(), errc::exceeds_capacity);
  auto b = adm.try_acquire(0);  // the second token
  ASSERT_TRUE(b);
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);  // unavailable
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] { return adm.acquire(stop.get_token(), 0); });
  wait_for_waiters(adm, 1);
  EXPECT_EQ(adm.try_acquire_for(5ms, 0).error(), errc::queue_full);
  EXPECT_EQ(adm.metrics().waiting, 1u);
  stop.request_stop();
  EXPECT_EQ(waiter.get().error(), errc::cancelled);
  auto timed = std::async(std::launch::async, [&] { return adm.try_acquire_for(30ms, 0); });
  wait_for_waiters(adm, 1);
  clock_type::advance(10ms);  // a token is back, but no permit
  clock_type::wait_for_sleepers(1);
  a->release();  // admitted after 10 ms
  auto got = timed.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(adm.try_acquire_until(clock_type::now(), 0).error(), errc::timeout);  // a deadline already passed
  const admit::limiter_snapshot s = adm.metrics();
  EXPECT_EQ(s.admitted, 3u);
  EXPECT_EQ(s.waited, 1u);
  EXPECT_EQ(s.wait.max, 10ms);
  EXPECT_EQ(s.unavailable, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.timed_out, 1u);
  EXPECT_EQ(s.exceeds_capacity, 1u);
  EXPECT_EQ(s.limit, 2);
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(adm.wait_times().summarize().count, 3u);
  const std::vector<std::string> admitted_at_once{"event 0", "on_admitted"};
  EXPECT_EQ(std::vector<std::string>(calls.begin(), calls.begin() + 2), admitted_at_once);  // the event hook first
}

TEST_F(Admission, EachClassHasItsOwnCountersAndGauges) {
  int events = 0;
  manual_admission adm{{.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.25}}}};
  EXPECT_EQ(adm.metrics(1).admitted, 0u);  // not enabled
  EXPECT_EQ(adm.metrics(1).limit, 1);      // its guaranteed permits
  adm.enable_metrics([&](const admit::limiter_event&) { ++events; }, /*per_class=*/true);
  auto a = adm.try_acquire(0, 3);  // class a borrows one beyond its 2
  ASSERT_TRUE(a);
  auto b = adm.try_acquire(1);
  ASSERT_TRUE(b);
  EXPECT_EQ(adm.try_acquire(1).error(), errc::would_block);
  EXPECT_EQ(adm.try_acquire(0, 5).error(), errc::exceeds_capacity);
  const admit::limiter_snapshot sa = adm.metrics(0);
  const admit::limiter_snapshot sb = adm.metrics(1);
  EXPECT_EQ(sa.admitted, 1u);
  EXPECT_EQ(sa.exceeds_capacity, 1u);
  EXPECT_EQ(sa.unavailable, 0u);
  EXPECT_EQ(sa.limit, 2);
  EXPECT_EQ(sa.in_flight, 3);
  EXPECT_EQ(sb.admitted, 1u);
  EXPECT_EQ(sb.unavailable, 1u);
  EXPECT_EQ(sb.in_flight, 1);
  EXPECT_THROW((void)adm.metrics(2), std::invalid_argument);  // the unreserved share is not a class
  EXPECT_EQ(adm.metrics().admitted, 2u);
  EXPECT_EQ(events, 4);  // once per decision, not once per counter set
}

TEST_F(Admission, WithoutPerClassCountersAClassReportsOnlyItsGauges) {
  manual_admission adm{{.max_in_flight = 4, .classes = {{"a", 0.5}, {"b", 0.25}}}};
  adm.enable_metrics();
  auto a = adm.try_acquire(0);
  ASSERT_TRUE(a);
  EXPECT_EQ(adm.metrics().admitted, 1u);
  EXPECT_EQ(adm.metrics(0).admitted, 0u);
  EXPECT_EQ(adm.metrics(0).in_flight, 1);
}

TEST_F(Admission, InvalidOptionsAndRequestsAreRefusedNamingTheValue) {
  using admit::testing::invalid_argument_message;
  EXPECT_THAT(invalid_argument_message([] {
                manual_admission a{{.classes = {{"a", -0.5}}}};
              }),
              HasSubstr("share must be in [0, 1], got -0.5"));
  EXPECT_THAT(invalid_argument_message([] {
                manual_admission a{{.classes = {{"a", 0.7}, {"b", 0.5}}}};
              }),
              HasSubstr("sum to at most 1, got 1.2"));
  EXPECT_THAT(invalid_argument_message([] { manual_admission a{{.rate = admit::rate::per_second(5), .burst = 0}}; }),
              HasSubstr("burst must be >= 1 with a finite rate (5/s), got 0"));
  EXPECT_THAT(invalid_argument_message([] { manual_admission a{{.max_in_flight = -1}}; }),
              HasSubstr("max_in_flight must be in [0, "));
  manual_admission adm{{.max_in_flight = 2, .classes = {{"a", 0.5}, {"b", 0.5}}}};
  EXPECT_THAT(invalid_argument_message([&] { (void)adm.try_acquire(2); }), HasSubstr("priority 2 is out of range"));
  EXPECT_THAT(invalid_argument_message([&] { (void)adm.try_acquire(0, 0); }), HasSubstr("n must be >= 1, got 0"));
  EXPECT_THAT(invalid_argument_message([&] { (void)adm.acquire({}, 0, -1); }), HasSubstr("got -1"));
  EXPECT_EQ(invalid_argument_message([] {
              manual_admission a{{.classes = {{"a", 0.1}, {"b", 0.9}}}};
            }),
            "(no exception)");
}

}  // namespace
