// admit::admission: rate and permits reserved together, FIFO within a class, bounded queue, fail-fast deadlines,
// cancellation, explicit-time forms, invalid options — deterministic (manual clock, observers of the queue; nothing
// sleeps to make time pass). The share rule between classes: admission_shares_test.cpp; the metrics:
// admission_metrics_test.cpp.
#include "admit/admission.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <stop_token>
#include <vector>

#include "admission_testing.hpp"
#include "admit/testing/invalid_argument_message.hpp"

// In the helpers' namespace (admission_testing.hpp), so that their names are found before any other file's when a
// unity build compiles several test files as one.
namespace admit::testing::admission_tests {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST_F(Admission, WithoutLimitsAdmitsEverythingAndCountsPermits) {
  manual_admission adm{{}};
  auto a = adm.try_acquire(0, 3);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->count(), 3);
  EXPECT_EQ(adm.in_flight(), 3);
  a->release();
  EXPECT_EQ(adm.in_flight(), 0);
}

// Without a concurrency limit the permits are still counted: in all at most 2^59 held (the largest max_in_flight), so
// that no count overflows (taking INT64_MAX twice left in_flight() at -2; 2^62 twice at 0). Beyond, a request waits.
TEST_F(Admission, WithoutAConcurrencyLimitTheCountsCannotOverflow) {
  manual_admission adm{{}};
  constexpr std::int64_t most = std::int64_t{1} << 59;
  EXPECT_THAT(invalid_argument_message([&] { (void)adm.try_acquire(0, INT64_MAX); }),
              HasSubstr("got 9223372036854775807"));
  std::vector<admit::permit> held;
  for (int i = 0; i < 4; ++i) {
    auto r = adm.try_acquire(0, most / 4);
    ASSERT_TRUE(r) << i;
    held.push_back(std::move(*r));
  }
  EXPECT_EQ(adm.in_flight(), most);
  const auto beyond = adm.try_acquire(0, 1);
  ASSERT_FALSE(beyond);
  EXPECT_EQ(beyond.error(), errc::would_block);
  held.pop_back();
  EXPECT_EQ(adm.in_flight(), 3 * (most / 4));
  EXPECT_TRUE(adm.try_acquire(0, most / 4));  // (released at once)
  held.clear();
  EXPECT_EQ(adm.in_flight(), 0);
  auto all = adm.try_acquire(0, most);
  ASSERT_TRUE(all);
  EXPECT_EQ(adm.in_flight(), most);
  // A request that waits under the ceiling is admitted by the release that makes room.
  auto waiter = std::async(std::launch::async, [&] { return adm.acquire({}, 0, 1); });
  wait_for_waiters(adm, 1);
  all->release();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready) << "the release did not serve the waiter";
  const auto got = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(adm.in_flight(), 1);
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
  EXPECT_THAT(arrivals_in_admission_order, ::testing::ElementsAre(1, 2, 3, 4));
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
  EXPECT_THAT(invalid_argument_message([&] { (void)adm.try_acquire(0, 0); }),
              HasSubstr("n must be in [1, 576460752303423488], got 0"));
  // Above 2^59, as every count of permits (it was taken, and the counts wrapped around).
  EXPECT_THAT(invalid_argument_message([&] { (void)adm.try_acquire(0, (std::int64_t{1} << 59) + 1); }),
              HasSubstr("n must be in [1, 576460752303423488], got 576460752303423489"));
  EXPECT_THAT(invalid_argument_message([&] { (void)adm.acquire({}, 0, -1); }), HasSubstr("got -1"));
  EXPECT_EQ(invalid_argument_message([] {
              manual_admission a{{.classes = {{"a", 0.1}, {"b", 0.9}}}};
            }),
            "(no exception)");
}

}  // namespace admit::testing::admission_tests
