// The semaphore's background work alone (src/redis/semaphore/background_work.hpp): what a drain reports, when a
// when_drained callback runs, and the counts under concurrent work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

#include "admit/errc.hpp"
#include "background_work.hpp"

namespace {

using admit::redis::detail::background_work;
using steady = std::chrono::steady_clock;

TEST(BackgroundWork, ADrainReportsWhatWasNotDeliveredOnceAndCountsAgain) {
  background_work w;
  EXPECT_EQ(w.drain(steady::now()), background_work::drained(0, std::error_code()));
  w.begin();
  w.end(true, {});
  w.begin();
  w.end(false, admit::make_error_code(admit::errc::closed));
  w.begin();
  w.end(false, admit::make_error_code(admit::errc::connect_timeout));  // not the first failure
  EXPECT_EQ(w.drain(steady::now()), background_work::drained(2, admit::make_error_code(admit::errc::closed)));
  EXPECT_EQ(w.drain(steady::now()), background_work::drained(0, std::error_code()));  // counted from zero again
}

TEST(BackgroundWork, WorkStillInFlightAtTheDeadlineIsUndeliveredByTimeout) {
  background_work w;
  w.begin();
  w.begin();
  w.end(false, admit::make_error_code(admit::errc::closed));
  const auto r = w.drain(steady::now() + std::chrono::milliseconds(1));
  EXPECT_EQ(r.first, 2U);  // the failed one and the one in flight
  EXPECT_EQ(r.second, admit::errc::timeout);
  w.end(true, {});
  EXPECT_EQ(w.drain(steady::now()), background_work::drained(0, std::error_code()));
}

TEST(BackgroundWork, WhenDrainedRunsAtOnceOrAtTheLastEnd) {
  background_work w;
  int calls = 0;
  w.when_drained([&](std::size_t undelivered, std::error_code ec) {
    ++calls;
    EXPECT_EQ(undelivered, 0U);
    EXPECT_FALSE(ec);
  });
  EXPECT_EQ(calls, 1);  // nothing in flight: at once
  w.begin();
  w.begin();
  std::size_t seen = 99;
  w.when_drained([&](std::size_t undelivered, std::error_code) {
    ++calls;
    seen = undelivered;
  });
  w.end(false, admit::make_error_code(admit::errc::closed));
  EXPECT_EQ(calls, 1);  // one still in flight
  w.end(true, {});
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(seen, 1U);
  EXPECT_EQ(w.drain(steady::now()).first, 0U);  // reported to the callback: not again
}

// Threads begin and end work while another drains: every drain that finds nothing in flight reports only failures,
// and the failures reported add up to those made.
TEST(BackgroundWork, ConcurrentWorkIsCountedExactly) {
  background_work w;
  constexpr int threads = 4, each = 2000;
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < each; ++i) {
        w.begin();
        const bool delivered = (i + t) % 3 != 0;
        w.end(delivered, delivered ? std::error_code() : admit::make_error_code(admit::errc::closed));
      }
    });
  }
  std::size_t reported = 0;
  go.store(true);
  for (int i = 0; i < 200; ++i) reported += w.drain(steady::now() + std::chrono::seconds(10)).first;
  for (auto& t : workers) t.join();
  reported += w.drain(steady::now()).first;
  std::size_t made = 0;
  for (int t = 0; t < threads; ++t) {
    for (int i = 0; i < each; ++i) made += (i + t) % 3 == 0 ? 1 : 0;
  }
  EXPECT_EQ(reported, made);
}

}  // namespace
