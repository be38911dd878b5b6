// admit::detail::admission_fast_path: the word admit::admission decides on without its mutex. It admits exactly as
// admit::token_bucket does (the reference: the public class, fed the same times and counts) within the permit limit;
// it decides nothing while closed; close() hands over exactly what it admitted; it stays closed with a state it cannot
// hold. Under threads, admissions racing with close/open are each counted exactly once (run under ThreadSanitizer
// too).
#include "admit/detail/admission_fast_path.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "admit/rate.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"

namespace {

using namespace std::chrono_literals;
using admit::detail::admission_fast_path;
using admit::detail::ns_min;
using admit::detail::token_bucket_config;

constexpr std::int64_t no_limit = admission_fast_path::max_held;

token_bucket_config bucket(admit::rate r, std::int64_t burst) {
  return admit::detail::make_token_bucket_config(r, burst, 0);
}

TEST(AdmissionFastPath, DecidesNothingUntilOpened) {
  if (!admit::detail::admission_fast_path_supported) GTEST_SKIP() << "no 16-byte compare-and-swap here";
  admission_fast_path fast;
  EXPECT_FALSE(fast.try_admit(bucket(admit::rate::inf(), 1), no_limit, 0, 1));
  EXPECT_FALSE(fast.held());
  EXPECT_FALSE(fast.close());
  fast.open({}, true);
  EXPECT_TRUE(fast.try_admit(bucket(admit::rate::inf(), 1), no_limit, 0, 1));
  EXPECT_EQ(fast.held(), 1);
}

TEST(AdmissionFastPath, AdmitsExactlyAsTheTokenBucket) {
  if (!admit::detail::admission_fast_path_supported) GTEST_SKIP() << "no 16-byte compare-and-swap here";
  using clock = admit::testing::basic_manual_clock<struct fast_path_reference>;
  const admit::rate r = admit::rate::every(7ns);
  constexpr std::int64_t burst = 5;
  admit::basic_token_bucket<clock> reference{r, burst};
  admission_fast_path fast;
  fast.open({}, false);
  const token_bucket_config c = bucket(r, burst);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> step(0, 20);
  std::uniform_int_distribution<std::int64_t> count(1, burst);
  std::int64_t t = 1'000'000;
  std::int64_t admitted = 0;
  for (int i = 0; i < 20'000; ++i) {
    t += step(rng);
    const std::int64_t n = count(rng);
    const bool expected = reference.try_acquire_at(clock::time_point{std::chrono::nanoseconds{t}}, n);
    ASSERT_EQ(fast.try_admit(c, no_limit, t, n), expected) << "call " << i << " at " << t << " for " << n;
    if (expected) admitted += n;
  }
  EXPECT_GT(admitted, 1000);
  EXPECT_EQ(fast.held(), admitted);
}

TEST(AdmissionFastPath, AnEarlierTimeIsTakenAtTheLatestAdmission) {
  if (!admit::detail::admission_fast_path_supported) GTEST_SKIP() << "no 16-byte compare-and-swap here";
  admission_fast_path fast;
  fast.open({}, false);
  const token_bucket_config c = bucket(admit::rate::every(10ns), 1);
  ASSERT_TRUE(fast.try_admit(c, no_limit, 100, 1));
  ASSERT_TRUE(fast.try_admit(c, no_limit, 110, 1));
  EXPECT_FALSE(fast.try_admit(c, no_limit, 105, 1));  // as at 110: the next token comes at 120
  const auto s = fast.close();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->latest, 110);
  EXPECT_EQ(s->tat, 110);
  EXPECT_EQ(s->held, 2);
}

TEST(AdmissionFastPath, RespectsTheLimitAndHandsOverWhatItAdmitted) {
  if (!admit::detail::admission_fast_path_supported) GTEST_SKIP() << "no 16-byte compare-and-swap here";
  admission_fast_path fast;
  const token_bucket_config c = bucket(admit::rate::inf(), 1);
  fast.open({.latest = 50, .tat = 0, .held = 1}, true);
  EXPECT_TRUE(fast.try_admit(c, 4, 60, 2));
  EXPECT_FALSE(fast.try_admit(c, 4, 61, 2));  // 3 held: 2 more would be 5
  EXPECT_TRUE(fast.try_admit(c, 4, 62, 1));
  EXPECT_FALSE(fast.try_admit(c, 4, 63, 5));  // above the limit itself
  const auto s = fast.close();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->held, 4);
  EXPECT_EQ(s->latest, 62);
  EXPECT_FALSE(fast.try_admit(c, 100, 64, 1));  // closed
  EXPECT_FALSE(fast.held());
  EXPECT_FALSE(fast.close());                            // already closed: the mutex holder's copy is current
  fast.open({.latest = 62, .tat = 0, .held = 2}, true);  // two released meanwhile
  EXPECT_TRUE(fast.try_admit(c, 4, 64, 2));
  EXPECT_EQ(fast.held(), 4);
}

TEST(AdmissionFastPath, StaysClosedWithAStateItCannotHold) {
  if (!admit::detail::admission_fast_path_supported) GTEST_SKIP() << "no 16-byte compare-and-swap here";
  const token_bucket_config c = bucket(admit::rate::every(1ns), 1);
  admission_fast_path too_many;
  too_many.open({.latest = 0, .tat = 0, .held = admission_fast_path::max_held + 1}, false);
  EXPECT_FALSE(too_many.held());
  admission_fast_path too_far;
  too_far.open({.latest = admission_fast_path::max_lag + 1, .tat = 0, .held = 0}, false);
  EXPECT_FALSE(too_far.held());
  admission_fast_path just_fits;
  just_fits.open({.latest = admission_fast_path::max_lag, .tat = 0, .held = admission_fast_path::max_held}, false);
  EXPECT_EQ(just_fits.held(), admission_fast_path::max_held);
  EXPECT_FALSE(just_fits.try_admit(c, no_limit, ns_min + 1, 1));  // held at the most the word counts
}

// Workers admit on the word while an owner closes it, takes what it counts, and opens it again with none held (as
// the admission collects releases): every admission is handed over exactly once, and no handover exceeds the limit.
TEST(AdmissionFastPath, EveryAdmissionIsHandedOverOnceWhileOwnersCloseAndOpen) {
  if (!admit::detail::admission_fast_path_supported) GTEST_SKIP() << "no 16-byte compare-and-swap here";
  constexpr int workers = 4;
  constexpr std::int64_t limit = 50;
  constexpr int handovers = 20'000;
  const token_bucket_config c = bucket(admit::rate::inf(), 1);
  admission_fast_path fast;
  std::mutex owner;  // as the admission's mutex: close and open under it
  fast.open({}, true);
  std::atomic<bool> done{false};
  std::atomic<std::int64_t> admitted{0};
  std::atomic<std::int64_t> so_far{0};  // admissions made while the owner still cycles (workers may start late)
  std::int64_t handed_over = 0;         // under owner
  std::int64_t over_limit = 0;          // under owner
  {
    std::vector<std::jthread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        std::int64_t mine = 0;
        std::int64_t t = w;
        while (!done.load(std::memory_order_relaxed)) {
          if (fast.try_admit(c, limit, ++t, 1)) {
            ++mine;
            so_far.fetch_add(1, std::memory_order_relaxed);
          }
        }
        admitted.fetch_add(mine);
      });
    }
    // At least `handovers` cycles, and on until the workers have admitted a thousand between them: on a loaded
    // machine the owner could finish its cycles before a worker thread first ran.
    for (int i = 0; i < handovers || so_far.load(std::memory_order_relaxed) < 1000; ++i) {
      std::lock_guard lock(owner);
      const auto s = fast.close();
      ASSERT_TRUE(s);
      handed_over += s->held;
      if (s->held > limit) ++over_limit;
      fast.open({.latest = s->latest, .tat = s->tat, .held = 0}, true);
    }
    done = true;
  }
  std::lock_guard lock(owner);
  const auto last = fast.close();
  ASSERT_TRUE(last);
  handed_over += last->held;
  EXPECT_EQ(over_limit, 0);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(handed_over, admitted.load());
}

}  // namespace
