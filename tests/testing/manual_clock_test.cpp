// Tests of admit/testing/manual_clock.hpp and admit/detail/sleep.hpp: time moves only when told, sleepers wake when
// their deadline passes or their stop is requested, and the test can observe how many sleep.
#include "admit/testing/manual_clock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "admit/clock.hpp"
#include "admit/detail/sleep.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = admit::testing::manual_clock;

TEST(ManualClock, MovesOnlyWhenTold) {
  clock_type::reset();
  const auto a = clock_type::now();
  EXPECT_EQ(clock_type::now(), a);
  clock_type::advance(5ms);
  EXPECT_EQ(clock_type::now() - a, 5ms);
  static_assert(admit::steady_clock_like<clock_type>);
}

TEST(ManualClock, SleepersWakeWhenTheirDeadlinePasses) {
  clock_type::reset();
  bool woke_first = false;
  bool woke_second = false;
  std::thread first([&] { woke_first = admit::detail::sleep_until<clock_type>(clock_type::now() + 10ms, {}); });
  std::thread second([&] { woke_second = admit::detail::sleep_until<clock_type>(clock_type::now() + 20ms, {}); });
  clock_type::wait_for_sleepers(2);
  EXPECT_EQ(clock_type::advance(10ms), 1U);
  first.join();
  EXPECT_TRUE(woke_first);
  EXPECT_EQ(clock_type::sleepers(), 1U);
  EXPECT_EQ(clock_type::advance(10ms), 1U);
  second.join();
  EXPECT_TRUE(woke_second);
}

TEST(ManualClock, StopRequestWakesASleeperWithFalse) {
  clock_type::reset();
  std::stop_source stop;
  bool result = true;
  std::thread sleeper(
      [&] { result = admit::detail::sleep_until<clock_type>(clock_type::now() + 1h, stop.get_token()); });
  clock_type::wait_for_sleepers(1);
  stop.request_stop();
  sleeper.join();
  EXPECT_FALSE(result);
  EXPECT_EQ(clock_type::sleepers(), 0U);
}

TEST(ManualClock, PastDeadlineReturnsAtOnce) {
  clock_type::reset();
  clock_type::advance(1s);
  EXPECT_TRUE(admit::detail::sleep_until<clock_type>(clock_type::now() - 1ms, {}));
}

TEST(SteadySleep, RealClockSleepEndsOnStop) {
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(
      admit::detail::sleep_until<std::chrono::steady_clock>(std::chrono::steady_clock::now() + 1h, stop.get_token()));
  EXPECT_TRUE(admit::detail::sleep_until<std::chrono::steady_clock>(std::chrono::steady_clock::now() - 1s, {}));
}

// A bug once: a deadline near time_point::max() overflowed steady_clock::now() + remaining (undefined; in
// practice wait_until returned at once and the "sleep" spun at 100% CPU). Now it sleeps a day at a time until stopped.
TEST(SteadySleep, SleepUntilTheEndOfTimeSleepsUntilStopped) {
  std::stop_source stop;
  std::atomic<bool> returned{false};
  std::thread sleeper([&] {
    EXPECT_FALSE(admit::detail::sleep_until<std::chrono::steady_clock>(std::chrono::steady_clock::time_point::max(),
                                                                       stop.get_token()));
    returned = true;
  });
  // Real time here only lets the sleeper reach its wait; the assertion does not depend on how long it took.
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(returned.load());
  stop.request_stop();
  sleeper.join();
  EXPECT_TRUE(returned.load());
}

TEST(CoarseClock, IsSteadyAndReportsItsResolution) {
  const auto a = admit::coarse_steady_clock::now();
  const auto b = admit::coarse_steady_clock::now();
  EXPECT_LE(a, b);
  EXPECT_GT(admit::coarse_steady_clock::resolution(), 0ns);
  EXPECT_LE(admit::coarse_steady_clock::resolution(), 10ms);
}

}  // namespace
