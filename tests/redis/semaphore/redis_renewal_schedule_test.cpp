// The semaphore's renewal schedule alone (src/redis/semaphore/renewal_schedule.hpp): items fall due in due order and
// together, a cancelled or rescheduled item falls due only as now scheduled, an item whose owner let go is skipped,
// an earlier item re-arms the timer, and nothing falls due once the schedule is gone. Due times are explicit: in the
// past (due at once) or an hour ahead (never within a test).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "renewal_schedule.hpp"

namespace renewal_schedule_testing {

using admit::redis::detail::renewal_schedule;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct item {
  int id;
};
using schedule = renewal_schedule<item>;

// A schedule on its own io_context, recording the batches that fall due.
struct fixture {
  boost::asio::io_context io;
  std::vector<std::vector<int>> batches;
  std::shared_ptr<schedule> s = schedule::make(io.get_executor(), [this](const schedule::batch& due) {
    std::vector<int> ids;
    for (const auto& i : due) ids.push_back(i->id);
    batches.push_back(ids);
  });

  // Runs the io_context until `count` batches have fallen due (at most 5 s: far beyond what a due timer takes).
  void run_until_batches(std::size_t count) {
    const auto until = steady::now() + 5s;
    while (batches.size() < count && steady::now() < until) {
      io.restart();
      io.run_one_for(10ms);
    }
  }
};

std::shared_ptr<item> make_item(int id) { return std::make_shared<item>(item{id}); }

TEST(RenewalSchedule, ItemsDueTogetherFallDueInOneBatchInDueOrder) {
  fixture f;
  auto a = make_item(1), b = make_item(2), c = make_item(3), later = make_item(4);
  const auto now = steady::now();
  f.s->schedule(later, now + 1h);  // first: the timer is armed for it, and must be armed again for the others
  f.io.poll();                     // the timer armed for `later`
  f.s->schedule(b, now - 1s);
  f.s->schedule(a, now - 2s);
  f.s->schedule(c, now - 1ms);
  f.run_until_batches(1);
  ASSERT_EQ(f.batches, (std::vector<std::vector<int>>{{1, 2, 3}}));
  EXPECT_EQ(f.s->size(), 1U);  // `later` still waits
}

TEST(RenewalSchedule, ACancelledItemDoesNotFallDueAndARescheduledOneOnlyAtItsNewTime) {
  fixture f;
  auto a = make_item(1), b = make_item(2), c = make_item(3);
  const auto now = steady::now();
  f.s->schedule(a, now - 1s);
  f.s->schedule(b, now - 1s);
  f.s->schedule(c, now + 1h);
  f.s->cancel(*a);
  f.s->schedule(b, now + 1h);  // moved: once, at the new time
  f.s->schedule(c, now - 1s);  // moved earlier: re-arms
  f.run_until_batches(1);
  ASSERT_EQ(f.batches, (std::vector<std::vector<int>>{{3}}));
  EXPECT_EQ(f.s->size(), 1U);
  f.s->cancel(*b);
  f.s->cancel(*b);  // twice: nothing
  EXPECT_EQ(f.s->size(), 0U);
}

TEST(RenewalSchedule, AnItemWhoseOwnerLetGoIsSkippedNotKeptAlive) {
  fixture f;
  auto a = make_item(1), b = make_item(2);
  const std::weak_ptr<item> watched = a;
  f.s->schedule(a, steady::now() - 1s);
  f.s->schedule(b, steady::now() - 1s);
  a.reset();
  EXPECT_TRUE(watched.expired());  // the schedule holds it weakly
  f.run_until_batches(1);
  ASSERT_EQ(f.batches, (std::vector<std::vector<int>>{{2}}));
  EXPECT_EQ(f.s->size(), 0U);
}

// An item scheduled again from on_due (as a renewal schedules the next) falls due again.
TEST(RenewalSchedule, OnDueMayScheduleAgain) {
  boost::asio::io_context io;
  int calls = 0;
  std::shared_ptr<schedule> s;
  s = schedule::make(io.get_executor(), [&](const schedule::batch& due) {
    if (++calls < 3) s->schedule(due.front(), steady::now() - 1ms);
  });
  auto a = make_item(1);
  s->schedule(a, steady::now() - 1ms);
  io.run();  // until nothing is scheduled: the third batch schedules nothing more
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(s->size(), 0U);
}

TEST(RenewalSchedule, NothingFallsDueOnceTheScheduleIsGone) {
  fixture f;
  auto a = make_item(1);
  f.s->schedule(a, steady::now() - 1s);
  f.s.reset();  // before its timer's handler ran
  f.io.run();   // returns: nothing is left to wait for
  EXPECT_TRUE(f.batches.empty());
}

// Threads schedule and cancel their own items while the io thread runs the schedule: no item is lost (each one left
// scheduled falls due exactly once) and none cancelled falls due after its cancel returned.
TEST(RenewalSchedule, ConcurrentSchedulesAndCancelsLoseNothing) {
  boost::asio::io_context io;
  std::mutex m;
  std::vector<int> fallen;
  auto s = schedule::make(io.get_executor(), [&](const schedule::batch& due) {
    const std::lock_guard lock(m);
    for (const auto& i : due) fallen.push_back(i->id);
  });
  constexpr int threads = 4, each = 500;
  std::vector<std::vector<std::shared_ptr<item>>> items(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < each; ++i) {
        auto it = make_item(t * each + i);
        s->schedule(it, steady::now() + 1h);
        if (i % 2 == 0) {
          s->cancel(*it);
        } else {
          s->schedule(it, steady::now() - 1ms);  // moved to now: falls due
        }
        items[static_cast<std::size_t>(t)].push_back(std::move(it));
      }
    });
  }
  std::atomic<bool> stop{false};
  std::thread runner([&] {
    auto guard = boost::asio::make_work_guard(io);
    while (!stop.load()) io.run_for(1ms);
  });
  for (auto& w : workers) w.join();
  const auto until = steady::now() + 10s;
  while (s->size() > 0 && steady::now() < until) std::this_thread::yield();
  EXPECT_EQ(s->size(), 0U) << "items left scheduled";
  stop = true;
  runner.join();
  std::sort(fallen.begin(), fallen.end());
  std::vector<int> expected;
  for (int t = 0; t < threads; ++t) {
    for (int i = 1; i < each; i += 2) expected.push_back(t * each + i);
  }
  EXPECT_EQ(fallen, expected);
}

}  // namespace renewal_schedule_testing

namespace renewal_schedule_testing {

// A failed renewal is tried again after a quarter of the time left, between 100 ms and lease_ttl / 3, never past the
// expiry. With a 10 s lease whose first renewal (at 3.3 s) found the master gone, the next tries come at 5.0, 6.3,
// 7.2 ... s, where they came only at 6.7 s and at the expiry: a cluster's promoted replica, serving from about 5 s on,
// was never asked, and the lease was lost.
TEST(RenewalSchedule, AFailedRenewalIsTriedAgainSoonerAsTheExpiryNears) {
  using admit::redis::detail::retry_after_failed_renewal;
  const steady::time_point t0{};
  const auto every = std::chrono::duration_cast<steady::duration>(10s) / 3;
  const steady::time_point expiry = t0 + 10s;
  std::vector<steady::duration> tries;
  for (steady::time_point now = t0 + every; now < expiry;) {
    now = retry_after_failed_renewal<steady>(now, expiry, every);
    tries.push_back(now - t0);
  }
  ASSERT_GE(tries.size(), 8U);
  EXPECT_EQ(tries[0], every + (10s - every) / 4);  // 3.33 + 1.67 s
  for (std::size_t i = 1; i < tries.size(); ++i) {
    EXPECT_GT(tries[i], tries[i - 1]);
    EXPECT_LE(tries[i] - tries[i - 1], every);
    EXPECT_GE(tries[i] - tries[i - 1], std::min<steady::duration>(100ms, expiry - (t0 + tries[i - 1])));
  }
  EXPECT_EQ(tries.back(), 10s);  // the last at the expiry itself, where a failure marks the lease lost
  // Far from the expiry, no sooner than lease_ttl / 3 would have; at it, at once.
  EXPECT_EQ(retry_after_failed_renewal<steady>(t0, t0 + 1h, every), t0 + every);
  EXPECT_EQ(retry_after_failed_renewal<steady>(expiry, expiry, every), expiry);
  EXPECT_EQ(retry_after_failed_renewal<steady>(expiry + 1s, expiry, every), expiry);
}

}  // namespace renewal_schedule_testing
