// admit/asio/async_wait.hpp — wait asynchronously until a rate limiter admits n, on a timer of the caller's executor.
//
//   co_await admit::asio::async_wait(bucket, 1, boost::asio::use_awaitable);   // then call the API
//
// Completion signature: void(boost::system::error_code). Errors: boost::asio::error::operation_aborted (cancelled
// through the handler's cancellation slot) and admit::errc::exceeds_capacity (n can never be admitted: above the burst,
// or a zero rate that cannot cover it). The handler runs on its associated executor, never inside the initiating call.
//
// How each limiter waits (the timer runs on the handler's associated executor, on the limiter's Clock):
// - token_bucket: reserves n tokens (x/time/rate ReserveN) and waits for the reservation's delay; cancellation gives
//   the tokens back (reservation::cancel, CancelAt semantics). Terminal, partial and total cancellation.
// - pacer, warmup: claim their slot (reserve) and wait for it; a claimed slot cannot be given back, so only terminal
//   cancellation is accepted (the pace keeps a one-slot gap, as the blocking take() does when cancelled late).
// - gcra, fixed_window, sliding_window, sliding_log: try_acquire; when refused, wait time_until_available(n) and try
//   again. Nothing is held while waiting, so cancellation of any type has no side effect; under contention another
//   caller may take the capacity first (no FIFO among async waiters of a rate limiter), and the wait repeats.
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

#include "admit/detail/check_n.hpp"

#include "admit/errc.hpp"

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

template <class L, bool = cancellable_reservation_limiter<L>>
struct reservation_holder {
  using type = std::monostate;
};
template <class L>
struct reservation_holder<L, true> {
  using type = decltype(std::declval<L&>().reserve(std::int64_t{}));  // default-constructed: holds nothing
};

template <class Limiter>
class wait_operation {
 public:
  using clock_type = typename Limiter::clock_type;
  using timer_type =
      boost::asio::basic_waitable_timer<clock_type, boost::asio::wait_traits<clock_type>, boost::asio::any_io_executor>;

  wait_operation(Limiter& limiter, std::int64_t n) : limiter_(&limiter), n_(n) {}

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
        if (ec == boost::asio::error::operation_aborted ||
            (!ec && self.cancelled() != boost::asio::cancellation_type::none)) {
          if constexpr (cancellable_reservation_limiter<Limiter>) reservation_.cancel();
          finish(self, boost::asio::error::operation_aborted);
          return;
        }
        if constexpr (reserving_limiter<Limiter>) {
          finish(self, {});  // the reservation's time has come
        } else {
          retry(self);
        }
        return;
    }
  }

 private:
  enum class step { start, posted, waiting };

  template <class Self>
  void start(Self& self) {
    if constexpr (reserving_limiter<Limiter>) {
      auto r = limiter_->reserve(n_);
      if (!r.ok()) return finish(self, errc::exceeds_capacity);
      const auto ready = r.ready_at();
      const bool due = r.delay() == decltype(r.delay())::zero();
      if constexpr (cancellable_reservation_limiter<Limiter>) reservation_ = std::move(r);
      if (due) return finish(self, {});
      wait_until(self, ready);
    } else {
      retry(self);
    }
  }

  template <class Self>
  void retry(Self& self) {
    if (limiter_->try_acquire(n_)) return finish(self, {});
    const std::chrono::nanoseconds wait = limiter_->time_until_available(n_);
    if (wait == std::chrono::nanoseconds::max()) return finish(self, errc::exceeds_capacity);
    // A refusal with no wait (another caller took the capacity between the two calls) still yields to the executor.
    wait_for(self, std::max(wait, std::chrono::nanoseconds(1)));
  }

  template <class Self, class Duration>
  void wait_for(Self& self, Duration d) {
    if (d <= Duration::zero()) return finish(self, {});
    wait_until(self, clock_type::now() + std::chrono::ceil<typename clock_type::duration>(d));
  }

  template <class Self>
  void wait_until(Self& self, typename clock_type::time_point tp) {
    if (!timer_) timer_ = std::make_unique<timer_type>(boost::asio::get_associated_executor(self));
    timer_->expires_at(tp);
    step_ = step::waiting;
    timer_->async_wait(std::move(self));
  }

  // Completes through the executor, so never inside the initiating call.
  template <class Self>
  void finish(Self& self, boost::system::error_code ec) {
    result_ = ec;
    step_ = step::posted;
    boost::asio::post(std::move(self));
  }
  template <class Self>
  void finish(Self& self, errc e) {
    finish(self, boost::system::error_code(std::error_code(e)));
  }

  Limiter* limiter_;
  std::int64_t n_;
  step step_ = step::start;
  boost::system::error_code result_;
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
      detail::wait_operation<Limiter>(limiter, n), token);
}

}  // namespace admit::asio
