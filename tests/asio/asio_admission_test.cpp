// admit::asio::async_acquire on an admit::admission: admitted at once, on a release, on its token time (the timer
// path, driven by the manual clock), deadlines, cancellation against grants, context shutdown, one FIFO queue per
// class with blocking waiters, the share rule with asynchronous heads, metrics, and a threaded stress test.
// Timers on the manual clock: the select reactor compares every timer with Clock::now() each time it runs, so
// ctx.poll() after manual_clock::advance() fires the timers that are due (see asio_async_acquire_test.cpp).
#define BOOST_ASIO_DISABLE_EPOLL 1

#include "admit/asio/admission_acquire.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_admission_test {

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using clock_type = admit::testing::manual_clock;
using manual_admission = admit::basic_admission<clock_type>;

struct completion_record {
  int calls = 0;
  error_code ec;
  admit::permit permit;
};

auto recorder(net::io_context& ctx, completion_record& r) {
  return net::bind_executor(ctx, [&r](error_code ec, admit::permit p) {
    ++r.calls;
    r.ec = ec;
    r.permit = std::move(p);
  });
}

error_code as_error(admit::errc e) { return error_code(std::error_code(e)); }

class AsioAdmission : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
};

TEST_F(AsioAdmission, AdmittedAtOnceCompletesOnItsExecutorNeverInsideTheCall) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 2}};
  completion_record r;
  admit::asio::async_acquire(adm, 0, 2, recorder(ctx, r));
  EXPECT_EQ(r.calls, 0);  // admitted, yet the handler waits for the executor
  EXPECT_EQ(adm.in_flight(), 2);
  ctx.run();
  EXPECT_EQ(r.calls, 1);
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.permit.count(), 2);
  r.permit.release();
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST_F(AsioAdmission, InvalidRequestsThrowBeforeStarting) {
  net::io_context ctx;
  manual_admission adm{{}};
  completion_record r;
  EXPECT_THROW(admit::asio::async_acquire(adm, 1, 1, recorder(ctx, r)), std::invalid_argument);
  EXPECT_THROW(admit::asio::async_acquire(adm, 0, 0, recorder(ctx, r)), std::invalid_argument);
  ctx.run();
  EXPECT_EQ(r.calls, 0);
}

TEST_F(AsioAdmission, WaitsForAPermitReleasedByAnother) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  ASSERT_TRUE(held);
  completion_record r;
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, r));
  ctx.poll();
  EXPECT_EQ(r.calls, 0);
  EXPECT_EQ(adm.waiting(), 1u);
  std::thread([&] { held->release(); }).join();  // the release only posts the handler
  EXPECT_EQ(r.calls, 0);
  ctx.run();
  EXPECT_EQ(r.calls, 1);
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(adm.in_flight(), 1);
  EXPECT_EQ(adm.waiting(), 0u);
}

TEST_F(AsioAdmission, AnAsyncHeadIsAdmittedWhenTimeReachesItsTokens) {
  net::io_context ctx;
  manual_admission adm{{.rate = admit::rate::every(10ms), .burst = 1, .max_in_flight = 4}};
  auto first = adm.try_acquire(0);
  ASSERT_TRUE(first);
  completion_record r;
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, r));
  ctx.poll();
  EXPECT_EQ(adm.waiting(), 1u);
  EXPECT_EQ(clock_type::advance(9ms), 0u);  // nobody sleeps on the clock: only the operation's timer can serve it
  ctx.poll();
  EXPECT_EQ(r.calls, 0) << "admitted before its token was there";
  clock_type::advance(1ms);
  ctx.poll();  // the timer goes off and serves the heads: the completion is posted
  ctx.poll();
  EXPECT_EQ(r.calls, 1);
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(adm.in_flight(), 2);
  EXPECT_EQ(ctx.run(), 0u);  // no timer left armed
}

TEST_F(AsioAdmission, TheTimerFollowsTheHeadAsTheQueueMoves) {
  // Two async waiters for tokens: the second becomes head only when the first is admitted, and gets its own time.
  net::io_context ctx;
  manual_admission adm{{.rate = admit::rate::every(10ms), .burst = 1}};
  auto first = adm.try_acquire(0);
  completion_record a, b;
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, a));
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, b));
  clock_type::advance(10ms);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(a.calls, 1);
  EXPECT_EQ(b.calls, 0);
  clock_type::advance(9ms);
  ctx.poll();
  EXPECT_EQ(b.calls, 0);
  clock_type::advance(1ms);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(b.calls, 1);
  EXPECT_FALSE(b.ec);
}

TEST_F(AsioAdmission, TheDeadlineTimesOutAndLeavesTheQueue) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  completion_record r;
  admit::asio::async_acquire_for(adm, 50ms, 0, 1, recorder(ctx, r));
  ctx.poll();
  clock_type::advance(49ms);
  ctx.poll();
  EXPECT_EQ(r.calls, 0);
  clock_type::advance(1ms);
  ctx.poll();
  ctx.poll();
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.ec, as_error(admit::errc::timeout));
  EXPECT_EQ(adm.waiting(), 0u);
  held->release();
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST_F(AsioAdmission, ADeadlineTheRateCannotMeetFailsAtOnce) {
  net::io_context ctx;
  manual_admission adm{{.rate = admit::rate::every(1s), .burst = 1}};
  auto first = adm.try_acquire(0);
  completion_record r;
  admit::asio::async_acquire_for(adm, 100ms, 0, 1, recorder(ctx, r));
  EXPECT_EQ(adm.waiting(), 0u);  // never queued
  ctx.poll();
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.ec, as_error(admit::errc::timeout));
}

TEST_F(AsioAdmission, QueueFullAndExceedsCapacityFailAtOnce) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 2, .max_waiters = 1}};
  auto held = adm.try_acquire(0, 2);
  completion_record waits, full, huge;
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, waits));
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, full));
  admit::asio::async_acquire(adm, 0, 3, recorder(ctx, huge));
  ctx.poll();
  EXPECT_EQ(waits.calls, 0);
  EXPECT_EQ(full.ec, as_error(admit::errc::queue_full));
  EXPECT_EQ(huge.ec, as_error(admit::errc::exceeds_capacity));
  held->release();
  ctx.poll();
  EXPECT_FALSE(waits.ec);
}

TEST_F(AsioAdmission, TerminalCancellationLeavesTheQueueAndTheNextIsServed) {
  using net::cancellation_type;
  for (auto type : {cancellation_type::terminal, cancellation_type::partial, cancellation_type::total}) {
    net::io_context ctx;
    manual_admission adm{{.max_in_flight = 1}};
    auto held = adm.try_acquire(0);
    net::cancellation_signal signal;
    completion_record cancelled, next;
    admit::asio::async_acquire(adm, 0, 1, net::bind_cancellation_slot(signal.slot(), recorder(ctx, cancelled)));
    admit::asio::async_acquire(adm, 0, 1, recorder(ctx, next));
    EXPECT_EQ(adm.waiting(), 2u);
    signal.emit(type);
    EXPECT_EQ(cancelled.calls, 0);  // posted, not run inside emit
    EXPECT_EQ(adm.waiting(), 1u);
    held->release();
    ctx.run();
    EXPECT_EQ(cancelled.ec, net::error::operation_aborted);
    EXPECT_FALSE(cancelled.permit);
    EXPECT_FALSE(next.ec);
    EXPECT_EQ(next.permit.count(), 1);
  }
}

TEST_F(AsioAdmission, AGrantThatCameFirstStandsOverALaterCancel) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  net::cancellation_signal signal;
  completion_record r;
  admit::asio::async_acquire(adm, 0, 1, net::bind_cancellation_slot(signal.slot(), recorder(ctx, r)));
  held->release();                                // granted: the completion is posted
  signal.emit(net::cancellation_type::terminal);  // too late
  ctx.run();
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.permit.count(), 1);
  r.permit.release();
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST_F(AsioAdmission, DestroyingTheContextTakesParkedWaitersOutAndReturnsUndeliveredGrants) {
  manual_admission adm{{.max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  auto alive = std::make_shared<int>(0);
  int calls = 0;
  {
    net::io_context ctx;
    admit::asio::async_acquire(adm, 0, 1,
                               net::bind_executor(ctx, [&calls, alive](error_code, admit::permit) { ++calls; }));
    admit::asio::async_acquire(adm, 0, 1,
                               net::bind_executor(ctx, [&calls, alive](error_code, admit::permit) { ++calls; }));
    held->release();  // the first is granted and posted, but the context never runs
    EXPECT_EQ(adm.waiting(), 1u);
  }
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(alive.use_count(), 1);  // every handler was destroyed
  EXPECT_EQ(adm.waiting(), 0u);
  EXPECT_EQ(adm.in_flight(), 0);  // the undelivered grant went back
}

TEST_F(AsioAdmission, BlockingAndAsyncWaitersShareOneFifoQueuePerClass) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 1}};
  auto held = adm.try_acquire(0);
  std::vector<std::string> order;
  std::mutex order_mutex;
  auto note = [&](std::string who) {
    std::lock_guard lock(order_mutex);
    order.push_back(std::move(who));
  };
  admit::asio::async_acquire(adm, 0, 1, net::bind_executor(ctx, [&](error_code ec, admit::permit) {
                               EXPECT_FALSE(ec);
                               note("async 1");
                             }));
  std::jthread blocking([&] {
    auto r = adm.acquire({}, 0);
    EXPECT_TRUE(r);
    note("blocking");
  });
  while (adm.waiting() < 2) std::this_thread::yield();
  admit::asio::async_acquire(adm, 0, 1, net::bind_executor(ctx, [&](error_code ec, admit::permit) {
                               EXPECT_FALSE(ec);
                               note("async 2");
                             }));
  held->release();
  ctx.run_one();  // async 1 runs and drops its permit, which goes to the blocking waiter
  blocking.join();
  ctx.run();
  EXPECT_EQ(order, (std::vector<std::string>{"async 1", "blocking", "async 2"}));
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST_F(AsioAdmission, AnEntitledAsyncHeadGoesBeforeAnEarlierBorrower) {
  // Two classes, one guaranteed permit each. Class 0 borrowed both; its next request (earlier) and class 1's (later)
  // wait. A release goes to class 1, which is below its share, not to the earlier borrower.
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 2, .classes = {{"a", 0.5}, {"b", 0.5}}}};
  auto a1 = adm.try_acquire(0);
  auto a2 = adm.try_acquire(0);
  ASSERT_TRUE(a1 && a2);
  completion_record borrower, entitled;
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, borrower));
  admit::asio::async_acquire(adm, 1, 1, recorder(ctx, entitled));
  a1->release();
  ctx.poll();
  EXPECT_EQ(entitled.calls, 1);
  EXPECT_FALSE(entitled.ec);
  EXPECT_EQ(borrower.calls, 0);
  EXPECT_EQ(adm.in_flight(1), 1);
  entitled.permit.release();  // class 1 has nothing waiting: class 0 borrows again
  ctx.poll();
  EXPECT_EQ(borrower.calls, 1);
  EXPECT_EQ(adm.in_flight(0), 2);
}

TEST_F(AsioAdmission, AsyncOutcomesAreRecordedOncePerDecision) {
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);
  std::vector<admit::acquire_outcome> events;
  std::vector<admit::admission_event> admitted;
  manual_admission adm{{.max_in_flight = 1, .max_waiters = 1, .on_admitted = [&](const admit::admission_event& e) {
                          admitted.push_back(e);
                        }}};
  adm.enable_metrics([&](const admit::limiter_event& e) { events.push_back(e.outcome); });
  auto held = adm.try_acquire(0);
  completion_record waited, rejected, cancelled;
  net::cancellation_signal signal;
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, waited));
  admit::asio::async_acquire(adm, 0, 1, recorder(ctx, rejected));
  ctx.poll();
  EXPECT_EQ(adm.metrics().waiting, 1u);
  clock_type::advance(30ms);
  held->release();
  ctx.poll();
  EXPECT_FALSE(waited.ec);
  admit::asio::async_acquire(adm, 0, 1, net::bind_cancellation_slot(signal.slot(), recorder(ctx, cancelled)));
  signal.emit(net::cancellation_type::terminal);
  ctx.poll();
  const admit::limiter_snapshot s = adm.metrics();
  EXPECT_EQ(s.admitted, 2u);  // the try_acquire and the async wait
  EXPECT_EQ(s.waited, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.wait.max, 30ms);
  EXPECT_EQ(s.limit, 1);
  EXPECT_EQ(s.in_flight, 1);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(events,
            (std::vector<admit::acquire_outcome>{admit::acquire_outcome::admitted, admit::acquire_outcome::queue_full,
                                                 admit::acquire_outcome::admitted, admit::acquire_outcome::cancelled}));
  ASSERT_EQ(admitted.size(), 2u);
  EXPECT_EQ(admitted[1].order, 2u);
  EXPECT_EQ(admitted[1].at, 30ms);
}

TEST_F(AsioAdmission, UseAwaitable) {
  net::io_context ctx;
  manual_admission adm{{.max_in_flight = 3}};
  std::int64_t got = 0;
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        admit::permit p = co_await admit::asio::async_acquire(adm, 0, 3, net::use_awaitable);
        got = p.count();
      },
      net::detached);
  ctx.run();
  EXPECT_EQ(got, 3);
  EXPECT_EQ(adm.in_flight(), 0);
}

TEST(AsioAdmissionStress, GrantsRacingCancelsOnTwoThreadsLoseNothing) {
  // Two threads run the context; each operation is on its own strand, and half of them are cancelled on that strand
  // at a random moment while the handlers of the others release their permits (which grants the next ones).
  const std::int64_t capacity = 3;
  admit::admission adm{{.max_in_flight = capacity, .classes = {{"a", 0.5}, {"b", 0.25}}}};
  std::vector<std::unique_ptr<net::cancellation_signal>> signals;  // outlive the context
  net::io_context ctx;
  std::atomic<std::int64_t> held{0};
  std::atomic<int> violations{0}, granted{0}, aborted{0}, completions{0};
  const int operations = 5000;
  std::mt19937_64 rng(11);
  for (int i = 0; i < operations; ++i) {
    auto strand = net::make_strand(ctx);
    auto& signal = *signals.emplace_back(std::make_unique<net::cancellation_signal>());
    admit::asio::async_acquire(
        adm, static_cast<std::size_t>(rng() % 2), 1 + static_cast<std::int64_t>(rng() % 2),
        net::bind_cancellation_slot(signal.slot(), net::bind_executor(strand, [&](error_code ec, admit::permit p) {
                                      if (!ec) {
                                        const std::int64_t n = p.count();
                                        if (held.fetch_add(n) + n > capacity) violations.fetch_add(1);
                                        held.fetch_sub(n);
                                        granted.fetch_add(1);
                                      } else {
                                        EXPECT_EQ(ec, net::error::operation_aborted);
                                        aborted.fetch_add(1);
                                      }
                                      completions.fetch_add(1);
                                    })));
    if (rng() % 2 == 0) net::post(strand, [&signal] { signal.emit(net::cancellation_type::terminal); });
  }
  std::vector<std::jthread> runners;
  for (int t = 0; t < 2; ++t) runners.emplace_back([&] { ctx.run(); });
  runners.clear();
  EXPECT_EQ(completions.load(), operations);
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(granted.load(), 0);
  EXPECT_GT(aborted.load(), 0);
  EXPECT_EQ(adm.waiting(), 0u);
  EXPECT_EQ(adm.in_flight(), 0);
  EXPECT_TRUE(adm.try_acquire(0, capacity));
}

TEST(AsioAdmissionStress, TimersRearmedFromManyThreadsAdmitEveryWaiterAtTheRate) {
  // A rate that keeps heads waiting for tokens: their timers are re-armed by whichever thread serves the heads (the
  // context's two runners, the releasing handlers), while some waiters are cancelled and some time out.
  const std::int64_t capacity = 4;
  admit::admission adm{{.rate = admit::rate::per_second(20000),
                        .burst = 4,
                        .max_in_flight = capacity,
                        .classes = {{"a", 0.5}, {"b", 0.3}, {"c", 0.0}}}};
  std::vector<std::unique_ptr<net::cancellation_signal>> signals;  // outlive the context
  net::io_context ctx;
  std::atomic<std::int64_t> held{0};
  std::atomic<int> violations{0}, granted{0}, refused{0}, completions{0};
  const int operations = 2000;
  std::mt19937_64 rng(5);
  for (int i = 0; i < operations; ++i) {
    auto strand = net::make_strand(ctx);
    auto& signal = *signals.emplace_back(std::make_unique<net::cancellation_signal>());
    auto handler = net::bind_cancellation_slot(
        signal.slot(), net::bind_executor(strand, [&](error_code ec, admit::permit p) {
          if (!ec) {
            const std::int64_t n = p.count();
            if (held.fetch_add(n) + n > capacity) violations.fetch_add(1);
            held.fetch_sub(n);
            granted.fetch_add(1);
          } else {
            EXPECT_TRUE(ec == net::error::operation_aborted || ec == admit::errc::timeout) << ec.message();
            refused.fetch_add(1);
          }
          completions.fetch_add(1);
        }));
    const auto priority = static_cast<std::size_t>(rng() % 3);
    if (rng() % 4 == 0) {
      admit::asio::async_acquire_for(adm, 2ms, priority, 1, std::move(handler));
    } else {
      admit::asio::async_acquire(adm, priority, 1, std::move(handler));
    }
    if (rng() % 8 == 0) net::post(strand, [&signal] { signal.emit(net::cancellation_type::terminal); });
  }
  std::vector<std::jthread> runners;
  for (int t = 0; t < 2; ++t) runners.emplace_back([&] { ctx.run(); });
  runners.clear();
  EXPECT_EQ(completions.load(), operations);
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(granted.load(), 0);
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(adm.waiting(), 0u);
  EXPECT_EQ(adm.in_flight(), 0);
}

}  // namespace

}  // namespace asio_admission_test
