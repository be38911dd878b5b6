// admit/asio/async_wait.hpp — wait asynchronously until a rate limiter admits n, on a timer of the caller's executor.
//
//   co_await admit::asio::async_wait(bucket, 1, boost::asio::use_awaitable);   // then call the API
//   co_await admit::asio::async_wait(per_client, client_ip, 1, boost::asio::use_awaitable);   // admit::keyed
//
// Completion signature: void(boost::system::error_code). Errors: boost::asio::error::operation_aborted (cancelled
// through the handler's cancellation slot), admit::errc::exceeds_capacity (n cannot be admitted at the limit's present
// capacity: above the burst, or a zero rate that cannot cover it) and admit::errc::queue_full (the limiter's
// max_waiters() were already waiting: rejected at once, nothing taken). The handler runs on its associated executor,
// never inside the initiating call.
//
// Waiter bound and metrics. A request the limiter admits at once completes without waiting, holding no place. One
// that has to wait holds one of the limiter's max_waiters() places (set_max_waiters; counted in waiting(), shared with
// the limiter's blocking waits) from its start to its completion, while its timer waits. Each operation counts one
// outcome in the limiter's metrics when enabled (enable_metrics): admitted (with the time from the initiation to the
// admission), cancelled, queue_full or exceeds_capacity; the attempts it makes while waiting count nothing more.
//
// How each limiter waits (the timer runs on the handler's associated executor, on the limiter's Clock):
// - token_bucket: reserves n tokens (x/time/rate ReserveN) and waits for the reservation's delay; cancellation gives
//   the tokens back (reservation::cancel, CancelAt semantics), and so does a wait destroyed unrun because its
//   execution context shut down. Terminal, partial and total cancellation.
// - pacer, warmup: claim their slot (reserve) and wait for it; a claimed slot cannot be given back, so only terminal
//   cancellation is accepted (the pace keeps a one-slot gap, as the blocking take() does when cancelled late).
// - gcra, fixed_window, sliding_window, sliding_log, and admit::keyed on a key: try to admit; when refused, wait
//   until it would fit (time_until_available(n); keyed: the decision's retry_after) and try again. Nothing is held
//   while waiting, so cancellation of any type has no side effect; under contention another caller may take the
//   capacity first (no FIFO among async waiters of a rate limiter), and the wait repeats. A keyed limiter's new key
//   refused for the cap (is_key_limit_refusal) waits until a key of its shard can become idle, and tries again.
// Thread safety: as the limiter's own members. The limiter must outlive the operation.
#pragma once

#include <algorithm>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "admit/decision.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/waiter_gate.hpp"
#include "admit/errc.hpp"
#include "admit/keyed.hpp"
#include "admit/limiter_metrics.hpp"

namespace admit::asio {

namespace detail {

// token_bucket, pacer, warmup: reserve(n) returns an admit::basic_reservation (ok(), delay()).
template <class L>
concept reserving_limiter = requires(L& l, std::int64_t n) {
  { l.reserve(n).ok() } -> std::convertible_to<bool>;
  { l.reserve(n).ready_at() } -> std::same_as<typename L::time_point>;
  { l.reserve(n).delay() } -> std::same_as<typename L::duration>;
};
// token_bucket: its reservation can also be cancelled.
template <class L>
concept cancellable_reservation_limiter = reserving_limiter<L> && requires(L& l, std::int64_t n) {
  l.reserve(n).cancel();
};

// A token bucket's reservation while its operation waits: given back (cancelled) when the operation is destroyed
// unrun — its execution context shut down or destroyed — as a cancellation gives it back; kept once its time came.
template <class R>
class held_reservation {
 public:
  held_reservation() = default;
  held_reservation(held_reservation&& other) noexcept
      : r_(std::move(other.r_)), held_(std::exchange(other.held_, false)) {}
  held_reservation& operator=(held_reservation&&) = delete;
  ~held_reservation() { cancel(); }
  void hold(R r) {
    r_ = std::move(r);
    held_ = true;
  }
  void cancel() {
    if (std::exchange(held_, false)) r_.cancel();
  }
  void keep() noexcept { held_ = false; }

 private:
  R r_{};  // default-constructed: holds nothing
  bool held_ = false;
};

template <class L, bool = cancellable_reservation_limiter<L>>
struct reservation_holder {
  using type = std::monostate;
};
template <class L>
struct reservation_holder<L, true> {
  using type = held_reservation<decltype(std::declval<L&>().reserve(std::int64_t{}))>;
};

// What an operation waits on: a limiter, or a keyed limiter and one key.
template <class Limiter>
struct wait_target {
  Limiter* limiter;
  // 0: admitted now; nanoseconds::max(): never; else try again after that long (>= 1 ns).
  std::chrono::nanoseconds attempt(std::int64_t n) {
    if (admit::detail::limiter_access::try_acquire_quiet(*limiter, n)) return std::chrono::nanoseconds::zero();
    return after(limiter->time_until_available(n));
  }
  static std::chrono::nanoseconds after(std::chrono::nanoseconds wait) {
    if (wait == std::chrono::nanoseconds::max()) return wait;
    // A refusal with no wait (another caller took the capacity in between) still yields to the executor.
    return std::max(wait, std::chrono::nanoseconds(1));
  }
};
template <class Keyed>
struct keyed_wait_target {
  Keyed* limiter;
  typename Keyed::key_type key;
  std::chrono::nanoseconds attempt(std::int64_t n) {
    const decision d = admit::detail::limiter_access::decide_quiet_at(*limiter, key, Keyed::clock_type::now(), n);
    if (d.admitted) return std::chrono::nanoseconds::zero();
    return wait_target<Keyed>::after(d.retry_after);
  }
};

template <class Limiter, class Target = wait_target<Limiter>>
class wait_operation {
 public:
  using clock_type = typename Limiter::clock_type;
  using timer_type =
      boost::asio::basic_waitable_timer<clock_type, boost::asio::wait_traits<clock_type>, boost::asio::any_io_executor>;

  wait_operation(Target target, std::int64_t n) : target_(std::move(target)), n_(n) {}

  template <class Self>
  void operator()(Self& self, boost::system::error_code ec = {}) {
    switch (step_) {
      case step::start:
        if constexpr (cancellable_reservation_limiter<Limiter> || !reserving_limiter<Limiter>) {
          self.reset_cancellation_state(boost::asio::enable_total_cancellation());
        }
        start(self);
        return;
      case step::posted:
        self.complete(result_);
        return;
      case step::waiting:
        // A reservation that cannot be given back (pacer, warmup) is consumed once its timer has fired: a
        // cancellation requested after that completes with success, not operation_aborted.
        if (ec == boost::asio::error::operation_aborted ||
            (!ec && self.cancelled() != boost::asio::cancellation_type::none &&
             (cancellable_reservation_limiter<Limiter> || !reserving_limiter<Limiter>))) {
          if constexpr (cancellable_reservation_limiter<Limiter>) reservation_.cancel();
          finish(self, errc::cancelled, boost::asio::error::operation_aborted);
          return;
        }
        if constexpr (reserving_limiter<Limiter>) {
          if constexpr (cancellable_reservation_limiter<Limiter>) reservation_.keep();
          finish(self, errc{});  // the reservation's time has come
        } else {
          retry(self);
        }
        return;
    }
  }

 private:
  enum class step { start, posted, waiting };

  Limiter& limiter() noexcept { return *target_.limiter; }

  template <class Self>
  void start(Self& self) {
    start_ = clock_type::now();
    if constexpr (reserving_limiter<Limiter>) {
      // At once: no place taken. Never (a token bucket's n above the burst): no place either.
      if (admit::detail::limiter_access::try_acquire_quiet(limiter(), n_)) return finish(self, errc{});
      if constexpr (cancellable_reservation_limiter<Limiter>) {
        if (limiter().time_until_available(n_) == std::chrono::nanoseconds::max()) {
          return finish(self, errc::exceeds_capacity);
        }
      }
      if (!(place_ = limiter().native_waiters().enter())) return finish(self, errc::queue_full);
      auto r = limiter().reserve(n_);
      if (!r.ok()) return finish(self, errc::exceeds_capacity);
      const auto ready = r.ready_at();
      const bool due = r.delay() == decltype(r.delay())::zero();
      if (due) return finish(self, errc{});
      if constexpr (cancellable_reservation_limiter<Limiter>) reservation_.hold(std::move(r));
      wait_until(self, ready);
    } else {
      const std::chrono::nanoseconds wait = target_.attempt(n_);
      if (wait == std::chrono::nanoseconds::zero()) return finish(self, errc{});
      if (wait == std::chrono::nanoseconds::max()) return finish(self, errc::exceeds_capacity);
      if (!(place_ = limiter().native_waiters().enter())) return finish(self, errc::queue_full);
      wait_for(self, wait);
    }
  }

  template <class Self>
  void retry(Self& self) {
    const std::chrono::nanoseconds wait = target_.attempt(n_);
    if (wait == std::chrono::nanoseconds::zero()) return finish(self, errc{});
    if (wait == std::chrono::nanoseconds::max()) return finish(self, errc::exceeds_capacity);
    wait_for(self, wait);
  }

  template <class Self, class Duration>
  void wait_for(Self& self, Duration d) {
    wait_until(self, admit::detail::deadline_after<clock_type>(clock_type::now(), d));
  }

  template <class Self>
  void wait_until(Self& self, typename clock_type::time_point tp) {
    if (!timer_) timer_ = std::make_unique<timer_type>(boost::asio::get_associated_executor(self));
    timer_->expires_at(tp);
    step_ = step::waiting;
    timer_->async_wait(std::move(self));
  }

  // Gives the place back, counts the outcome, and completes through the executor (never inside the initiating call).
  template <class Self>
  void finish(Self& self, errc outcome, boost::system::error_code ec) {
    place_.release();
    if (limiter_metrics* m = limiter().native_metrics()) {
      const bool waited = step_ == step::waiting;
      m->record(outcome, n_,
                waited ? std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start_)
                       : std::chrono::nanoseconds::zero());
    }
    result_ = ec;
    step_ = step::posted;
    boost::asio::post(std::move(self));
  }
  template <class Self>
  void finish(Self& self, errc e) {
    finish(self, e, e == errc{} ? boost::system::error_code() : boost::system::error_code(std::error_code(e)));
  }

  Target target_;
  std::int64_t n_;
  step step_ = step::start;
  boost::system::error_code result_;
  typename clock_type::time_point start_{};
  admit::detail::waiter_gate::slot place_;  // held while waiting (the limiter's max_waiters)
  std::unique_ptr<timer_type> timer_;  // not moved while a wait is pending: the operation object moves, the timer not
  typename reservation_holder<Limiter>::type reservation_;
};

}  // namespace detail

// Waits until `limiter` admits n (n == 0 waits as the limiter answers 0: at once, but for a token bucket in debt, which
// waits until the debt is paid, as x/time/rate WaitN). See the top of the file. Throws std::invalid_argument for n < 0,
// in the initiating call (no operation is started, the handler is not called).
template <class Limiter, class CompletionToken>
auto async_wait(Limiter& limiter, std::int64_t n, CompletionToken&& token) {
  admit::detail::check_n("admit::asio::async_wait", n);
  return boost::asio::async_compose<CompletionToken, void(boost::system::error_code)>(
      detail::wait_operation<Limiter>(detail::wait_target<Limiter>{&limiter}, n), token);
}

// Waits until `key`'s limiter of `limiter` (an admit::keyed) admits n; the key is copied into the operation. As above;
// the waiter bound and the metrics are the keyed limiter's (one for all its keys).
template <class Limiter, class Key, class Hash, class Eq, class K, class CompletionToken>
auto async_wait(keyed<Limiter, Key, Hash, Eq>& limiter, const K& key, std::int64_t n, CompletionToken&& token) {
  using keyed_type = keyed<Limiter, Key, Hash, Eq>;
  admit::detail::check_n("admit::asio::async_wait", n);
  return boost::asio::async_compose<CompletionToken, void(boost::system::error_code)>(
      detail::wait_operation<keyed_type, detail::keyed_wait_target<keyed_type>>(
          detail::keyed_wait_target<keyed_type>{&limiter, Key(key)}, n),
      token);
}

}  // namespace admit::asio
