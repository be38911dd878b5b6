// admit/semaphore.hpp — a fair counting semaphore: FIFO waiters, direct hand-off, deadlines, cancellation, close.
//
//   admit::semaphore sem{8, {.max_waiters = 100}};
//   if (auto r = sem.try_acquire_for(50ms)) serve();          // r.value() is the permit; released at scope end
//   else if (r.error() == admit::errc::queue_full) shed();     // or timeout, cancelled, closed, exceeds_capacity
//
// Guarantees.
// - Fairness: waiters are served strictly in arrival order. A large request at the head holds back smaller ones
//   behind it even while enough permits for them are free (the free permits are the head's, reserved for it, until it
//   has all it asked for); this is what keeps large requests from starving. try_acquire never jumps the queue: it fails
//   while anyone waits.
// - Hand-off: a release gives its permits to the head waiter(s) directly. Between a release and the waiter's wake-up
//   no newcomer can take them, so the permits held never exceed the capacity.
// - Exactly-once resolution: a grant that races with a waiter's timeout or cancel is decided once, under the mutex —
//   either the waiter gets the permit (the wait succeeds even though its deadline has just passed) or the permits go
//   back to the next waiters. None is lost or counted twice.
// - Cost: try_acquire is one compare-and-swap and release one fetch_add, with no lock and no allocation, while nobody
//   waits. Waiting takes the mutex, allocates nothing (the waiter lives on the waiting thread's stack) and sleeps on a
//   futex, woken by the grant, the deadline, its stop_token or close().
// - max_waiters: with that many already waiting, a request that would have to wait fails at once with queue_full.
//
// Metrics (opt-in). enable_metrics() makes every acquisition — try_acquire, the blocking waits and
// admit::asio::async_acquire — count its outcome exactly once in a limiter_metrics (<admit/limiter_metrics.hpp>):
// admitted with its wait, unavailable (try_acquire), queue_full, timeout, cancelled, closed, exceeds_capacity; and
// call the event hook. metrics() reads them with the gauges limit (the capacity), in_flight (in_use) and waiting.
// Without it every decision pays one test of a null pointer; with it, an immediate admission adds one relaxed
// fetch_add (and reads no clock), a wait reads the clock at its start and end.
//
// Thread safety: every member may be called concurrently. The semaphore must outlive its permits and waiters.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stop_token>
#include <utility>

#include "admit/acquire_result.hpp"
#include "admit/clock.hpp"
#include "admit/detail/blocking_wait.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/permit.hpp"
#include "admit/wait_histogram.hpp"

namespace admit {

struct semaphore_options {
  // Requests that may wait at once; one more that would have to wait fails with errc::queue_full. 0: never wait.
  std::size_t max_waiters = std::numeric_limits<std::size_t>::max();
};

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_semaphore {
 public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // `permits` in [0, 2^59]; throws std::invalid_argument naming the value otherwise.
  explicit basic_semaphore(std::int64_t permits, semaphore_options options = {})
      : state_(permits, options.max_waiters) {}
  basic_semaphore(const basic_semaphore&) = delete;
  basic_semaphore& operator=(const basic_semaphore&) = delete;

  // Takes n permits (n >= 1) if they are free and nobody waits; never waits. Empty when short, queued behind others,
  // closed, or n exceeds the capacity. Lock-free. Throws std::invalid_argument for n < 1.
  std::optional<permit> try_acquire(std::int64_t n = 1) {
    check_n(n);
    if (!state_.try_acquire(n)) {
      if (metrics_) [[unlikely]]
        metrics_->record(state_.refusal(n, errc::would_block), n);
      return std::nullopt;
    }
    permit p(state_, n);  // owned before the hook runs: released if it throws
    if (metrics_) metrics_->record(acquire_outcome::admitted, n);
    return p;
  }

  // Waits for n permits until granted, `stop` is requested (cancelled), or the semaphore closes (closed). Fails at
  // once with queue_full or exceeds_capacity.
  acquire_result acquire(std::int64_t n = 1, std::stop_token stop = {}) {
    check_n(n);
    if (metrics_) return measured(n, std::nullopt, std::move(stop));
    return detail::blocking_acquire<Clock>(state_, n, std::nullopt, stop);
  }

  // Waits as acquire does, at most until `deadline` on Clock (timeout). A deadline already passed behaves as
  // try_acquire, failing with timeout. A grant that races with the deadline wins.
  acquire_result try_acquire_until(time_point deadline, std::int64_t n = 1, std::stop_token stop = {}) {
    check_n(n);
    if (metrics_) return measured(n, deadline, std::move(stop));
    return detail::blocking_acquire<Clock>(state_, n, deadline, stop);
  }

  // try_acquire_until(now + timeout); a zero or negative timeout does not wait. Saturates for huge timeouts.
  template <class Rep, class Period>
  acquire_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1,
                                 std::stop_token stop = {}) {
    const time_point deadline = detail::deadline_after<Clock>(Clock::now(), timeout);
    return try_acquire_until(deadline, n, std::move(stop));
  }

  // Every waiter fails with closed; later acquisitions fail with closed (try_acquire: empty). Held permits may still
  // be released. Idempotent.
  void close() noexcept { state_.close(); }
  bool is_closed() const noexcept { return state_.is_closed(); }

  // Grows the capacity by n >= 0, serving waiters first. Throws std::invalid_argument past 2^59 permits.
  void add_permits(std::int64_t n) { state_.add_permits(n); }

  // Shrinks the capacity by n (0 <= n <= capacity()) without waiting: free permits go now, held ones as they are
  // released. Waiters needing more than the new capacity fail with exceeds_capacity. Returns how many went at once.
  std::int64_t forget_permits(std::int64_t n) { return state_.forget_permits(n); }

  // Snapshots: free permits (0 while anyone waits), queued waiters, total permits.
  std::int64_t available() const noexcept { return state_.available(); }
  std::size_t waiting() const noexcept { return state_.waiting(); }
  std::int64_t capacity() const noexcept { return state_.capacity(); }
  // Permits held by permit objects now (capacity plus forgotten-but-held, minus free and reserved for waiters).
  std::int64_t in_use() const noexcept { return state_.in_use(); }

  // Turns metrics on (see the top of this file): from now on every acquisition is counted, and `on_event` (may be
  // empty) is called once for each, after it is counted, on the deciding thread (for async_acquire: the handler's
  // executor, just before the handler), never while admit holds a lock. Calling it again starts from zero with the
  // new hook. Not thread-safe against acquisitions: call it before the semaphore is shared.
  void enable_metrics(limiter_metrics::event_handler on_event = {}) {
    metrics_ = std::make_unique<limiter_metrics>(std::move(on_event));
  }
  bool metrics_enabled() const noexcept { return metrics_ != nullptr; }

  // The outcome counters and wait percentiles (all 0 unless enable_metrics was called) with the gauges limit =
  // capacity(), in_flight = in_use() and waiting(). Lock-free; about a microsecond: for a scrape, not per request.
  limiter_snapshot metrics() const noexcept {
    limiter_snapshot s = metrics_ ? metrics_->snapshot() : limiter_snapshot{};
    s.limit = capacity();
    s.in_flight = in_use();
    s.waiting = waiting();
    return s;
  }

  // The waits of the admitted acquisitions (an empty histogram unless enable_metrics was called).
  const wait_histogram& wait_times() const noexcept { return metrics_ ? metrics_->wait_times() : no_waits(); }

  // Counts one outcome of an acquisition made through native_state() by an integration that queues its own waiters
  // (the Asio layer, the middleware), as the members above count theirs; nothing unless metrics are enabled.
  // errc{} is admitted; a negative `waited` counts as 0. Throws what the event hook throws.
  void record_outcome(errc e, std::int64_t n, std::chrono::nanoseconds waited) {
    if (metrics_) metrics_->record(e, n, waited);
  }

  // The engine, for integrations that queue their own waiters (the Asio layer). Acquisitions made through it are
  // counted only if the integration calls record_outcome.
  detail::semaphore_state& native_state() noexcept { return state_; }

 private:
  static void check_n(std::int64_t n) { detail::semaphore_state::check_count("n", n, 1); }

  // An acquisition with metrics on: an immediate grant waited 0 (no clock read), a wait from its start to its end.
  acquire_result measured(std::int64_t n, std::optional<time_point> deadline, std::stop_token stop) {
    if (state_.try_acquire(n)) {
      acquire_result r{permit(state_, n)};
      metrics_->record(acquire_outcome::admitted, n);
      return r;
    }
    const time_point start = Clock::now();
    acquire_result r = detail::blocking_acquire<Clock>(state_, n, deadline, stop);
    metrics_->record(r.error(), n, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start));
    return r;
  }

  static const wait_histogram& no_waits() noexcept {
    static const wait_histogram empty;
    return empty;
  }

  detail::semaphore_state state_;
  std::unique_ptr<limiter_metrics> metrics_;  // null: metrics off
};

using semaphore = basic_semaphore<>;

}  // namespace admit
