// admit/asio/middleware.hpp — admission control for coroutine request handlers, layered in the spirit of tower's
// ServiceBuilder: rate limits (global or per client key), load shedding, a wait deadline and concurrency limits, in
// the order you stack them, around a handler `Request& -> awaitable<Response>`. Framework-agnostic: Request and
// Response are yours (Beast's, or any type); a refused request comes back as a value that says what to answer.
//
//   auto mw = admit::asio::middleware<request, response>{}.keyed_rate_limit(per_ip, client_ip).load_shed()
//                 .concurrency_limit(sem);
//   auto out = co_await mw.call(req, handler);   // out.response(), or out.rejected().status() (429/503) + .fields()
//
// Order. Layers run outermost first, in the order the builder members were called (as ServiceBuilder's layers); the
// handler runs after the last. The order decides which budget a refused request spends: a rate limit outside a
// concurrency limit spends a token on a request that is then shed; inside it, a request that waited for a permit may
// then be refused by the rate limit. load_shed() and deadline() apply to the concurrency limits stacked inside them
// (after them); put them before concurrency_limit().
//
// What each layer does (details in <admit/asio/middleware_layers.hpp>):
// - rate_limit(limiter, n): limiter.decide(n) (any admit rate limiter: gcra, token_bucket, ...); refused: 429 with
//   Retry-After and RateLimit-* fields (<admit/asio/rejection.hpp>). Never waits.
// - keyed_rate_limit(keyed, key_of, n): keyed.decide(key_of(request), n) (admit::keyed<...>); refused: 429 as above,
//   or 503 key_limit when the keyed limiter is at its key cap and cannot store a new key.
// - load_shed(): concurrency limits inside refuse at once (503 shed) when no permit is free, instead of queueing.
// - deadline<Clock>(d): concurrency limits inside wait at most d in total, counted from this layer (503 deadline).
//   The deadline is cancellation of the acquisition (a timer raced against it), not a second code path; a grant that
//   races with the deadline and loses is returned to the semaphore.
// - concurrency_limit(sem, n): n permits of the semaphore per request (concurrency_limiter: pass .semaphore()),
//   taken at once when free (one compare-and-swap, no allocation), else waited for in the semaphore's FIFO queue with
//   async_acquire; 503 queue_full when max_waiters already wait, closed when the semaphore is closed. The permits are
//   held until the response is done: they travel in the outcome (<admit/asio/middleware_outcome.hpp>), so a server
//   releases them after writing the response (outcome::release() or its destruction).
// - adaptive_limit(limiter[, classify]): a slot of an admit::basic_adaptive_limiter per request, taken as
//   concurrency_limit takes permits, released when the handler ends, reporting the handler's latency and outcome
//   (<admit/asio/adaptive_layer.hpp>).
// - handler_timeout<Clock>(d[, status]): the handler runs at most d, then is cancelled; the request gets 504 (or 503)
//   handler_timeout, its permits released at once (<admit/asio/handler_timeout_layer.hpp>).
//
// Cancellation. A request whose coroutine is cancelled (terminal, partial or total cancellation of the awaiting
// operation, e.g. its connection closed) while it waits for a permit leaves the queue and completes with rejection
// reason `cancelled`; its place goes to the next waiter and nothing leaks.
//
// Exceptions. What the handler throws propagates out of call() after every permit taken for the request has been
// released. A layer throws only what its limiter throws (keyed: std::bad_alloc on a new key), with the same effect.
//
// Cost. A request admitted at once by every layer costs one coroutine frame for the driver (Asio's per-thread
// recycling allocator; no timer, no race and no other frame unless a concurrency layer has to wait), one decision per
// rate layer, one compare-and-swap per concurrency layer, and the same again to release. The handler's response is
// moved once into the outcome, which is built in the driver's promise (and once out of it, as every awaitable's
// result is). bench/middleware_bench.cpp measures it; docs/perf/http.md has the cost under a real HTTP load.
//
// Thread safety. A built middleware is immutable: call() may run concurrently on any number of threads. The limiters
// it points to must outlive every call, and the middleware must outlive the calls it started.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "admit/asio/adaptive_layer.hpp"
#include "admit/asio/admission_layer.hpp"
#include "admit/asio/handler_timeout_layer.hpp"
#include "admit/asio/middleware_layers.hpp"
#include "admit/asio/middleware_outcome.hpp"
#include "admit/asio/rejection.hpp"
#include "admit/clock.hpp"
#include "admit/semaphore.hpp"

namespace admit::asio {

template <class Middleware, class Handler>
class service;

// A stack of layers for requests of type Request and responses of type Response. Start from the empty stack,
// `middleware<Request, Response>{}`, and add layers; each member returns a new middleware (the object it is called on
// is unchanged), so partial stacks can be shared and extended.
template <class Request, class Response, class... Layers>
class middleware {
 public:
  using request_type = Request;
  using response_type = Response;
  using outcome_type = outcome<Response>;

  static constexpr std::size_t concurrency_layers = (std::size_t{0} + ... + (Layers::holds_permits ? 1 : 0));
  static_assert(concurrency_layers <= held_permits::max_size,
                "admit::asio::middleware: at most held_permits::max_size concurrency limits in one stack");
  static constexpr std::size_t handler_runners = (std::size_t{0} + ... + (detail::runs_handler<Layers> ? 1 : 0));
  static_assert(handler_runners <= 1, "admit::asio::middleware: at most one handler_timeout in one stack");

  middleware() = default;
  explicit middleware(std::tuple<Layers...> layers) : layers_(std::move(layers)) {}

  // At most sem.capacity() / n requests at once past this point: n >= 1 permits per request, held until the outcome
  // is released. Throws std::invalid_argument for n < 1.
  template <steady_clock_like Clock>
  auto concurrency_limit(basic_semaphore<Clock>& sem, std::int64_t n = 1) const {
    return add(detail::concurrency_layer<Clock>(sem, n));
  }

  // Admission control (<admit/asio/admission_layer.hpp>): n >= 1 of `adm`'s tokens and permits per request, in the
  // priority class `priority_of(const Request&)` returns (std::size_t), permits held until the outcome is released.
  // load_shed() and deadline() before it apply to it as to concurrency_limit(). Throws std::invalid_argument for n < 1.
  template <steady_clock_like Clock, class PriorityOf>
  auto admission(basic_admission<Clock>& adm, PriorityOf priority_of, std::int64_t n = 1) const {
    return add(detail::admission_layer<Clock, PriorityOf>(adm, std::move(priority_of), n));
  }

  // Every request spends n >= 0 of `limiter` (anything with `decision decide(std::int64_t)`, read on its own clock).
  // Throws std::invalid_argument for n < 0.
  template <class Limiter>
  auto rate_limit(Limiter& limiter, std::int64_t n = 1) const {
    return add(detail::rate_layer<Limiter>(limiter, n));
  }

  // Every request spends n >= 0 of the limiter of its key: `keyed.decide(key_of(request), n)`. key_of takes a
  // const Request& and returns the key (for admit::keyed<...> with std::string keys, a std::string_view is fine); it
  // is called concurrently and must be safe for that. Throws std::invalid_argument for n < 0.
  template <class Keyed, class KeyOf>
  auto keyed_rate_limit(Keyed& keyed, KeyOf key_of, std::int64_t n = 1) const {
    return add(detail::keyed_rate_layer<Keyed, KeyOf>(keyed, std::move(key_of), n));
  }

  // Concurrency limits after this one refuse (503, shed) instead of queueing when no permit is free.
  auto load_shed() const { return add(detail::load_shed_layer{}); }

  // Concurrency limits after this one wait at most `timeout` in total from the moment the request gets here, measured
  // on Clock (whose timers must work with the caller's executor: basic_waitable_timer<Clock>). A zero timeout means
  // "only if free now" with reason deadline. Throws std::invalid_argument for a negative timeout.
  template <steady_clock_like Clock = std::chrono::steady_clock, class Rep, class Period>
  auto deadline(std::chrono::duration<Rep, Period> timeout) const {
    const auto ns = std::chrono::duration<double, std::nano>(timeout).count() >= 9.2e18
                        ? std::chrono::nanoseconds::max()
                        : std::chrono::ceil<std::chrono::nanoseconds>(timeout);
    return add(detail::deadline_layer<Clock>(ns));
  }

  // A concurrency limit found by `limiter` (an admit::basic_adaptive_limiter): one slot per request, taken as
  // concurrency_limit takes its permits (at once when free, else waited for in the limiter's FIFO queue, honouring
  // load_shed and deadline), and released when the handler ends, reporting the handler's latency on the limiter's
  // clock and its outcome: classify(response) says success, dropped or ignored (the default reads a Beast-style
  // result_int(): 503 and 504 are dropped, other 5xx ignored, the rest success); a handler timeout is dropped, a
  // handler that throws ignored. classify is called concurrently and must not throw. See
  // <admit/asio/adaptive_layer.hpp>.
  template <class Limiter, class Classify = status_verdict>
  auto adaptive_limit(Limiter& limiter, Classify classify = {}) const {
    return add(detail::adaptive_layer<Limiter, Response, Classify>(limiter, std::move(classify)));
  }

  // The handler runs at most `timeout` (> 0) on Clock: then it is cancelled (terminal cancellation of its coroutine,
  // which the layer waits for) and the request is refused with reason handler_timeout, status 504 (or 503), its
  // permits released. Throws std::invalid_argument for a timeout <= 0 or a status other than 503 or 504. See
  // <admit/asio/handler_timeout_layer.hpp>.
  template <steady_clock_like Clock = std::chrono::steady_clock, class Rep, class Period>
  auto handler_timeout(std::chrono::duration<Rep, Period> timeout, unsigned status = 504) const {
    return add(detail::handler_timeout_layer<Clock>(detail::saturating_ns(timeout), status));
  }

  // Adds a layer defined outside this header (the extension point for other targets: admit::redis's distributed
  // rate limit, <admit/redis/middleware.hpp>). `layer` follows the protocol of middleware_layers.hpp: a const
  // enter(request_context&, const Request&) returning a step, and a static constexpr bool holds_permits; optionally
  // the handler hooks described there (state_type, observes_handler, runs_handler).
  template <class Layer>
  auto with(Layer layer) const {
    return add(std::move(layer));
  }

  // Runs `req` through the layers, then `handler(req)` (which returns awaitable<Response>) if every layer admits it.
  // The handler and the request must live until the returned awaitable completes (co_await it in the same
  // full-expression). Completes with the outcome: admitted (the response and the permits) or refused (the rejection).
  // See the top of the file for cancellation and exceptions.
  template <class Handler>
  boost::asio::awaitable<outcome_type> call(Request& req, Handler&& handler) const {
    detail::request_context ctx;
    layer_states states;  // the layers' per-request states (empty for layers without one)
    std::size_t at = 0;   // the layer that did not pass
    // The layers run synchronously, one after the other, until one does not pass; only a layer that has to wait
    // (a concurrency limit without a free permit) suspends this coroutine, and the layers after it run once it is done.
    for (detail::step s = enter_from<0>(0, ctx, req, at, states); s.kind != detail::step_kind::pass;
         s = enter_from<0>(at + 1, ctx, req, at, states)) {
      if (s.kind == detail::step_kind::reject) co_return outcome_type(s.why);
      if (std::optional<rejection> r = co_await s.wait(s.self, ctx)) co_return outcome_type(*r);
    }
    if constexpr (!hooked) {
      Response response = co_await std::invoke(handler, req);
      // The outcome is built in this coroutine's promise: the response is moved once, straight into it.
      co_return detail::admitted<Response>{response, ctx.permits, ctx.rate};
    } else {
      started<0>(states);
      std::optional<Response> response;
      try {
        if constexpr (handler_runners > 0) {
          response = co_await std::get<runner_index<0>()>(layers_).template run<Response>(
              [&handler, &req] { return std::invoke(handler, req); });
        } else {
          response.emplace(co_await std::invoke(handler, req));
        }
      } catch (...) {
        ended<sizeof...(Layers)>(states, detail::handler_end::threw, nullptr);
        throw;
      }
      ended<sizeof...(Layers)>(states, response ? detail::handler_end::returned : detail::handler_end::timed_out,
                               response ? &*response : nullptr);
      if constexpr (handler_runners > 0) {
        if (!response) {
          ctx.permits.release();  // the answer is produced now: nothing stays held for it
          co_return outcome_type(std::get<runner_index<0>()>(layers_).refusal());
        }
      }
      co_return detail::admitted<Response>{*response, ctx.permits, ctx.rate};
    }
  }

  // A service: this stack bound to a handler, called as `co_await svc(req)`. It holds copies of both.
  template <class Handler>
  service<middleware, std::decay_t<Handler>> bind(Handler&& handler) const {
    return service<middleware, std::decay_t<Handler>>(*this, std::forward<Handler>(handler));
  }

  static constexpr std::size_t size() noexcept { return sizeof...(Layers); }

 private:
  using layer_states = std::tuple<detail::layer_state_t<Layers>...>;
  static constexpr bool hooked = handler_runners > 0 || (false || ... || detail::observes_handler<Layers>);

  // The index of the layer that runs the handler (handler_timeout), searched from I.
  template <std::size_t I>
  static constexpr std::size_t runner_index() noexcept {
    if constexpr (I == sizeof...(Layers)) {
      return I;
    } else if constexpr (detail::runs_handler<std::tuple_element_t<I, std::tuple<Layers...>>>) {
      return I;
    } else {
      return runner_index<I + 1>();
    }
  }

  // The handler hooks: started outermost first, ended innermost first (I counts down from the stack's size).
  template <std::size_t I>
  void started([[maybe_unused]] layer_states& states) const noexcept {
    if constexpr (I < sizeof...(Layers)) {
      if constexpr (detail::observes_handler<std::tuple_element_t<I, std::tuple<Layers...>>>) {
        std::get<I>(layers_).handler_started(std::get<I>(states));
      }
      started<I + 1>(states);
    }
  }
  template <std::size_t I>
  void ended([[maybe_unused]] layer_states& states, [[maybe_unused]] detail::handler_end how,
             [[maybe_unused]] const Response* response) const noexcept {
    if constexpr (I > 0) {
      if constexpr (detail::observes_handler<std::tuple_element_t<I - 1, std::tuple<Layers...>>>) {
        std::get<I - 1>(layers_).handler_ended(std::get<I - 1>(states), how, response);
      }
      ended<I - 1>(states, how, response);
    }
  }

  template <class Layer>
  middleware<Request, Response, Layers..., Layer> add(Layer layer) const {
    return middleware<Request, Response, Layers..., Layer>(std::tuple_cat(layers_, std::make_tuple(std::move(layer))));
  }

  // Runs the layers from index `from` on, in order, until one does not pass: returns its step and sets `at` to its
  // index; returns pass when every layer passed. Unrolled at compile time (from == 0 on the fast path).
  template <std::size_t I>
  detail::step enter_from([[maybe_unused]] std::size_t from, [[maybe_unused]] detail::request_context& ctx,
                          [[maybe_unused]] const Request& req, [[maybe_unused]] std::size_t& at,
                          [[maybe_unused]] layer_states& states) const {
    if constexpr (I == sizeof...(Layers)) {
      return detail::step::pass();
    } else {
      if (I >= from) {
        if constexpr (detail::has_layer_state<std::tuple_element_t<I, std::tuple<Layers...>>>) {
          ctx.state = &std::get<I>(states);
        }
        detail::step s = std::get<I>(layers_).enter(ctx, req);
        if (s.kind != detail::step_kind::pass) {
          at = I;
          return s;
        }
      }
      return enter_from<I + 1>(from, ctx, req, at, states);
    }
  }

  std::tuple<Layers...> layers_;
};

// A middleware bound to a handler (middleware::bind). Copyable when the handler is; must outlive the calls it starts.
template <class Middleware, class Handler>
class service {
 public:
  using request_type = typename Middleware::request_type;
  using outcome_type = typename Middleware::outcome_type;

  service(Middleware mw, Handler handler) : middleware_(std::move(mw)), handler_(std::move(handler)) {}

  boost::asio::awaitable<outcome_type> operator()(request_type& req) const { return middleware_.call(req, handler_); }

 private:
  Middleware middleware_;
  Handler handler_;
};

}  // namespace admit::asio
