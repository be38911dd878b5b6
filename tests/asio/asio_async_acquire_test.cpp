// admit::asio::async_acquire: completion tokens, one FIFO queue with blocking waiters, cancellation through the
// handler's slot (cancel vs grant), close, context shutdown with waiters parked, and a threaded stress test.
// Timers on the manual clock: epoll's reactor looks at its timers only when a timerfd armed in real time fires; the
// select reactor compares every timer with Clock::now() each time it runs, so ctx.poll() after
// manual_clock::advance() fires the timers that are due, with no real time passing.
#define BOOST_ASIO_DISABLE_EPOLL 1

#include "admit/asio/async_acquire.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "admit/testing/manual_clock.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace asio_async_acquire_test {

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

// What a completion handler saw.
struct completion_record {
  int calls = 0;
  error_code ec;
  admit::permit permit;
  std::thread::id thread;
};

auto recorder(net::io_context& ctx, completion_record& r) {
  return net::bind_executor(ctx, [&r](error_code ec, admit::permit p) {
    ++r.calls;
    r.ec = ec;
    r.permit = std::move(p);
    r.thread = std::this_thread::get_id();
  });
}

TEST(AsioAsyncAcquire, CompletesOnItsExecutorAndNeverInsideTheInitiatingCall) {
  net::io_context ctx;
  admit::semaphore sem{2};
  completion_record r;
  admit::asio::async_acquire(sem, 2, recorder(ctx, r));
  EXPECT_EQ(r.calls, 0);  // free permits, yet the handler waits for the executor
  EXPECT_EQ(sem.available(), 0);
  ctx.run();
  EXPECT_EQ(r.calls, 1);
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.permit.count(), 2);
  r.permit.release();
  EXPECT_EQ(sem.available(), 2);
}

TEST(AsioAsyncAcquire, WaitsInTheSameFifoQueueAsBlockingWaiters) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  std::vector<std::string> order;
  std::mutex order_mutex;
  auto note = [&](std::string who) {
    std::lock_guard lock(order_mutex);
    order.push_back(std::move(who));
  };
  admit::asio::async_acquire(sem, net::bind_executor(ctx, [&](error_code ec, admit::permit) {
                               EXPECT_FALSE(ec);
                               note("async 1");
                             }));
  std::jthread blocking([&] {
    auto r = sem.acquire();
    EXPECT_TRUE(r);
    note("blocking");
  });
  while (sem.waiting() < 2) std::this_thread::yield();
  admit::asio::async_acquire(sem, net::bind_executor(ctx, [&](error_code ec, admit::permit) {
                               EXPECT_FALSE(ec);
                               note("async 2");
                             }));
  EXPECT_EQ(sem.waiting(), 3u);
  held.release();
  ctx.run_one();  // async 1 runs and drops its permit, which goes to the blocking waiter
  blocking.join();
  ctx.run();
  EXPECT_EQ(order, (std::vector<std::string>{"async 1", "blocking", "async 2"}));
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioAsyncAcquire, ReleaseOnAnotherThreadOnlyPostsTheHandler) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  completion_record r;
  admit::asio::async_acquire(sem, recorder(ctx, r));
  std::thread::id releaser;
  std::thread([&] {
    releaser = std::this_thread::get_id();
    held.release();
  }).join();
  EXPECT_EQ(r.calls, 0);  // the release posted the completion; it did not run the handler
  ctx.run();
  EXPECT_EQ(r.calls, 1);
  EXPECT_NE(r.thread, releaser);
  EXPECT_EQ(r.thread, std::this_thread::get_id());
  EXPECT_EQ(r.permit.count(), 1);
}

TEST(AsioAsyncAcquire, UseAwaitable) {
  net::io_context ctx;
  admit::semaphore sem{3};
  std::int64_t got = 0;
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        admit::permit p = co_await admit::asio::async_acquire(sem, 3, net::use_awaitable);
        got = p.count();
        EXPECT_EQ(sem.available(), 0);
      },
      net::detached);
  ctx.run();
  EXPECT_EQ(got, 3);
  EXPECT_EQ(sem.available(), 3);
}

TEST(AsioAsyncAcquire, UseAwaitableThrowsTheErrorCode) {
  net::io_context ctx;
  admit::semaphore sem{1};
  std::optional<boost::system::system_error> error;
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        try {
          (void)co_await admit::asio::async_acquire(sem, 2, net::use_awaitable);
        } catch (const boost::system::system_error& e) {
          error = e;
        }
      },
      net::detached);
  ctx.run();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), boost::system::error_code(std::error_code(admit::errc::exceeds_capacity)));
}

TEST(AsioAsyncAcquire, DeferredStartsOnlyWhenInvoked) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto op = admit::asio::async_acquire(sem, 1, net::deferred);
  EXPECT_EQ(sem.available(), 1);  // nothing happened yet
  completion_record r;
  std::move(op)(recorder(ctx, r));
  EXPECT_EQ(sem.available(), 0);
  ctx.run();
  EXPECT_EQ(r.permit.count(), 1);
}

TEST(AsioAsyncAcquire, UseFuture) {
  net::io_context ctx;
  admit::semaphore sem{1, {.max_waiters = 0}};
  auto held = *sem.try_acquire();
  std::future<admit::permit> rejected = admit::asio::async_acquire(sem, 1, net::bind_executor(ctx, net::use_future));
  held.release();
  std::future<admit::permit> granted = admit::asio::async_acquire(sem, 1, net::bind_executor(ctx, net::use_future));
  ctx.run();
  try {
    (void)rejected.get();
    FAIL() << "queue_full expected";
  } catch (const boost::system::system_error& e) {
    EXPECT_EQ(e.code(), boost::system::error_code(std::error_code(admit::errc::queue_full)));
  }
  EXPECT_EQ(granted.get().count(), 1);
}

TEST(AsioAsyncAcquire, EveryCancellationTypeAbortsAQueuedWaitWithoutSideEffects) {
  using net::cancellation_type;
  for (auto type : {cancellation_type::terminal, cancellation_type::partial, cancellation_type::total}) {
    net::io_context ctx;
    admit::semaphore sem{2};
    auto held = *sem.try_acquire(2);
    net::cancellation_signal signal;
    completion_record r;
    admit::asio::async_acquire(sem, 2, net::bind_cancellation_slot(signal.slot(), recorder(ctx, r)));
    held.split(1).release();  // the waiter holds one of its two
    EXPECT_EQ(sem.available(), 0);
    signal.emit(type);
    EXPECT_EQ(r.calls, 0);  // posted, not run inside emit
    ctx.run();
    EXPECT_EQ(r.calls, 1);
    EXPECT_EQ(r.ec, net::error::operation_aborted);
    EXPECT_FALSE(r.permit);
    EXPECT_EQ(sem.waiting(), 0u);
    EXPECT_EQ(sem.available(), 1);  // the reserved permit came back
  }
}

TEST(AsioAsyncAcquire, AGrantThatCameFirstStandsOverALaterCancel) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  net::cancellation_signal signal;
  completion_record r;
  admit::asio::async_acquire(sem, net::bind_cancellation_slot(signal.slot(), recorder(ctx, r)));
  held.release();                                 // granted: the completion is posted
  signal.emit(net::cancellation_type::terminal);  // too late
  ctx.run();
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.permit.count(), 1);
}

TEST(AsioAsyncAcquire, APermitNobodyTakesGoesBack) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  admit::asio::async_acquire(sem, net::bind_executor(ctx, [](error_code, admit::permit) {}));
  held.release();
  ctx.run();
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioAsyncAcquire, CloseCompletesAsyncWaitersWithClosed) {
  net::io_context ctx;
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  completion_record a, b;
  admit::asio::async_acquire(sem, recorder(ctx, a));
  sem.close();
  admit::asio::async_acquire(sem, recorder(ctx, b));
  ctx.run();
  EXPECT_EQ(a.ec, boost::system::error_code(std::error_code(admit::errc::closed)));
  EXPECT_EQ(b.ec, boost::system::error_code(std::error_code(admit::errc::closed)));
  EXPECT_TRUE(a.ec == admit::errc::closed);  // compares with admit::errc directly
  EXPECT_EQ(a.ec.message(), "closed");       // the message of admit::errc::closed, kept across the edge
}

TEST(AsioAsyncAcquire, DestroyingTheContextTakesParkedWaitersOutOfTheQueue) {
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  auto alive = std::make_shared<int>(0);
  int calls = 0;
  {
    net::io_context ctx;
    admit::asio::async_acquire(sem, net::bind_executor(ctx, [&calls, alive](error_code, admit::permit) { ++calls; }));
    admit::asio::async_acquire(sem, net::bind_executor(ctx, [&calls, alive](error_code, admit::permit) { ++calls; }));
    EXPECT_EQ(sem.waiting(), 2u);
    EXPECT_EQ(alive.use_count(), 3);
  }
  EXPECT_EQ(calls, 0);              // destroyed, never called
  EXPECT_EQ(alive.use_count(), 1);  // the handlers were destroyed
  EXPECT_EQ(sem.waiting(), 0u);
  held.release();
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioAsyncAcquire, DestroyingTheContextReturnsAGrantThatWasNeverDelivered) {
  admit::semaphore sem{1};
  auto held = *sem.try_acquire();
  {
    net::io_context ctx;
    admit::asio::async_acquire(sem, net::bind_executor(ctx, [](error_code, admit::permit) { FAIL(); }));
    held.release();  // granted and posted, but the context never runs
    EXPECT_EQ(sem.available(), 0);
  }
  EXPECT_EQ(sem.available(), 1);
}

TEST(AsioAsyncAcquire, TimeoutIsCancellationByATimerOnTheManualClock) {
  using clock_type = admit::testing::manual_clock;
  using timer_type = net::basic_waitable_timer<clock_type>;
  using namespace net::experimental::awaitable_operators;
  clock_type::reset();
  net::io_context ctx;
  admit::basic_semaphore<clock_type> sem{1};
  auto held = *sem.try_acquire();
  std::optional<std::size_t> winner;
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        timer_type timer(ctx, clock_type::now() + 50ms);
        auto result =
            co_await (admit::asio::async_acquire(sem, 1, net::use_awaitable) || timer.async_wait(net::use_awaitable));
        winner = result.index();
      },
      net::detached);
  ctx.poll();
  EXPECT_EQ(sem.waiting(), 1u);
  clock_type::advance(49ms);
  ctx.poll();
  EXPECT_FALSE(winner);
  clock_type::advance(1ms);
  ctx.poll();  // the timer fires and cancels the acquisition, whose completion resumes the coroutine
  ASSERT_TRUE(winner);
  EXPECT_EQ(*winner, 1u);  // the timer won; the acquisition was cancelled
  EXPECT_EQ(sem.waiting(), 0u);
  held.release();
  EXPECT_EQ(sem.available(), 1);
}

using manual_clock = admit::testing::manual_clock;

TEST(AsioAsyncAcquireFor, TimesOutWhenTheDeadlineTimerFires) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_semaphore<manual_clock> sem{2};
  auto held = *sem.try_acquire(2);
  completion_record r;
  admit::asio::async_acquire_for(sem, 50ms, 2, recorder(ctx, r));
  held.split(1).release();  // the waiter reserves one; the timeout must give it back
  ctx.poll();
  manual_clock::advance(49ms);
  ctx.poll();
  EXPECT_EQ(r.calls, 0);
  manual_clock::advance(1ms);
  ctx.poll();
  EXPECT_EQ(r.calls, 1);
  EXPECT_TRUE(r.ec == admit::errc::timeout);
  EXPECT_EQ(sem.waiting(), 0u);
  EXPECT_EQ(sem.available(), 1);
  ctx.run();  // nothing left: the timer's handler was the operation's last reference
}

TEST(AsioAsyncAcquireFor, AGrantBeforeTheDeadlineWinsAndStopsTheTimer) {
  manual_clock::reset();
  net::io_context ctx;
  admit::basic_semaphore<manual_clock> sem{1};
  auto held = *sem.try_acquire();
  completion_record r;
  admit::asio::async_acquire_for(sem, 1h, 1, recorder(ctx, r));
  held.release();
  ctx.run();  // returns: the completion ran and the cancelled timer no longer counts as work
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.permit.count(), 1);
}

TEST(AsioAsyncAcquireFor, APastDeadlineTakesFreePermitsOrTimesOutWithoutQueueing) {
  manual_clock::reset();
  manual_clock::advance(1s);
  net::io_context ctx;
  admit::basic_semaphore<manual_clock> sem{1};
  completion_record first, second;
  admit::asio::async_acquire_until(sem, manual_clock::time_point{}, 1, recorder(ctx, first));
  admit::asio::async_acquire_for(sem, 0s, 1, recorder(ctx, second));
  EXPECT_EQ(sem.waiting(), 0u);
  ctx.run();
  EXPECT_EQ(first.permit.count(), 1);
  EXPECT_TRUE(second.ec == admit::errc::timeout);
}

TEST(AsioAsyncAcquireFor, DestroyingTheContextWithATimedWaiterParkedLeaksNothing) {
  manual_clock::reset();
  admit::basic_semaphore<manual_clock> sem{1};
  auto held = *sem.try_acquire();
  auto alive = std::make_shared<int>(0);
  {
    net::io_context ctx;
    admit::asio::async_acquire_for(sem, 1h, 1, net::bind_executor(ctx, [alive](error_code, admit::permit) { FAIL(); }));
    ctx.poll();
    EXPECT_EQ(sem.waiting(), 1u);
  }
  EXPECT_EQ(alive.use_count(), 1);
  EXPECT_EQ(sem.waiting(), 0u);
}

TEST(AsioConcurrencyLimiter, CountsAsyncOutcomesAndHonoursTheDefaultTimeout) {
  manual_clock::reset();
  net::io_context ctx;
  auto work = net::make_work_guard(ctx);  // keeps poll() working between the phases, when no operation is pending
  std::vector<admit::acquire_outcome> events;
  admit::basic_concurrency_limiter<manual_clock> limiter{
      {.limit = 1, .max_waiters = 1, .timeout = 100ms},
      [&](const admit::limiter_event& e) { events.push_back(e.outcome); }};
  auto held = *limiter.try_acquire();
  completion_record waited, rejected, timed_out;
  admit::asio::async_acquire(limiter, recorder(ctx, waited));
  admit::asio::async_acquire(limiter, recorder(ctx, rejected));
  ctx.poll();
  EXPECT_TRUE(rejected.ec == admit::errc::queue_full);
  manual_clock::advance(30ms);
  held.release();
  ctx.poll();
  EXPECT_FALSE(waited.ec);
  admit::asio::async_acquire(limiter, recorder(ctx, timed_out));
  ctx.poll();
  manual_clock::advance(100ms);
  ctx.poll();
  EXPECT_TRUE(timed_out.ec == admit::errc::timeout);
  const auto snap = limiter.metrics();
  EXPECT_EQ(snap.admitted, 2u);  // the try_acquire and the async wait
  EXPECT_EQ(snap.rejected, 1u);
  EXPECT_EQ(snap.timed_out, 1u);
  EXPECT_EQ(snap.wait.max, 30ms);
  EXPECT_EQ(events,
            (std::vector<admit::acquire_outcome>{admit::acquire_outcome::admitted, admit::acquire_outcome::queue_full,
                                                 admit::acquire_outcome::admitted, admit::acquire_outcome::timeout}));
}

TEST(AsioAsyncAcquireStress, CancelsRacingGrantsOnTwoThreadsLoseNothing) {
  // Two threads run the context; each operation lives on its own strand with a cancellation signal that a timer-like
  // racer emits on that strand at a random moment, while other threads release permits.
  const std::int64_t capacity = 3;
  admit::semaphore sem{capacity};
  net::io_context ctx;
  std::atomic<std::int64_t> held{0};
  std::atomic<int> violations{0}, granted{0}, aborted{0}, completions{0};
  const int operations = 20000;
  std::mt19937_64 rng(7);
  struct op_state {
    net::cancellation_signal signal;
  };
  std::vector<std::unique_ptr<op_state>> states;
  for (int i = 0; i < operations; ++i) {
    auto strand = net::make_strand(ctx);
    auto& st = *states.emplace_back(std::make_unique<op_state>());
    admit::asio::async_acquire(
        sem, 1 + static_cast<std::int64_t>(rng() % 2),
        net::bind_cancellation_slot(st.signal.slot(), net::bind_executor(strand, [&](error_code ec, admit::permit p) {
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
    if (rng() % 2 == 0) {
      net::post(strand, [&st] { st.signal.emit(net::cancellation_type::terminal); });
    }
  }
  std::vector<std::jthread> runners;
  for (int t = 0; t < 2; ++t) runners.emplace_back([&] { ctx.run(); });
  runners.clear();
  EXPECT_EQ(completions.load(), operations);
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(granted.load(), 0);
  EXPECT_GT(aborted.load(), 0);
  EXPECT_EQ(sem.waiting(), 0u);
  EXPECT_EQ(sem.available(), capacity);
}

// A wait granted on another thread the moment it is queued: the grant's completion runs (and frees the operation) on
// the pool's thread while the initiating call may still be returning. The initiating call read the operation after
// queueing it — a use after free that AddressSanitizer and ThreadSanitizer report here (the plain build cannot see
// it). With and without a deadline (whose timer holds a reference of its own).
TEST(AsioAsyncAcquireStress, AWaitGrantedOnAnotherThreadAsItIsQueuedIsNotTouchedAfterwards) {
  for (const bool timed : {false, true}) {
    admit::semaphore sem{1};
    net::thread_pool pool(1);
    std::optional<admit::permit> held = sem.try_acquire();
    ASSERT_TRUE(held);
    std::atomic<bool> stop{false};
    std::mutex m;
    std::optional<admit::permit> to_release;  // under m: the releaser gives it back once somebody waits
    std::jthread releaser([&] {
      while (!stop.load()) {
        std::optional<admit::permit> p;
        {
          const std::lock_guard lock(m);
          if (to_release && sem.waiting() != 0) p = std::exchange(to_release, std::nullopt);
        }
        if (p) {
          p->release();
        } else {
          std::this_thread::yield();
        }
      }
    });
    const int rounds = 2000;
    int granted = 0;
    for (int i = 0; i < rounds; ++i) {
      {
        const std::lock_guard lock(m);
        to_release = std::exchange(held, std::nullopt);
      }
      std::promise<admit::permit> answer;
      auto handler = net::bind_executor(pool, [&answer](error_code ec, admit::permit p) {
        EXPECT_FALSE(ec) << ec.message();
        answer.set_value(std::move(p));
      });
      if (timed) {
        admit::asio::async_acquire_for(sem, 1h, 1, std::move(handler));
      } else {
        admit::asio::async_acquire(sem, 1, std::move(handler));
      }
      held = answer.get_future().get();
      if (!*held) break;
      ++granted;
    }
    stop = true;
    releaser.join();
    pool.join();
    EXPECT_EQ(granted, rounds) << (timed ? "with a deadline" : "without one");
    EXPECT_EQ(sem.waiting(), 0u);
  }
}

}  // namespace

}  // namespace asio_async_acquire_test
