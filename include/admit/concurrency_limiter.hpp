// admit/concurrency_limiter.hpp — at most `limit` requests at once, a bounded queue of waiters with a default
// deadline, and the counters a service wants on a dashboard.
//
//   admit::concurrency_limiter limiter{{.limit = 16, .max_waiters = 64, .timeout = 250ms}};
//   if (auto r = limiter.acquire()) handle(request); else shed(r.error());   // queue_full, timeout, ...
//
// A pool of permits with at most max_waiters waiters, a deadline per wait and hand-off on release, built on
// admit::basic_semaphore, which rules out the classic defects of such pools: the waiter bound is exact (with
// max_waiters waiting, the next request that would wait fails at once with queue_full), waiters are served strictly
// FIFO, and a release hands its permit to the head waiter directly, so no newcomer can take it in the gap before
// the waiter wakes — the permits in flight never exceed the limit. Every guarantee of <admit/semaphore.hpp> holds
// (FIFO with head-of-line blocking by large requests, exactly-once resolution of a grant racing a timeout or cancel).
//
// Counters. Every acquisition ends in exactly one outcome, counted in a relaxed atomic: admitted, unavailable
// (try_acquire found no free permit, or someone queued ahead), rejected (queue full), timed_out, cancelled, closed,
// exceeds_capacity. The wait of every admitted request (0 when admitted at once) goes into a wait_histogram (p50,
// p90, p99 within 1/32 above the exact values, exact max). metrics() reads them all, with the permits in flight and
// the waiters queued, at any time.
//
// Event hook. An optional `event_handler` is called once per acquisition, after its outcome is counted, on the
// acquiring thread and never while admit holds a lock, so it may take its own locks, read metrics() or export to a
// metrics system. It must be safe to call from many threads at once. If it throws, the exception reaches the caller
// of the acquiring member; a permit acquired by that call is released first (it is already owned by the result).
//
// Cost. The fast path (a permit is free and nobody waits) is the semaphore's single compare-and-swap plus one relaxed
// fetch_add (the histogram's zero bucket, which also counts the admission): no lock, no allocation and no clock read
// (an immediate admission waited 0); docs/PERFORMANCE.md has the measured cost. A request that waits reads the clock
// at its start and its end and waits on the semaphore (mutex, futex). Release is the permit's: one fetch_add while
// nobody waits.
//
// Thread safety: every member may be called concurrently. The limiter must outlive its permits and waiters.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>

#include "admit/acquire_result.hpp"
#include "admit/clock.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/permit.hpp"
#include "admit/semaphore.hpp"
#include "admit/wait_histogram.hpp"

namespace admit {

struct concurrency_limiter_options {
  // Requests (permits) in flight at most: 1 <= limit <= 2^59.
  std::int64_t limit = 1;
  // Requests that may wait at once; the next one that would have to wait fails with errc::queue_full. 0: never wait.
  std::size_t max_waiters = std::numeric_limits<std::size_t>::max();
  // How long acquire() waits at most (timeout). Zero: never wait (fail with timeout when no permit is free);
  // nanoseconds::max(): no deadline. Must not be negative.
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();
};

// The limiter's event and snapshot are the shared ones of <admit/limiter_metrics.hpp> (every limiter reports alike).
using concurrency_event = limiter_event;
using concurrency_snapshot = limiter_snapshot;

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_concurrency_limiter {
 public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  // Called once per acquisition (see the top of this file). May be empty.
  using event_handler = limiter_metrics::event_handler;

  // Throws std::invalid_argument naming the value for a limit outside [1, 2^59] or a negative timeout.
  explicit basic_concurrency_limiter(concurrency_limiter_options options, event_handler on_event = {})
      : semaphore_(check(options).limit, semaphore_options{options.max_waiters}),
        timeout_(options.timeout),
        metrics_(std::move(on_event)) {}
  basic_concurrency_limiter(const basic_concurrency_limiter&) = delete;
  basic_concurrency_limiter& operator=(const basic_concurrency_limiter&) = delete;

  // Takes n permits (n >= 1) if they are free and nobody waits; never waits. Empty otherwise, counted as
  // unavailable (or closed, exceeds_capacity). Lock-free. Throws std::invalid_argument for n < 1.
  std::optional<permit> try_acquire(std::int64_t n = 1) {
    auto p = semaphore_.try_acquire(n);
    if (p) {
      finish(acquire_outcome::admitted, n, duration::zero());
    } else {
      finish(to_outcome(semaphore_.native_state().refusal(n, errc::would_block)), n, duration::zero());
    }
    return p;
  }

  // Waits for n permits at most the default timeout (options.timeout), FIFO behind the requests already waiting.
  // Errors: queue_full and exceeds_capacity at once, timeout, cancelled (`stop`), closed. A grant that races with
  // the deadline or the cancel wins. Throws std::invalid_argument for n < 1.
  acquire_result acquire(std::int64_t n = 1, std::stop_token stop = {}) {
    if (auto p = semaphore_.try_acquire(n)) return admitted_now(std::move(*p), n);
    const time_point start = Clock::now();
    if (timeout_ == std::chrono::nanoseconds::max()) {
      return waited(semaphore_.acquire(n, std::move(stop)), n, start);
    }
    return waited(semaphore_.try_acquire_until(detail::deadline_after<Clock>(start, timeout_), n, std::move(stop)), n,
                  start);
  }

  // As acquire, with `timeout` instead of the default (zero or negative: do not wait; huge: saturates).
  template <class Rep, class Period>
  acquire_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1,
                                 std::stop_token stop = {}) {
    if (auto p = semaphore_.try_acquire(n)) return admitted_now(std::move(*p), n);
    const time_point start = Clock::now();
    return waited(semaphore_.try_acquire_until(detail::deadline_after<Clock>(start, timeout), n, std::move(stop)), n,
                  start);
  }

  // As acquire, until `deadline` on Clock (already passed: do not wait, fail with timeout when nothing is free).
  acquire_result try_acquire_until(time_point deadline, std::int64_t n = 1, std::stop_token stop = {}) {
    if (auto p = semaphore_.try_acquire(n)) return admitted_now(std::move(*p), n);
    const time_point start = Clock::now();
    return waited(semaphore_.try_acquire_until(deadline, n, std::move(stop)), n, start);
  }

  // Changes the limit (1 <= limit <= 2^59): a larger one serves waiters at once; a smaller one takes free permits
  // now and the rest as they are released, and fails the waiters that ask for more than the new limit with
  // exceeds_capacity. Concurrent calls are serialised (a mutex; not a hot path). Throws std::invalid_argument.
  void set_limit(std::int64_t limit) {
    check_limit(limit);
    std::lock_guard lock(limit_mutex_);
    const std::int64_t now = semaphore_.capacity();
    if (limit > now) {
      semaphore_.add_permits(limit - now);
    } else if (limit < now) {
      (void)semaphore_.forget_permits(now - limit);
    }
  }

  // Every waiter fails with closed, and so do later acquisitions. Held permits stay valid. Idempotent.
  void close() noexcept { semaphore_.close(); }
  bool is_closed() const noexcept { return semaphore_.is_closed(); }

  std::int64_t limit() const noexcept { return semaphore_.capacity(); }
  std::int64_t in_flight() const noexcept { return semaphore_.in_use(); }
  std::size_t waiting() const noexcept { return semaphore_.waiting(); }
  std::chrono::nanoseconds default_timeout() const noexcept { return timeout_; }

  // Every counter and the wait percentiles (see limiter_snapshot), with the limit, the permits in flight and the
  // requests waiting. Lock-free; reads ~1900 atomics (the histogram), about a microsecond: for a metrics scrape, not
  // for every request. (The counters are always kept: the limiter has no enable_metrics.)
  limiter_snapshot metrics() const noexcept {
    limiter_snapshot s = metrics_.snapshot();
    s.limit = semaphore_.capacity();
    s.in_flight = semaphore_.in_use();
    s.waiting = semaphore_.waiting();
    return s;
  }

  // The waits of admitted acquisitions, for percentiles other than p50/p90/p99 and for histogram buckets.
  const wait_histogram& wait_times() const noexcept { return metrics_.wait_times(); }

  // Counts one outcome of an acquisition made through semaphore() by an integration whose waits end elsewhere (the
  // Asio layer), and calls the event hook, exactly as the members above do for their own. errc{} is `admitted`;
  // a negative `waited` counts as zero.
  void record_outcome(errc e, std::int64_t n, std::chrono::nanoseconds waited) {
    const auto w = std::chrono::duration_cast<duration>(waited);
    finish(to_outcome(e), n, w < duration::zero() ? duration::zero() : w);
  }

  // The semaphore underneath (its engine is native_state(), for integrations that queue their own waiters; those
  // acquisitions are not counted here).
  basic_semaphore<Clock>& semaphore() noexcept { return semaphore_; }

 private:
  static const concurrency_limiter_options& check(const concurrency_limiter_options& o) {
    check_limit(o.limit);
    if (o.timeout < std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument("admit::concurrency_limiter: timeout must not be negative, got " +
                                  std::to_string(o.timeout.count()) + "ns");
    }
    return o;
  }
  static void check_limit(std::int64_t limit) {
    if (limit < 1 || limit > detail::semaphore_state::max_permits) {
      throw std::invalid_argument("admit::concurrency_limiter: limit must be in [1, " +
                                  std::to_string(detail::semaphore_state::max_permits) + "], got " +
                                  std::to_string(limit));
    }
  }

  acquire_result admitted_now(permit p, std::int64_t n) {
    acquire_result r(std::move(p));
    finish(acquire_outcome::admitted, n, duration::zero());
    return r;
  }

  acquire_result waited(acquire_result r, std::int64_t n, time_point start) {
    const duration wait = Clock::now() - start;
    finish(to_outcome(r.error()), n, wait < duration::zero() ? duration::zero() : wait);  // a clock set back: 0
    return r;
  }

  void finish(acquire_outcome o, std::int64_t n, duration wait) {
    metrics_.record(o, n, std::chrono::duration_cast<std::chrono::nanoseconds>(wait));
  }

  basic_semaphore<Clock> semaphore_;
  std::chrono::nanoseconds timeout_;
  std::mutex limit_mutex_;   // serialises set_limit
  limiter_metrics metrics_;  // the outcome counters, the wait histogram and the hook (on their own cache line)
};

using concurrency_limiter = basic_concurrency_limiter<>;

}  // namespace admit
