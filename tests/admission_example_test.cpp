// The worked example of docs/admission.md (interactive and batch callers, 200/s, 32 in flight, batch guaranteed 20 %):
// each claim the page makes about it, on the manual clock.
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "admission_testing.hpp"
#include "admit/admission.hpp"
#include "admit/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::testing::admission_tests::clock_type;
using admit::testing::admission_tests::manual_admission;
using admit::testing::admission_tests::wait_for_waiters;

constexpr std::size_t interactive = 0;
constexpr std::size_t batch = 1;

admit::admission_options api_options() {
  return {.rate = admit::rate::per_second(200),
          .burst = 20,
          .max_in_flight = 32,
          .max_waiters = 256,
          .classes = {{"interactive", 0.8}, {"batch", 0.2}}};
}

class AdmissionExample : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
};

TEST_F(AdmissionExample, TheSharesOf32PermitsAre26And6) {
  manual_admission api{api_options()};
  EXPECT_EQ(api.guaranteed_permits(interactive), 26);
  EXPECT_EQ(api.guaranteed_permits(batch), 6);
}

TEST_F(AdmissionExample, BatchAloneBorrowsEverythingAndInteractiveGetsEveryReleaseUntilItHoldsItsShare) {
  auto options = api_options();
  options.rate = admit::rate::inf();  // permits only: the rate is the next test's
  manual_admission api{options};
  std::vector<admit::permit> held;
  for (int i = 0; i < 32; ++i) {
    auto r = api.try_acquire(batch);
    ASSERT_TRUE(r) << i;
    held.push_back(std::move(r.value()));
  }
  EXPECT_EQ(api.in_flight(batch), 32);
  EXPECT_EQ(api.try_acquire(interactive).error(), errc::would_block);  // held permits are not taken back

  auto batch_waiter = std::async(std::launch::async, [&] { return api.acquire({}, batch); });
  wait_for_waiters(api, 1);
  auto person1 = std::async(std::launch::async, [&] { return api.acquire({}, interactive); });
  wait_for_waiters(api, 2);
  auto person2 = std::async(std::launch::async, [&] { return api.acquire({}, interactive); });
  wait_for_waiters(api, 3);
  held.pop_back();  // released: to the people, although the batch request waited longer
  held.pop_back();
  auto r1 = person1.get();
  auto r2 = person2.get();
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2);
  EXPECT_EQ(api.waiting(batch), 1u);
  EXPECT_EQ(api.in_flight(batch), 30);
  held.clear();
  EXPECT_TRUE(batch_waiter.get());
}

TEST_F(AdmissionExample, APersonsRequestTheRateCannotServeIn100msFailsAtOnce) {
  manual_admission api{api_options()};
  // The burst of 20 tokens is spent; then an interactive request for 20 waits (100 ms of tokens at 200/s).
  ASSERT_TRUE(api.try_acquire(batch, 20));
  auto big = std::async(std::launch::async, [&] { return api.acquire({}, interactive, 20); });
  wait_for_waiters(api, 1);
  // One more token behind it would take 105 ms: no sleeping in vain.
  EXPECT_EQ(api.try_acquire_for(100ms, interactive).error(), errc::timeout);
  EXPECT_EQ(clock_type::now().time_since_epoch(), 0ns);
  EXPECT_EQ(api.waiting(), 1u);
  clock_type::advance(100ms);
  EXPECT_TRUE(big.get());
}

}  // namespace
