// admit/asio/middleware_layers.hpp — the layers of admit's request middleware (<admit/asio/middleware.hpp>): a
// concurrency limit, a rate limit (global or keyed), load shedding and a wait deadline. Built through the middleware's
// members (concurrency_limit(), rate_limit(), keyed_rate_limit(), load_shed(), deadline()), not by hand:
//
//   auto mw = admit::asio::middleware<request, response>{}.load_shed().concurrency_limit(sem);
//   auto out = co_await mw.call(req, handler);   // the layers' enter() run in order, then the handler
//
// The protocol between a layer and the middleware's driver (detail::request_context, detail::step): each layer's
// enter() runs synchronously, in order, and answers pass, reject (with the rejection) or wait; only a concurrency
// layer whose permits are not free answers wait, and the driver then co_awaits the wait function it named. State that
// outer layers hand to inner ones (the shed flag, the deadline) and what the request collects on the way (permits, the
// tightest rate decision) live in the request_context, one per request, on the driver's coroutine frame.
//
// Thread safety: layers hold pointers to limiters, which are safe to use concurrently; a layer is immutable once built,
// so one middleware serves requests on many threads at once. The limiters must outlive the middleware's calls.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <variant>

#include "admit/asio/async_acquire.hpp"
#include "admit/asio/middleware_outcome.hpp"
#include "admit/asio/rejection.hpp"
#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/errc.hpp"
#include "admit/semaphore.hpp"

namespace admit::asio::detail {

// A deadline set by a deadline layer for the acquisitions inside it, on that layer's clock (type-erased). The clock
// is read only when a concurrency layer inside first has to wait: the layers between are synchronous, so that is the
// moment the request reached the deadline layer (to within their few nanoseconds), and a request admitted at once
// costs no clock read.
struct deadline_ref {
  std::int64_t timeout_ns = 0;
  std::int64_t at_ns = 0;  // valid once started
  bool started = false;
  std::int64_t (*now_ns)() noexcept = nullptr;                         // the layer's Clock::now()
  boost::asio::awaitable<void> (*wait)(std::int64_t at_ns) = nullptr;  // completes at the deadline
  explicit operator bool() const noexcept { return now_ns != nullptr; }

  // Starts the deadline at the first call (now + timeout, saturated); true when it has passed.
  bool passed() noexcept {
    const std::int64_t now = now_ns();
    if (!started) {
      started = true;
      at_ns = admit::detail::sat_add(now, timeout_ns);
    }
    return now >= at_ns;
  }
};

// One request's state while it passes the layers.
struct request_context {
  bool shed = false;             // set by load_shed: concurrency layers inside it do not wait
  deadline_ref deadline;         // set by deadline: concurrency layers inside it wait at most until then
  held_permits permits;          // added to by concurrency layers
  std::optional<decision> rate;  // the admitting rate decision with the fewest remaining
  // The request's key, kept by a layer that waits (its wait function has no request) until its wait is done; one
  // layer waits at a time, so one slot serves every layer.
  std::string key;
  std::size_t priority = 0;  // likewise, the priority class of a waiting admission layer (admission_layer.hpp)
  // The per-request state of the layer being entered, for a layer that declares a state_type (see handler hooks
  // below): the driver points it at that layer's state before calling its enter(), and it stays there during the wait
  // that enter() may answer.
  void* state = nullptr;

  void note(const decision& d) noexcept {
    if (!rate || d.remaining < rate->remaining) rate = d;
  }
};

enum class step_kind : std::uint8_t { pass, reject, wait };

// Handler hooks, optional members of a layer (every other layer is unaffected and costs nothing):
// - `using state_type = T;` (default-constructible): one T per request on the driver's frame, reached in enter() and
//   its wait through ctx.state; destroyed when the request's call() completes (after the outcome is built).
// - `static constexpr bool observes_handler = true;` with `void handler_started(state_type&) const noexcept` (just
//   before the handler starts) and `void handler_ended(state_type&, handler_end, const Response*) const noexcept`
//   (after it ended; the response when it returned one). Called only when every layer admitted the request,
//   innermost layer first for handler_ended.
// - `static constexpr bool runs_handler = true;` (at most one per stack) with
//   `template <class Response, class Invoke> awaitable<std::optional<Response>> run(Invoke invoke) const`, which
//   co_awaits invoke() (the handler's awaitable) in its own way and returns nothing when the request must be refused
//   instead, and `rejection refusal() const noexcept`, the rejection the request then gets (after handler_ended with
//   handler_end::timed_out; the permits it holds are released first).
enum class handler_end : std::uint8_t {
  returned,   // the handler returned a response
  threw,      // the handler threw (the exception propagates out of call())
  timed_out,  // a runs_handler layer stopped the handler (a handler timeout)
};

template <class Layer>
struct layer_state {
  struct none {};
  using type = none;
};
template <class Layer>
requires requires { typename Layer::state_type; }
struct layer_state<Layer> {
  using type = typename Layer::state_type;
};
template <class Layer>
using layer_state_t = typename layer_state<Layer>::type;

template <class Layer>
inline constexpr bool has_layer_state = requires {
  typename Layer::state_type;
};
template <class Layer>
inline constexpr bool observes_handler = requires {
  requires Layer::observes_handler;
};
template <class Layer>
inline constexpr bool runs_handler = requires {
  requires Layer::runs_handler;
};

// What a layer's enter() answers. For wait: the driver co_awaits wait(self, ctx), which adds the permits to ctx and
// returns nothing, or returns the rejection.
struct step {
  using wait_function = boost::asio::awaitable<std::optional<rejection>> (*)(const void* self, request_context& ctx);
  step_kind kind = step_kind::pass;
  rejection why{};
  wait_function wait = nullptr;
  const void* self = nullptr;

  static step pass() noexcept { return {}; }
  static step reject(rejection r) noexcept { return {step_kind::reject, r, nullptr, nullptr}; }
  static step reject(rejection_reason r) noexcept { return reject(rejection{r, {}}); }
};

// The rejection reason for an asynchronous acquisition's error.
inline rejection_reason reason_of(const boost::system::error_code& ec) noexcept {
  const auto is = [&](errc e) { return ec == boost::system::error_code(std::error_code(e)); };
  if (is(errc::queue_full)) return rejection_reason::queue_full;
  if (is(errc::closed)) return rejection_reason::closed;
  if (is(errc::exceeds_capacity)) return rejection_reason::exceeds_capacity;
  if (is(errc::timeout)) return rejection_reason::deadline;
  return rejection_reason::cancelled;  // operation_aborted: the request's own cancellation
}

// The outcome an asynchronous acquisition's error stands for in the semaphore's metrics.
inline errc outcome_of(const boost::system::error_code& ec) noexcept {
  if (!ec) return errc{};
  switch (reason_of(ec)) {
    case rejection_reason::queue_full:
      return errc::queue_full;
    case rejection_reason::closed:
      return errc::closed;
    case rejection_reason::exceeds_capacity:
      return errc::exceeds_capacity;
    case rejection_reason::deadline:
      return errc::timeout;
    default:
      return errc::cancelled;
  }
}

// At most `n` permits of `sem` at once per request; see middleware::concurrency_limit.
template <steady_clock_like Clock>
class concurrency_layer {
 public:
  static constexpr bool holds_permits = true;

  concurrency_layer(basic_semaphore<Clock>& sem, std::int64_t n) : sem_(&sem), n_(n) {
    if (n < 1)
      throw std::invalid_argument("admit::asio::middleware: concurrency_limit n must be >= 1, got " +
                                  std::to_string(n));
  }

  // Each request's acquisition is one outcome in the semaphore's metrics (when enabled), recorded here: the
  // semaphore's own try_acquire and async_acquire would count a request that first tries and then waits twice.
  template <class Request>
  step enter(request_context& ctx, const Request&) const {
    auto& state = sem_->native_state();
    if (state.try_acquire(n_)) {  // the fast path: one compare-and-swap, no coroutine, no allocation
      ctx.permits.add(permit(state, n_));
      sem_->record_outcome(errc{}, n_, std::chrono::nanoseconds::zero());
      return step::pass();
    }
    if (sem_->is_closed()) return refuse(errc::closed, rejection_reason::closed);
    if (n_ > sem_->capacity()) return refuse(errc::exceeds_capacity, rejection_reason::exceeds_capacity);
    if (ctx.shed) return refuse(errc::would_block, rejection_reason::shed);
    if (ctx.deadline && ctx.deadline.passed()) return refuse(errc::timeout, rejection_reason::deadline);
    return {step_kind::wait, {}, &wait, this};
  }

 private:
  step refuse(errc outcome, rejection_reason why) const {
    sem_->record_outcome(outcome, n_, std::chrono::nanoseconds::zero());
    return step::reject(why);
  }

  // Queues for the permits (FIFO with every other waiter of the semaphore), bounded by the deadline if there is one.
  static boost::asio::awaitable<std::optional<rejection>> wait(const void* self_ptr, request_context& ctx) {
    const auto& self = *static_cast<const concurrency_layer*>(self_ptr);
    using result = std::tuple<boost::system::error_code, permit>;
    const auto token = boost::asio::as_tuple(boost::asio::use_awaitable);
    // Not counted by the operation (detail::no_recorder): the outcome is recorded below, a deadline as a timeout.
    auto acquire = [&] {
      return detail::initiate<Clock>(self.sem_->native_state(), self.n_, std::nullopt, detail::no_recorder{}, token);
    };
    const auto start = Clock::now();
    const auto waited = [&] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start); };
    result got;
    if (ctx.deadline) {
      using namespace boost::asio::experimental::awaitable_operators;
      // The deadline is cancellation: whichever completes first wins and the other is cancelled. A grant that comes
      // in after the timer has won is dropped with its result, and its permit goes back to the semaphore.
      std::variant<result, std::monostate> raced = co_await (acquire() || ctx.deadline.wait(ctx.deadline.at_ns));
      if (raced.index() == 1) {
        self.sem_->record_outcome(errc::timeout, self.n_, waited());
        co_return rejection{rejection_reason::deadline, {}};
      }
      got = std::move(std::get<0>(raced));
    } else {
      got = co_await acquire();
    }
    auto& [ec, p] = got;
    self.sem_->record_outcome(outcome_of(ec), self.n_, waited());  // a permit in `p` is released if the hook throws
    if (ec) co_return rejection{reason_of(ec), {}};
    ctx.permits.add(std::move(p));
    co_return std::nullopt;
  }

  basic_semaphore<Clock>* sem_;
  std::int64_t n_;
};

// Refuses with 429 what `limiter.decide(n)` refuses; see middleware::rate_limit.
template <class Limiter>
class rate_layer {
 public:
  static constexpr bool holds_permits = false;

  rate_layer(Limiter& limiter, std::int64_t n) : limiter_(&limiter), n_(n) {
    if (n < 0)
      throw std::invalid_argument("admit::asio::middleware: rate_limit n must be >= 0, got " + std::to_string(n));
  }

  template <class Request>
  step enter(request_context& ctx, const Request&) const {
    const decision d = limiter_->decide(n_);
    if (!d) return step::reject(rejection{rejection_reason::rate_limited, d});
    ctx.note(d);
    return step::pass();
  }

 private:
  Limiter* limiter_;
  std::int64_t n_;
};

// Refuses with 429 what `keyed.decide(key_of(request), n)` refuses, and with 503 (key_limit) a new key the keyed
// limiter has no room for; see middleware::keyed_rate_limit.
template <class Keyed, class KeyOf>
class keyed_rate_layer {
 public:
  static constexpr bool holds_permits = false;

  keyed_rate_layer(Keyed& keyed, KeyOf key_of, std::int64_t n) : keyed_(&keyed), key_of_(std::move(key_of)), n_(n) {
    if (n < 0)
      throw std::invalid_argument("admit::asio::middleware: keyed_rate_limit n must be >= 0, got " + std::to_string(n));
  }

  template <class Request>
  step enter(request_context& ctx, const Request& req) const {
    const decision d = keyed_->decide(key_of_(req), n_);
    if (!d) {
      return step::reject(rejection{d.limit == 0 ? rejection_reason::key_limit : rejection_reason::rate_limited, d});
    }
    ctx.note(d);
    return step::pass();
  }

 private:
  Keyed* keyed_;
  KeyOf key_of_;
  std::int64_t n_;
};

// Concurrency layers inside this one refuse at once (503, shed) instead of queueing; see middleware::load_shed.
class load_shed_layer {
 public:
  static constexpr bool holds_permits = false;

  template <class Request>
  step enter(request_context& ctx, const Request&) const noexcept {
    ctx.shed = true;
    return step::pass();
  }
};

// Concurrency layers inside this one wait at most `timeout` (on Clock) in total, from the moment the request reaches
// this layer (read when the first of them has to wait: the layers in between do not wait); see middleware::deadline.
template <steady_clock_like Clock>
class deadline_layer {
 public:
  static constexpr bool holds_permits = false;

  explicit deadline_layer(std::chrono::nanoseconds timeout) : timeout_(timeout) {
    if (timeout < std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument("admit::asio::middleware: deadline must not be negative, got " +
                                  std::to_string(timeout.count()) + "ns");
    }
  }

  template <class Request>
  step enter(request_context& ctx, const Request&) const noexcept {
    ctx.deadline = deadline_ref{timeout_.count(), 0, false, &now_ns, &wait};
    return step::pass();
  }

 private:
  static std::int64_t now_ns() noexcept { return to_ns<Clock>(Clock::now()); }

  static boost::asio::awaitable<void> wait(std::int64_t at_ns) {
    boost::asio::basic_waitable_timer<Clock> timer(co_await boost::asio::this_coro::executor, from_ns<Clock>(at_ns));
    co_await timer.async_wait(boost::asio::use_awaitable);
  }

  std::chrono::nanoseconds timeout_;
};

}  // namespace admit::asio::detail
