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
#include <utility>

#include "admit/acquire_result.hpp"
#include "admit/clock.hpp"
#include "admit/detail/futex.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/detail/sleep.hpp"

namespace admit::detail {

struct blocking_waiter : semaphore_waiter {
  static constexpr std::uint32_t resolved = 1;  // notify ran: `outcome` is final, the state is done with the node
  static constexpr std::uint32_t cancel = 2;    // the caller's stop_token asked to stop
  static constexpr std::uint32_t sleeping = 4;  // the owner sleeps (or is about to) on the futex: notify must wake it
  // Polls for the grant before the first sleep: ~1.7 us at ~17 ns a pause. Under contention the grant usually comes
  // sooner than a futex round trip, and a waiter that never sleeps costs its releaser no futex_wake system call.
  static constexpr int spin_polls = 100;
  std::atomic<std::uint32_t> status{0};
  std::stop_source* interrupt = nullptr;  // set for clocks with their own sleep: notify ends that sleep

  static void on_notify(semaphore_waiter* base) noexcept {
    auto* self = static_cast<blocking_waiter*>(base);
    if (self->interrupt != nullptr) self->interrupt->request_stop();
    std::atomic<std::uint32_t>* word = &self->status;
    // From here on the owner may return: touch only the address. Wake it only if it announced a sleep.
    if ((word->fetch_or(resolved, std::memory_order_acq_rel) & sleeping) != 0) futex_wake_one(word);
  }

  // True once notify ran, after polling at most spin_polls times.
  bool spin_for_grant() const noexcept {
    for (int i = 0; i < spin_polls; ++i) {
      if ((status.load(std::memory_order_acquire) & resolved) != 0) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    return (status.load(std::memory_order_acquire) & resolved) != 0;
  }

  // Sleeps on the futex while the status is still `seen` (plus the sleeping flag), announcing the sleep first, so
  // that on_notify knows to wake it. Returns at once if notify or a cancel came in between.
  void sleep(std::uint32_t seen,
             std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) noexcept {
    const std::uint32_t now = status.fetch_or(sleeping, std::memory_order_acquire) | sleeping;
    if (now != (seen | sleeping)) return;
    futex_wait(status, now, deadline);
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
    return state.refusal(n, expired ? errc::timeout : errc::cancelled);
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
  bool spun = false;
  for (;;) {
    s = w.status.load(std::memory_order_acquire);
    if ((s & blocking_waiter::resolved) != 0) break;
    const bool cancelled = (s & blocking_waiter::cancel) != 0;
    if (cancelled || (deadline && Clock::now() >= *deadline)) {
      if (state.cancel_wait(w)) return cancelled ? errc::cancelled : errc::timeout;
      // Resolved first: the outcome stands; wait for notify to finish with the node.
      while (((s = w.status.load(std::memory_order_acquire)) & blocking_waiter::resolved) == 0) w.sleep(s);
      break;
    }
    if constexpr (!clock_with_sleep<Clock>) {
      if (!std::exchange(spun, true) && w.spin_for_grant()) continue;
    }
    if (!deadline) {
      w.sleep(s);
    } else if constexpr (clock_with_sleep<Clock>) {
      if (!Clock::sleep_until(*deadline, interrupt->get_token())) {
        // Interrupted: by a grant (resolved follows at once) or a cancel (its bit is already set).
        while (((s = w.status.load(std::memory_order_acquire)) & ~blocking_waiter::sleeping) == 0) w.sleep(s);
      }
    } else {
      w.sleep(s, steady_deadline<Clock>(*deadline));
    }
  }
  if (w.outcome != errc{}) return w.outcome;
  return permit(state, n);
}

}  // namespace admit::detail
