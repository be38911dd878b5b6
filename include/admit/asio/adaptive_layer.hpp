// admit/asio/adaptive_layer.hpp — the middleware layer of an adaptive concurrency limit: a slot of an
// admit::basic_adaptive_limiter per request, and each handler's latency and outcome fed back to its algorithm. Built
// through middleware::adaptive_limit():
//
//   admit::adaptive_limiter<admit::gradient2_limit> found{admit::gradient2_limit{{.initial_limit = 20}}};
//   auto mw = admit::asio::middleware<request, response>{}.deadline(250ms).adaptive_limit(found);
//
// Admission. As a concurrency limit: a free slot is taken at once (the limiter's try_acquire, no allocation); else,
// unless a load_shed layer is outside (503 shed) or a deadline layer's time has passed (503 deadline), the request
// waits in the limiter's FIFO queue (admit::asio::async_acquire; raced against the deadline when there is one):
// 503 queue_full past its max_waiters, closed once it is closed, cancelled with the request.
//
// Feedback. The latency is the handler's alone, from its start to its end on the limiter's clock (not the time spent
// waiting in this or other layers), and the outcome is:
// - the handler returned a response: classify(response) (called concurrently, must not throw) — by default
// status_verdict, which reads a Beast-style
//   `result_int()`: 503 and 504 are dropped (an overload signal: the algorithm backs off), other 5xx ignored (an error
//   says nothing about capacity, and its latency is not a service time), everything else (1xx-4xx) a success;
// - a handler_timeout layer stopped the handler: dropped;
// - the handler threw: ignored (its slot is freed, the algorithm learns nothing);
// - an inner layer refused the request (the handler never ran): ignored.
// The slot is released when the handler ends — it does not travel with the outcome as concurrency_limit's permits do.
//
// Thread safety: the layer is immutable; the limiter is safe to use concurrently and must outlive the calls.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>

#include "admit/adaptive_limit.hpp"
#include "admit/asio/adaptive_async_acquire.hpp"
#include "admit/asio/middleware_layers.hpp"
#include "admit/asio/rejection.hpp"
#include "admit/errc.hpp"
#include "admit/permit.hpp"

namespace admit::asio {

// What a handler's outcome tells an adaptive limit.
enum class handler_verdict : std::uint8_t {
  success,  // a sample with its latency
  dropped,  // an overload signal (the algorithm backs off)
  ignored,  // nothing learnt; the slot is freed
};

// The verdict of an HTTP status: 503 and 504 dropped, other 5xx ignored, the rest success.
constexpr handler_verdict verdict_of_status(unsigned status) noexcept {
  if (status == 503 || status == 504) return handler_verdict::dropped;
  if (status >= 500 && status <= 599) return handler_verdict::ignored;
  return handler_verdict::success;
}

// The default classifier: verdict_of_status(response.result_int()) (Beast's http::response has result_int()). For a
// response type without it, pass your own classifier to middleware::adaptive_limit.
struct status_verdict {
  template <class Response>
  handler_verdict operator()(const Response& response) const noexcept {
    static_assert(
        requires { response.result_int(); },
        "admit::asio::middleware::adaptive_limit: the response has no result_int(); pass a classifier "
        "`handler_verdict(const Response&)` as adaptive_limit's second argument");
    return verdict_of_status(static_cast<unsigned>(response.result_int()));
  }
};

namespace detail {

// See middleware::adaptive_limit.
template <class Limiter, class Response, class Classify>
class adaptive_layer {
 public:
  static constexpr bool holds_permits = false;
  static constexpr bool observes_handler = true;
  using clock_type = typename Limiter::clock_type;
  struct state_type {
    std::optional<typename Limiter::permit> slot;
    typename clock_type::time_point started{};
  };

  adaptive_layer(Limiter& limiter, Classify classify) : limiter_(&limiter), classify_(std::move(classify)) {}

  // Each request's acquisition is one outcome in the limiter's metrics (when enabled), recorded here: the limiter's
  // try_acquire and async_acquire would count a request that first tries and then waits twice.
  template <class Request>
  step enter(request_context& ctx, const Request&) const {
    auto& state = *static_cast<state_type*>(ctx.state);
    admit::detail::semaphore_state& sem = limiter_->native_state();
    if (sem.try_acquire(1)) {  // the fast path: one compare-and-swap, no coroutine, no allocation
      state.slot.emplace(limiter_->adopt(admit::permit(sem, 1), clock_type::now()));
      limiter_->record_outcome(errc{}, std::chrono::nanoseconds::zero());
      return step::pass();
    }
    if (sem.is_closed()) return refuse(errc::closed, rejection_reason::closed);
    if (ctx.shed) return refuse(errc::would_block, rejection_reason::shed);
    if (ctx.deadline && ctx.deadline.passed()) return refuse(errc::timeout, rejection_reason::deadline);
    return {step_kind::wait, {}, &wait, this};
  }

  void handler_started(state_type& state) const noexcept { state.started = clock_type::now(); }

  void handler_ended(state_type& state, handler_end how, const Response* response) const noexcept {
    if (!state.slot) return;
    typename Limiter::permit& slot = *state.slot;
    const auto latency = clock_type::now() - state.started;
    handler_verdict verdict = handler_verdict::ignored;
    if (how == handler_end::timed_out) {
      verdict = handler_verdict::dropped;
    } else if (how == handler_end::returned && response != nullptr) {
      verdict = classify_(*response);
    }
    switch (verdict) {
      case handler_verdict::success:
        slot.record_success(latency);
        break;
      case handler_verdict::dropped:
        slot.record_dropped(latency);
        break;
      case handler_verdict::ignored:
        slot.record_ignored();
        break;
    }
  }

 private:
  step refuse(errc outcome, rejection_reason why) const {
    limiter_->record_outcome(outcome, std::chrono::nanoseconds::zero());
    return step::reject(why);
  }

  static boost::asio::awaitable<std::optional<rejection>> wait(const void* self_ptr, request_context& ctx) {
    const auto& self = *static_cast<const adaptive_layer*>(self_ptr);
    auto& state = *static_cast<state_type*>(ctx.state);
    using result = std::tuple<boost::system::error_code, typename Limiter::permit>;
    const auto token = boost::asio::as_tuple(boost::asio::use_awaitable);
    // Not counted by the operation (no_recorder): the outcome is recorded below, a deadline as a timeout.
    auto acquire = [&] { return initiate_adaptive(*self.limiter_, std::nullopt, no_recorder{}, token); };
    const auto start = clock_type::now();
    const auto waited = [&] { return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start); };
    result got;
    if (ctx.deadline) {
      using namespace boost::asio::experimental::awaitable_operators;
      std::variant<result, std::monostate> raced = co_await (acquire() || ctx.deadline.wait(ctx.deadline.at_ns));
      if (raced.index() == 1) {
        self.limiter_->record_outcome(errc::timeout, waited());
        co_return rejection{rejection_reason::deadline, {}};
      }
      got = std::move(std::get<0>(raced));
    } else {
      got = co_await acquire();
    }
    auto& [ec, p] = got;
    self.limiter_->record_outcome(outcome_of(ec), waited());
    if (ec) co_return rejection{reason_of(ec), {}};
    state.slot.emplace(std::move(p));
    co_return std::nullopt;
  }

  Limiter* limiter_;
  Classify classify_;
};

}  // namespace detail
}  // namespace admit::asio
