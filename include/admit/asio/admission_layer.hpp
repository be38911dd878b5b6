// admit/asio/admission_layer.hpp — admit::admission (<admit/admission.hpp>) as a layer of the request middleware
// (<admit/asio/middleware.hpp>): each request takes n of the admission's tokens and permits in the priority class its
// request names, and holds the permits until its outcome is released. Built through middleware::admission():
//
//   auto mw = admit::asio::middleware<request, response>{}.deadline(100ms).admission(
//       adm, [](const request& r) -> std::size_t { return r.path.starts_with("/batch/") ? 1 : 0; });
//
// What it does (the protocol of <admit/asio/middleware_layers.hpp>): enter() tries the admission at once, in the
// request's class (priority_of(request), an index into the admission's classes); admitted: the permit joins the
// request's permits. Otherwise it waits with admit::asio::async_acquire in its class's queue (FIFO within the class,
// the share rule between classes), unless a load_shed layer outside it forbids waiting (503 shed). A deadline layer
// outside it bounds the wait (503 deadline): its remaining time becomes the deadline of the admission's wait, so a
// request whose tokens the rate cannot provide by then is refused at once, and the admission counts it as a timeout.
// Refusals: queue_full (max_waiters already wait), exceeds_capacity (n above max_in_flight or the burst), deadline,
// cancelled (the request's own cancellation) — all 503, as the concurrency limit's.
//
// Metrics: one outcome per request in the admission's metrics (if enabled): admitted (with its wait), unavailable
// (shed), timeout (deadline), queue_full, exceeds_capacity, cancelled.
//
// Cost: a request admitted at once takes the admission's mutex to decide (no allocation, no coroutine; its release
// takes the mutex only while requests wait); one that waits adds the wait's coroutine frame and its operation (one
// allocation).
//
// Errors: a priority_of that returns an index out of range makes the layer throw std::invalid_argument (naming it),
// which propagates out of middleware::call(); priority_of is called concurrently and must be safe for that.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "admit/admission.hpp"
#include "admit/asio/admission_acquire.hpp"
#include "admit/asio/middleware_layers.hpp"
#include "admit/asio/rejection.hpp"
#include "admit/clock.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/errc.hpp"
#include "admit/permit.hpp"

namespace admit::asio::detail {

// n permits and tokens of `adm` per request, in the class priority_of(request); see middleware::admission.
template <steady_clock_like Clock, class PriorityOf>
class admission_layer {
 public:
  static constexpr bool holds_permits = true;

  admission_layer(basic_admission<Clock>& adm, PriorityOf priority_of, std::int64_t n)
      : adm_(&adm), priority_of_(std::move(priority_of)), n_(n) {
    if (n < 1 || n > admit::detail::semaphore_state::max_permits) {  // as the admission checks each request
      throw std::invalid_argument("admit::asio::middleware: admission n must be in [1, " +
                                  std::to_string(admit::detail::semaphore_state::max_permits) + "], got " +
                                  std::to_string(n));
    }
  }

  template <class Request>
  step enter(request_context& ctx, const Request& req) const {
    using waiter = typename basic_admission<Clock>::waiter;
    const std::size_t priority = priority_of_(req);
    adm_->check_request(priority, n_);
    waiter w;
    w.cls = priority;
    w.n = n_;
    const errc now = adm_->begin_wait(w, std::nullopt, false).error;  // never queues; records nothing
    if (now == errc{}) {
      ctx.permits.add(std::move(*adm_->complete(w, now, std::chrono::nanoseconds{0})));
      return step::pass();
    }
    if (now == errc::exceeds_capacity) return refuse(w, now, rejection_reason::exceeds_capacity);
    if (ctx.shed) return refuse(w, errc::would_block, rejection_reason::shed);
    if (ctx.deadline && ctx.deadline.passed()) return refuse(w, errc::timeout, rejection_reason::deadline);
    ctx.priority = priority;
    return {step_kind::wait, {}, &wait, this};
  }

 private:
  step refuse(const typename basic_admission<Clock>::waiter& w, errc outcome, rejection_reason why) const {
    (void)adm_->complete(w, outcome, std::chrono::nanoseconds{0});  // counts the refusal
    return step::reject(why);
  }

  // Waits in the class's queue, until the deadline layer's deadline if there is one (on the admission's clock: the
  // time it has left, from now).
  static boost::asio::awaitable<std::optional<rejection>> wait(const void* self_ptr, request_context& ctx) {
    const auto& self = *static_cast<const admission_layer*>(self_ptr);
    const auto token = boost::asio::as_tuple(boost::asio::use_awaitable);
    std::tuple<boost::system::error_code, permit> got;
    if (ctx.deadline) {
      const std::int64_t left = admit::detail::sat_sub(ctx.deadline.at_ns, ctx.deadline.now_ns());
      const auto deadline = admit::detail::deadline_after<Clock>(Clock::now(), std::chrono::nanoseconds{left});
      got = co_await async_acquire_until(*self.adm_, deadline, ctx.priority, self.n_, token);
    } else {
      got = co_await async_acquire(*self.adm_, ctx.priority, self.n_, token);
    }
    auto& [ec, p] = got;
    if (ec) co_return rejection{reason_of(ec), {}};
    ctx.permits.add(std::move(p));
    co_return std::nullopt;
  }

  basic_admission<Clock>* adm_;
  PriorityOf priority_of_;
  std::int64_t n_;
};

}  // namespace admit::asio::detail
