// admit/detail/blocking_wait.hpp — a thread waiting in a semaphore's queue: sleeps on a futex until it is granted,
// closed out, cancelled through its stop_token, or its deadline on `Clock` passes. Never polls.
//
// Clocks that bring their own `sleep_until(time_point, stop_token)` (the manual clock) are slept on through it, so
// that a test moving virtual time wakes timed waiters; a grant interrupts that sleep through a stop_source.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>

#include "admit/acquire_result.hpp"
#include "admit/clock.hpp"
#include "admit/detail/futex.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/detail/sleep.hpp"

namespace admit::detail {

struct blocking_waiter : semaphore_waiter {
  static constexpr std::uint32_t resolved = 1;  // notify ran: `outcome` is final, the state is done with the node
  static constexpr std::uint32_t cancel = 2;    // the caller's stop_token asked to stop
  std::atomic<std::uint32_t> status{0};
  std::stop_source* interrupt = nullptr;  // set for clocks with their own sleep: notify ends that sleep

  static void on_notify(semaphore_waiter* base) noexcept {
    auto* self = static_cast<blocking_waiter*>(base);
    if (self->interrupt != nullptr) self->interrupt->request_stop();
    std::atomic<std::uint32_t>* word = &self->status;
    word->fetch_or(resolved, std::memory_order_release);  // from here on the owner may return: touch only the address
    futex_wake_one(word);
  }
};

// Converts a deadline on Clock to one on steady_clock for the futex, at most a day ahead (the caller re-checks Clock).
template <steady_clock_like Clock>
std::chrono::steady_clock::time_point steady_deadline(typename Clock::time_point deadline) {
  if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
    return deadline;
  } else {
    const auto remaining = std::chrono::ceil<std::chrono::nanoseconds>(deadline - Clock::now());
    const auto step =
        std::clamp<std::chrono::nanoseconds>(remaining, std::chrono::nanoseconds::zero(), std::chrono::hours(24));
    return std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(step);
  }
}

// Waits for n permits of `state`, FIFO behind those already queued. No deadline when `deadline` is empty. A stop
// requested before the call, or a deadline already passed, still gets free permits if nobody is queued (like
// try_acquire) and otherwise fails at once with `cancelled` / `timeout` — after `closed` and `exceeds_capacity`.
template <steady_clock_like Clock>
acquire_result blocking_acquire(semaphore_state& state, std::int64_t n,
                                std::optional<typename Clock::time_point> deadline, const std::stop_token& stop) {
  if (state.try_acquire(n)) return permit(state, n);
  const bool expired = deadline && Clock::now() >= *deadline;
  if (expired || stop.stop_requested()) {
    if (state.is_closed()) return errc::closed;
    if (n > state.capacity()) return errc::exceeds_capacity;
    return expired ? errc::timeout : errc::cancelled;
  }

  blocking_waiter w;
  w.needed = n;
  w.notify = &blocking_waiter::on_notify;
  std::optional<std::stop_source> interrupt;
  if constexpr (clock_with_sleep<Clock>) {
    if (deadline) w.interrupt = &interrupt.emplace();
  }
  const auto begun = state.begin_wait(w);
  if (!begun.queued) return begun.error == errc{} ? acquire_result(permit(state, n)) : acquire_result(begun.error);

  auto on_stop = [&w] {
    w.status.fetch_or(blocking_waiter::cancel, std::memory_order_relaxed);
    futex_wake_one(&w.status);
    if (w.interrupt != nullptr) w.interrupt->request_stop();
  };
  std::optional<std::stop_callback<decltype(on_stop)>> stop_callback;
  if (stop.stop_possible()) stop_callback.emplace(stop, on_stop);

  std::uint32_t s = 0;
  for (;;) {
    s = w.status.load(std::memory_order_acquire);
    if ((s & blocking_waiter::resolved) != 0) break;
    const bool cancelled = (s & blocking_waiter::cancel) != 0;
    if (cancelled || (deadline && Clock::now() >= *deadline)) {
      if (state.cancel_wait(w)) return cancelled ? errc::cancelled : errc::timeout;
      // Resolved first: the outcome stands; wait for notify to finish with the node.
      while (((s = w.status.load(std::memory_order_acquire)) & blocking_waiter::resolved) == 0) futex_wait(w.status, s);
      break;
    }
    if (!deadline) {
      futex_wait(w.status, s);
    } else if constexpr (clock_with_sleep<Clock>) {
      if (!Clock::sleep_until(*deadline, interrupt->get_token())) {
        // Interrupted: by a grant (resolved follows at once) or a cancel (its bit is already set).
        while ((s = w.status.load(std::memory_order_acquire)) == 0) futex_wait(w.status, 0);
      }
    } else {
      futex_wait(w.status, s, steady_deadline<Clock>(*deadline));
    }
  }
  if (w.outcome != errc{}) return w.outcome;
  return permit(state, n);
}

}  // namespace admit::detail
