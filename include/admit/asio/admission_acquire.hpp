// admit/asio/admission_acquire.hpp — wait for an admit::admission (<admit/admission.hpp>) without blocking a thread:
// the semaphore's async_acquire (<admit/asio/async_acquire.hpp>) with a priority class.
//
//   auto [ec, permit] = co_await admit::asio::async_acquire(adm, /*priority=*/0, 1,
//                                                           boost::asio::as_tuple(boost::asio::use_awaitable));
//   if (!ec) co_await handle(request);   // the permit is released when `permit` goes out of scope
//
// Completion signature: void(boost::system::error_code, admit::permit). Errors: boost::asio::error::operation_aborted
// (cancelled through the handler's cancellation slot), and as an admit::errc: queue_full and exceeds_capacity (at
// once, as the blocking acquire), timeout (the deadline forms: at the deadline, or at once when the rate cannot
// provide the tokens by then).
//
// Guarantees.
// - One queue: the operation waits in its class's queue, in arrival order with the blocking waiters, and the share
//   rule serves it as it serves them. It holds nothing while it waits (reserve-then-commit).
// - The handler runs exactly once, on its associated executor (system_executor when it has none — bind one), through
//   a post: never inside the initiating call and never inside another thread's release or cancel. Outstanding work
//   is counted on the executor while waiting.
// - Time: when the operation heads its class's queue and only time can admit it (its tokens, or its class's assured
//   token, are not there yet), a timer of Clock on the handler's executor goes off at that time and serves the
//   heads (so with admit::testing::manual_clock, advancing the clock and running the executor admits it). The same
//   timer ends the deadline forms at their deadline.
// - Cancellation: the handler's cancellation slot accepts terminal, partial and total cancellation (a cancelled wait
//   has no side effect: what it held back goes to the others). If the grant came first the grant stands — the handler
//   gets the permit, and if nobody takes it, the permit's destructor returns it. Emit cancellation from the handler's
//   executor (or strand), as every Asio operation requires.
// - Shutdown: destroying the handler's execution context while the operation waits takes it out of the queue and
//   destroys the handler without calling it; a grant already posted is destroyed with the context's queue and its
//   permits go back. The admission must outlive its waiting operations.
// - Metrics and hooks: the outcome is recorded in the admission's metrics, and an admission reported to on_admitted,
//   on the handler's executor just before the handler runs (what they throw propagates from there; the handler is
//   then not called and the permit goes back).
// - Cost: one heap allocation (the operation, with its timer), the admission's mutex to begin, to be granted or
//   cancelled, and once per timer expiry. A timer re-arm or a post that cannot allocate calls std::terminate (they
//   run inside another thread's release, which cannot fail).
// Thread safety: may be called concurrently with every member of the admission.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "admit/admission.hpp"
#include "admit/asio/detail/admission_operation.hpp"
#include "admit/clock.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/permit.hpp"

namespace admit::asio {

namespace detail {

template <class Clock>
struct initiate_admission {
  template <class Handler>
  void operator()(Handler&& handler, basic_admission<Clock>* adm, std::size_t priority, std::int64_t n,
                  std::optional<typename Clock::time_point> deadline) const {
    admission_operation<std::decay_t<Handler>, Clock>::start(std::forward<Handler>(handler), *adm, priority, n,
                                                             deadline);
  }
};

template <class Clock, class CompletionToken>
auto initiate_admission_acquire(basic_admission<Clock>& adm, std::size_t priority, std::int64_t n,
                                std::optional<typename Clock::time_point> deadline, CompletionToken&& token) {
  adm.check_request(priority, n);
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, admit::permit)>(
      initiate_admission<Clock>{}, token, &adm, priority, n, deadline);
}

}  // namespace detail

// Waits until `adm` admits n (>= 1) of class `priority`: FIFO within its class, the share rule between classes. Throws
// std::invalid_argument (n < 1, a priority out of range) before starting. See the top of the file.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_admission<Clock>& adm, std::size_t priority, std::int64_t n, CompletionToken&& token) {
  return detail::initiate_admission_acquire(adm, priority, n, std::nullopt, std::forward<CompletionToken>(token));
}

// As async_acquire, at most until `deadline` on Clock: then it completes with admit::errc::timeout (a grant that came
// first stands). Fails at once with timeout when the rate cannot provide its tokens and those of the requests ahead
// of it in its class by then; a deadline already passed only admits at once.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire_until(basic_admission<Clock>& adm, typename Clock::time_point deadline, std::size_t priority,
                         std::int64_t n, CompletionToken&& token) {
  return detail::initiate_admission_acquire(adm, priority, n, deadline, std::forward<CompletionToken>(token));
}

// async_acquire_until(now + timeout); a zero or negative timeout does not wait.
template <steady_clock_like Clock, class Rep, class Period, class CompletionToken>
auto async_acquire_for(basic_admission<Clock>& adm, std::chrono::duration<Rep, Period> timeout, std::size_t priority,
                       std::int64_t n, CompletionToken&& token) {
  return async_acquire_until(adm, admit::detail::deadline_after<Clock>(Clock::now(), timeout), priority, n,
                             std::forward<CompletionToken>(token));
}

}  // namespace admit::asio
