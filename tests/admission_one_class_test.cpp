// admit::admission with one class and no on_admitted hook decides a request made while nobody waits without its
// mutex (the fast path). These tests run the same calls on two admissions of the same options, one with a hook (every
// decision under the mutex) and one without, and require the same answers and the same observers after each call:
// admissions, refusals (would_block, exceeds_capacity), explicit times that go back, releases collected later. Then
// the hand-over: a request that queues closes the fast path, and it opens again once the queue has drained.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

#include "admit/admission.hpp"
#include "admit/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using one_class_clock = admit::testing::basic_manual_clock<struct one_class_test>;
using one_class_admission = admit::basic_admission<one_class_clock>;

admit::admission_options options(admit::rate r, bool with_hook) {
  admit::admission_options o{.rate = r, .burst = 5, .max_in_flight = 4, .max_waiters = 8};
  if (with_hook) o.on_admitted = [](const admit::admission_event&) {};
  return o;
}

void same_decisions(admit::rate r, std::uint64_t seed) {
  one_class_admission fast{options(r, false)};
  one_class_admission locked{options(r, true)};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> op(0, 9);
  std::uniform_int_distribution<std::int64_t> count(1, 5);  // 5: above max_in_flight
  std::uniform_int_distribution<std::int64_t> step_us(0, 12);
  std::vector<admit::permit> held_fast;
  std::vector<admit::permit> held_locked;
  auto t = one_class_clock::now();
  std::int64_t admitted = 0;
  for (int i = 0; i < 20'000; ++i) {
    const int what = op(rng);
    if (what < 3 && !held_fast.empty()) {  // release one (the same in both)
      const std::size_t k = std::uniform_int_distribution<std::size_t>(0, held_fast.size() - 1)(rng);
      held_fast.erase(held_fast.begin() + static_cast<std::ptrdiff_t>(k));
      held_locked.erase(held_locked.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      t += std::chrono::microseconds(step_us(rng));
      // One call in five at an earlier time than the latest: decided at the latest admission's time.
      const auto at = what == 9 ? t - std::chrono::microseconds(step_us(rng) * 3) : t;
      const std::int64_t n = count(rng);
      admit::acquire_result a = fast.try_acquire_at(at, 0, n);
      admit::acquire_result b = locked.try_acquire_at(at, 0, n);
      ASSERT_EQ(a.has_value(), b.has_value()) << "call " << i << " for " << n;
      if (a) {
        ++admitted;
        held_fast.push_back(std::move(*a));
        held_locked.push_back(std::move(*b));
      } else {
        ASSERT_EQ(a.error(), b.error()) << "call " << i << " for " << n;
      }
    }
    ASSERT_EQ(fast.in_flight(), locked.in_flight()) << "after call " << i;
  }
  EXPECT_GT(admitted, 1000);
  EXPECT_EQ(fast.metrics().in_flight, locked.metrics().in_flight);
}

TEST(AdmissionOneClass, DecidesAsUnderTheMutexWithARate) { same_decisions(admit::rate::every(10us), 1); }

TEST(AdmissionOneClass, DecidesAsUnderTheMutexWithoutARate) { same_decisions(admit::rate::inf(), 2); }

// Waits until `adm` has `n` waiters (they sleep on the manual clock, which the test never advances).
void wait_until_queued(const one_class_admission& adm, std::size_t n) {
  while (adm.waiting() < n) std::this_thread::yield();
}

TEST(AdmissionOneClass, AWaiterClosesTheFastPathUntilTheQueueDrains) {
  one_class_admission adm{options(admit::rate::inf(), false)};
  std::vector<admit::permit> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::move(*adm.try_acquire(0)));
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);
  admit::acquire_result got_by_waiter = errc::cancelled;
  std::jthread waiter([&] { got_by_waiter = adm.acquire(std::stop_token{}, 0); });
  wait_until_queued(adm, 1);
  held.pop_back();  // the release goes to the waiter, not to a newcomer
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);
  waiter.join();
  ASSERT_TRUE(got_by_waiter);
  EXPECT_EQ(adm.in_flight(), 4);
  EXPECT_EQ(adm.waiting(), 0u);
  got_by_waiter->release();
  held.clear();
  EXPECT_EQ(adm.in_flight(), 0);
  for (int i = 0; i < 4; ++i) held.push_back(std::move(*adm.try_acquire(0)));  // open again: all four
  EXPECT_EQ(adm.try_acquire(0).error(), errc::would_block);
  EXPECT_EQ(adm.in_flight(), 4);
}

TEST(AdmissionOneClass, AnEventHookThatThrowsLeavesNoPermitHeld) {
  for (const bool with_hook : {false, true}) {
    one_class_admission adm{options(admit::rate::inf(), with_hook)};
    adm.enable_metrics([](const admit::limiter_event& e) {
      if (e.outcome == admit::acquire_outcome::admitted) throw std::runtime_error("hook");
    });
    EXPECT_THROW((void)adm.try_acquire(0, 2), std::runtime_error);
    EXPECT_EQ(adm.in_flight(), 0) << (with_hook ? "under the mutex" : "fast path");
    std::stop_source stopped;  // a stop already requested: admits at once or not at all, never waits
    stopped.request_stop();
    EXPECT_THROW((void)adm.acquire(stopped.get_token(), 0, 4), std::runtime_error);
    EXPECT_EQ(adm.in_flight(), 0) << (with_hook ? "under the mutex" : "fast path");
  }
}

}  // namespace
