// admit/asio/async_acquire.hpp — wait for semaphore permits without blocking a thread: Asio completion tokens
// (callbacks, use_awaitable, deferred, use_future), per-operation cancellation, FIFO with blocking waiters.
//
//   auto [ec, permit] = co_await admit::asio::async_acquire(sem, 1, boost::asio::as_tuple(boost::asio::use_awaitable));
//   if (!ec) co_await handle(request);   // the permit is released when `permit` goes out of scope
//
// Completion signature: void(boost::system::error_code, admit::permit). Errors: boost::asio::error::operation_aborted
// (cancelled through the handler's cancellation slot), and as an admit::errc: queue_full and exceeds_capacity
// (at once, as the blocking acquire), closed.
//
// Guarantees.
// - One queue: the operation waits in the semaphore's FIFO queue, between the blocking waiters that arrived before
//   and after it, and is served by the same direct hand-off.
// - The handler runs exactly once, on its associated executor (system_executor when it has none — bind one), through
//   a post: never inside the initiating call and never inside another thread's release(), close() or cancel, so
//   no user code runs while admit holds internal state. Outstanding work is counted on the executor while waiting.
// - Cancellation: the handler's cancellation slot accepts terminal, partial and total cancellation (a cancelled wait
//   has no side effect: its reserved permits go to the next waiters). If the grant came first the grant stands — the
//   handler gets the permit, and if nobody takes it, the permit's destructor returns it. Emit cancellation from the
//   handler's executor (or strand), as every Asio operation requires.
// - Timeouts are cancellation: async_acquire_for/until (and the concurrency limiter's default timeout) arm a timer
//   of Clock on the handler's executor whose expiry takes the same path as the cancellation slot, completing with
//   admit::errc::timeout; awaitable operators (`async_acquire(...) || timer.async_wait(...)`) work too.
// - Shutdown: destroying the handler's execution context while the operation waits takes it out of the queue and
//   destroys the handler without calling it; a grant already posted is destroyed with the context's queue and its
//   permits return to the semaphore. The semaphore must outlive its waiting operations.
// - Cost: the operation is one heap allocation (plus its timer, when it has a deadline); waiting takes the semaphore's
// mutex (begin, grant, cancel).
//   Resolution posts to the executor; if that post cannot allocate, std::terminate is called (it runs inside
//   release(), which cannot fail).
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "admit/asio/detail/acquire_operation.hpp"
#include "admit/concurrency_limiter.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/permit.hpp"
#include "admit/semaphore.hpp"

namespace admit::asio {

namespace detail {

template <class Clock, class Recorder>
struct initiate_acquire {
  Recorder recorder;
  template <class Handler>
  void operator()(Handler&& handler, admit::detail::semaphore_state* state, std::int64_t n,
                  std::optional<typename Clock::time_point> deadline) const {
    acquire_operation<std::decay_t<Handler>, Clock, Recorder>::start(std::forward<Handler>(handler), *state, n,
                                                                     deadline, Recorder(recorder));
  }
};

template <class Clock, class Recorder, class CompletionToken>
auto initiate(admit::detail::semaphore_state& state, std::int64_t n, std::optional<typename Clock::time_point> deadline,
              Recorder recorder, CompletionToken&& token) {
  admit::detail::semaphore_state::check_count("n", n, 1);
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, admit::permit)>(
      initiate_acquire<Clock, Recorder>{std::move(recorder)}, token, &state, n, deadline);
}

// Counts the outcome in a semaphore's metrics (nothing when they are off), as its blocking members do.
template <class Clock>
struct semaphore_recorder {
  basic_semaphore<Clock>* sem;
  void operator()(errc outcome, std::int64_t n, std::chrono::nanoseconds waited) const {
    sem->record_outcome(outcome, n, waited);
  }
};

// Counts the outcome in a concurrency limiter, as its blocking members do.
template <class Clock>
struct limiter_recorder {
  basic_concurrency_limiter<Clock>* limiter;
  void operator()(errc outcome, std::int64_t n, std::chrono::nanoseconds waited) const {
    limiter->record_outcome(outcome, n, waited);
  }
};

}  // namespace detail

// Waits for n permits (n >= 1; throws std::invalid_argument otherwise, before starting) of `sem`. See the top of the
// file for guarantees. With the semaphore's metrics enabled, the outcome (admitted with its wait, queue_full,
// timeout, cancelled, closed, exceeds_capacity) is counted once, on the handler's executor just before the handler
// runs; a grant made without queueing waited 0. Thread safety: may be called concurrently with every member of the
// semaphore.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_semaphore<Clock>& sem, std::int64_t n, CompletionToken&& token) {
  return detail::initiate<Clock>(sem.native_state(), n, std::nullopt, detail::semaphore_recorder<Clock>{&sem},
                                 std::forward<CompletionToken>(token));
}

// One permit.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_semaphore<Clock>& sem, CompletionToken&& token) {
  return async_acquire(sem, 1, std::forward<CompletionToken>(token));
}

// As async_acquire, at most until `deadline` on Clock: then it completes with admit::errc::timeout. The deadline is a
// timer on the handler's executor that cancels the wait (the same path as the cancellation slot); a grant that came
// first stands. A deadline already passed takes free permits if nobody is queued, else times out, without queueing.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire_until(basic_semaphore<Clock>& sem, typename Clock::time_point deadline, std::int64_t n,
                         CompletionToken&& token) {
  return detail::initiate<Clock>(sem.native_state(), n, deadline, detail::semaphore_recorder<Clock>{&sem},
                                 std::forward<CompletionToken>(token));
}

// async_acquire_until(now + timeout); a zero or negative timeout does not wait.
template <steady_clock_like Clock, class Rep, class Period, class CompletionToken>
auto async_acquire_for(basic_semaphore<Clock>& sem, std::chrono::duration<Rep, Period> timeout, std::int64_t n,
                       CompletionToken&& token) {
  return async_acquire_until(sem, admit::detail::deadline_after<Clock>(Clock::now(), timeout), n,
                             std::forward<CompletionToken>(token));
}

// The concurrency limiter: waits at most its default timeout (errc::timeout), and counts the outcome (admitted with
// its wait, queue_full, timeout, cancelled, closed, exceeds_capacity) in the limiter's snapshot and event hook, on
// the handler's executor just before the handler runs.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_concurrency_limiter<Clock>& limiter, std::int64_t n, CompletionToken&& token) {
  std::optional<typename Clock::time_point> deadline;
  if (limiter.default_timeout() != std::chrono::nanoseconds::max()) {
    deadline = admit::detail::deadline_after<Clock>(Clock::now(), limiter.default_timeout());
  }
  return detail::initiate<Clock>(limiter.semaphore().native_state(), n, deadline,
                                 detail::limiter_recorder<Clock>{&limiter}, std::forward<CompletionToken>(token));
}

template <steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_concurrency_limiter<Clock>& limiter, CompletionToken&& token) {
  return async_acquire(limiter, 1, std::forward<CompletionToken>(token));
}

}  // namespace admit::asio
