// admit/asio/adaptive_async_acquire.hpp — wait for a slot of an admit::basic_adaptive_limiter without blocking a
// thread: Asio completion tokens, per-operation cancellation, FIFO with the limiter's blocking waiters.
//
//   auto [ec, p] = co_await admit::asio::async_acquire(limiter, net::as_tuple(net::use_awaitable));
//   if (!ec) { auto r = co_await call(); r ? p.record_success() : p.record_dropped(); }
//
// Completion signature: void(boost::system::error_code, Limiter::permit) — the limiter's own permit, on which the
// caller reports the request's outcome (record_success / record_dropped / record_ignored; destroyed without one:
// ignored). Errors: operation_aborted (cancelled through the handler's cancellation slot), and as an admit::errc:
// queue_full (max_waiters already wait), closed, timeout (async_acquire_for / _until).
//
// It is <admit/asio/async_acquire.hpp>'s operation on the limiter's semaphore, with every guarantee stated there (one
// FIFO queue with the blocking waiters, the handler called exactly once through a post on its executor, cancellation
// of every type, a grant racing the cancel wins, shutdown without leaks: a grant destroyed unrun returns its slot).
// The permit's latency is measured from the moment its handler is invoked (on Clock), not from the call: time queued
// is not the service's latency. Each acquisition is recorded once in the limiter's metrics, when enabled.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "admit/adaptive_limit.hpp"
#include "admit/asio/detail/acquire_operation.hpp"
#include "admit/asio/detail/converting_handler.hpp"
#include "admit/detail/deadline.hpp"

namespace admit::asio {

namespace detail {

template <class Limiter>
struct adaptive_convert {
  Limiter* limiter;
  template <class Handler>
  void operator()(Handler&& handler, boost::system::error_code ec, admit::permit p) && {
    typename Limiter::permit out;
    if (!ec) out = limiter->adopt(std::move(p), Limiter::clock_type::now());
    std::move(handler)(ec, std::move(out));
  }
};

template <class Limiter>
struct adaptive_recorder {
  Limiter* limiter;
  void operator()(errc outcome, std::int64_t, std::chrono::nanoseconds waited) const {
    limiter->record_outcome(outcome, waited);
  }
};

template <class Limiter, class Recorder>
struct initiate_adaptive_acquire {
  Recorder recorder;
  template <class Handler>
  void operator()(Handler&& handler, Limiter* limiter, std::optional<typename Limiter::time_point> deadline) const {
    using wrapped = converting_handler<std::decay_t<Handler>, adaptive_convert<Limiter>>;
    acquire_operation<wrapped, typename Limiter::clock_type, Recorder>::start(
        wrapped(std::forward<Handler>(handler), adaptive_convert<Limiter>{limiter}), limiter->native_state(), 1,
        deadline, Recorder(recorder));
  }
};

// Recorder: adaptive_recorder (the limiter's metrics) or no_recorder (the middleware layer records its own).
template <class Limiter, class Recorder, class CompletionToken>
auto initiate_adaptive(Limiter& limiter, std::optional<typename Limiter::time_point> deadline, Recorder recorder,
                       CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, typename Limiter::permit)>(
      initiate_adaptive_acquire<Limiter, Recorder>{std::move(recorder)}, token, &limiter, deadline);
}

}  // namespace detail

// Waits, FIFO, for in-flight to fall below the limit (no deadline). Thread safety: may be called concurrently with
// every member of the limiter.
template <limit_algorithm Algorithm, steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_adaptive_limiter<Algorithm, Clock>& limiter, CompletionToken&& token) {
  return detail::initiate_adaptive(limiter, std::nullopt,
                                   detail::adaptive_recorder<basic_adaptive_limiter<Algorithm, Clock>>{&limiter},
                                   std::forward<CompletionToken>(token));
}

// As async_acquire, at most until `deadline` on Clock (errc::timeout). A deadline already passed does not wait.
template <limit_algorithm Algorithm, steady_clock_like Clock, class CompletionToken>
auto async_acquire_until(basic_adaptive_limiter<Algorithm, Clock>& limiter, typename Clock::time_point deadline,
                         CompletionToken&& token) {
  return detail::initiate_adaptive(limiter, std::optional<typename Clock::time_point>(deadline),
                                   detail::adaptive_recorder<basic_adaptive_limiter<Algorithm, Clock>>{&limiter},
                                   std::forward<CompletionToken>(token));
}

// async_acquire_until(now + timeout); a zero or negative timeout does not wait.
template <limit_algorithm Algorithm, steady_clock_like Clock, class Rep, class Period, class CompletionToken>
auto async_acquire_for(basic_adaptive_limiter<Algorithm, Clock>& limiter, std::chrono::duration<Rep, Period> timeout,
                       CompletionToken&& token) {
  return async_acquire_until(limiter, admit::detail::deadline_after<Clock>(Clock::now(), timeout),
                             std::forward<CompletionToken>(token));
}

}  // namespace admit::asio
