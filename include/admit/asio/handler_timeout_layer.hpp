// admit/asio/handler_timeout_layer.hpp — the middleware layer that bounds how long a handler runs: past the limit the
// handler is cancelled and the request is answered 504 Gateway Timeout (or 503), its permits released at once. Built
// through middleware::handler_timeout():
//
//   auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem).handler_timeout(2s);
//   auto out = co_await mw.call(req, handler);   // !out && out.rejected().status() == 504 when the handler overran
//
// How. The handler's awaitable and a timer of Clock (started when the handler starts) run in parallel (Asio's
// awaitable operator ||). If the handler completes first, its response (or exception) is the request's, as without
// this layer. If the timer completes first, the handler's coroutine gets terminal cancellation: the asynchronous
// operation it is suspended in completes with operation_aborted (an exception for use_awaitable) and the layer waits
// for the coroutine to end — so no handler is left running behind an answer, and whatever it threw on the way out is
// discarded. A handler that never suspends in a cancellable operation cannot be cancelled: its answer waits for it.
// The request is then refused with rejection_reason::handler_timeout (status 504, or 503 as configured), the layers
// that observe the handler see handler_end::timed_out (an adaptive limit records a drop), and every permit the request
// holds is released before call() completes: the outcome holds none.
//
// Where in the stack. The limit counts from the handler's start, wherever the layer is placed: waits for permits in
// the layers are bounded by deadline(), not by this layer. At most one handler_timeout per stack.
//
// Cost. Only for stacks with this layer: a timer, and the parallel group of the operator (two co_spawned coroutines
// and their frames) per request; the response is moved twice more than without it. Response must be
// default-constructible (the operator's result holds one) and the handler's awaitable must use the default executor
// type (boost::asio::awaitable<Response>).
//
// Thread safety: the layer is immutable; one middleware serves requests on many threads at once.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "admit/asio/middleware_layers.hpp"
#include "admit/asio/rejection.hpp"
#include "admit/clock.hpp"
#include "admit/detail/deadline.hpp"

namespace admit::asio::detail {

// A duration in nanoseconds, rounded up, saturated at nanoseconds::max() (durations beyond ~292 years).
template <class Rep, class Period>
std::chrono::nanoseconds saturating_ns(std::chrono::duration<Rep, Period> d) {
  if (std::chrono::duration<double, std::nano>(d).count() >= 9.2e18) return std::chrono::nanoseconds::max();
  return std::chrono::ceil<std::chrono::nanoseconds>(d);
}

// Runs the handler at most `timeout` on Clock; see middleware::handler_timeout.
template <steady_clock_like Clock>
class handler_timeout_layer {
 public:
  static constexpr bool holds_permits = false;
  static constexpr bool runs_handler = true;

  handler_timeout_layer(std::chrono::nanoseconds timeout, unsigned status) : timeout_(timeout), status_(status) {
    if (timeout <= std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument("admit::asio::middleware: handler_timeout must be positive, got " +
                                  std::to_string(timeout.count()) + "ns");
    }
    if (status != 503 && status != 504) {
      throw std::invalid_argument("admit::asio::middleware: handler_timeout status must be 503 or 504, got " +
                                  std::to_string(status));
    }
  }

  template <class Request>
  step enter(request_context&, const Request&) const noexcept {
    return step::pass();
  }

  // The handler's response, or nothing when the timer won (the handler has been cancelled and has ended).
  template <class Response, class Invoke>
  boost::asio::awaitable<std::optional<Response>> run(Invoke invoke) const {
    using namespace boost::asio::experimental::awaitable_operators;
    boost::asio::basic_waitable_timer<Clock> timer(co_await boost::asio::this_coro::executor,
                                                   admit::detail::deadline_after<Clock>(Clock::now(), timeout_));
    std::variant<Response, std::monostate> raced = co_await (invoke() || timer.async_wait(boost::asio::use_awaitable));
    if (raced.index() == 1) co_return std::nullopt;
    co_return std::optional<Response>(std::move(std::get<0>(raced)));
  }

  rejection refusal() const noexcept {
    rejection r{rejection_reason::handler_timeout, {}};
    r.timeout_status = static_cast<std::uint16_t>(status_);
    return r;
  }

  std::chrono::nanoseconds timeout() const noexcept { return timeout_; }

 private:
  std::chrono::nanoseconds timeout_;
  unsigned status_;
};

}  // namespace admit::asio::detail
