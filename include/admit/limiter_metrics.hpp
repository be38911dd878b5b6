// admit/limiter_metrics.hpp — the counters every limiter can keep: one outcome per decision, the waits of the admitted
// ones, and an optional event hook. The same snapshot for every limiter, so that a dashboard (or the Prometheus
// registry in <admit/metrics/prometheus.hpp>) reads them all alike.
//
//   admit::token_bucket bucket{admit::rate::per_second(100), 10};
//   bucket.enable_metrics();                 // opt-in, before the limiter is shared
//   ...
//   admit::limiter_snapshot s = bucket.metrics();   // s.admitted, s.unavailable, s.wait.p99, ...
//
// Outcomes. Every decision a limiter makes ends in exactly one acquire_outcome, counted once: admitted (at once or
// after a wait), unavailable (a try_* call found no capacity now and did not wait), queue_full, timeout, cancelled,
// closed, exceeds_capacity (n cannot be admitted at the limit's present capacity), failed (a distributed limiter's
// backend could not decide). The wait of every admission (0 when it did not wait) goes into a wait_histogram, which
// also counts the admissions.
//
// Cost. record() of an admission that did not wait is one relaxed fetch_add (the histogram's zero bucket); any other
// outcome is one relaxed fetch_add on its counter (plus, for a wait, the histogram's record). No lock, no allocation,
// no clock read. A limiter without metrics enabled pays one test of a null pointer per decision.
//
// Event hook. An optional handler runs once per recorded outcome, after it is counted, on the deciding thread and
// never while admit holds a lock: it may take its own locks, read a snapshot or export. It must be safe to call from
// many threads at once. What it throws reaches the caller of the deciding member.
//
// Thread safety: record() and snapshot() may be called concurrently from any threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "admit/errc.hpp"
#include "admit/wait_histogram.hpp"

namespace admit {

// How one decision ended.
enum class acquire_outcome : std::uint8_t {
  admitted,          // granted (at once or after a wait)
  unavailable,       // a try_* call: no capacity now (or someone queued ahead); did not wait
  queue_full,        // max_waiters were already waiting: rejected at once
  timeout,           // the deadline passed first (or could not be met, for a rate limiter: rejected at once)
  cancelled,         // the stop_token (or the Asio cancellation) came first
  closed,            // the limiter was closed
  exceeds_capacity,  // n cannot be admitted at the limit's present capacity (above the burst or the capacity)
  failed,            // a distributed limiter's backend could not decide (fail-closed), or another error
};

// What the event hook receives: one per decision.
struct limiter_event {
  acquire_outcome outcome = acquire_outcome::admitted;
  std::int64_t n = 1;                // permits or tokens asked for
  std::chrono::nanoseconds wait{0};  // from the call to the outcome; 0 when it did not wait
};

// All counters at one moment (each read at some instant during the call; together they are exact once the limiter is
// quiet). The outcome counters only grow and add up to the decisions recorded. The gauges are the limiter's own.
struct limiter_snapshot {
  std::int64_t limit = 0;      // a concurrency limit now (0 for a limiter without one)
  std::int64_t in_flight = 0;  // permits held now (0 for a rate limiter)
  std::size_t waiting = 0;     // requests waiting now
  std::uint64_t admitted = 0;  // decisions that admitted (== wait.count)
  std::uint64_t waited = 0;    // of those, the ones that had to wait (wait > 0)
  std::uint64_t unavailable = 0;
  std::uint64_t rejected = 0;  // queue_full
  std::uint64_t timed_out = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t closed = 0;
  std::uint64_t exceeds_capacity = 0;
  std::uint64_t failed = 0;
  wait_histogram::summary wait;  // waits of the admitted decisions (0 for immediate ones)
  // Leases a distributed semaphore granted and then found lost (Redis let them expire before a renewal reached it):
  // each one's holder may have overlapped the next. Empty for a limiter without leases.
  std::optional<std::uint64_t> leases_lost;
};

// The outcome an error means: errc{} is admitted, would_block (a try_* call: not now) unavailable, the errors of a
// wait their outcome, and every Redis client or backend error failed.
constexpr acquire_outcome to_outcome(errc e) noexcept {
  if (e == errc{}) return acquire_outcome::admitted;
  switch (e) {
    case errc::queue_full:
      return acquire_outcome::queue_full;
    case errc::timeout:
      return acquire_outcome::timeout;
    case errc::cancelled:
      return acquire_outcome::cancelled;
    case errc::closed:
      return acquire_outcome::closed;
    case errc::exceeds_capacity:
      return acquire_outcome::exceeds_capacity;
    case errc::would_block:
      return acquire_outcome::unavailable;
    default:  // the Redis client's and the distributed limiters' errors
      return acquire_outcome::failed;
  }
}

class limiter_metrics {
 public:
  using event_handler = std::function<void(const limiter_event&)>;

  explicit limiter_metrics(event_handler on_event = {}) : on_event_(std::move(on_event)) {}
  limiter_metrics(const limiter_metrics&) = delete;
  limiter_metrics& operator=(const limiter_metrics&) = delete;

  // Counts one decision and calls the event hook. A negative wait counts as zero. Throws what the hook throws.
  void record(acquire_outcome o, std::int64_t n, std::chrono::nanoseconds wait = std::chrono::nanoseconds::zero()) {
    if (wait < std::chrono::nanoseconds::zero()) wait = std::chrono::nanoseconds::zero();
    switch (o) {
      case acquire_outcome::admitted:
        waits_.record(wait);  // counts the admission too: admitted == waits_.count()
        if (wait > std::chrono::nanoseconds::zero()) bump(waited_);
        break;
      case acquire_outcome::unavailable:
        bump(unavailable_);
        break;
      case acquire_outcome::queue_full:
        bump(rejected_);
        break;
      case acquire_outcome::timeout:
        bump(timed_out_);
        break;
      case acquire_outcome::cancelled:
        bump(cancelled_);
        break;
      case acquire_outcome::closed:
        bump(closed_);
        break;
      case acquire_outcome::exceeds_capacity:
        bump(exceeds_capacity_);
        break;
      case acquire_outcome::failed:
        bump(failed_);
        break;
    }
    if (on_event_) on_event_(limiter_event{o, n, wait});
  }
  // As record(to_outcome(e), n, wait).
  void record(errc e, std::int64_t n, std::chrono::nanoseconds wait = std::chrono::nanoseconds::zero()) {
    record(to_outcome(e), n, wait);
  }

  // The counters; the gauges (limit, in_flight, waiting) are left 0 for the limiter to fill. Lock-free; reads the
  // histogram's ~1900 counters (about a microsecond): for a scrape, not for every request.
  limiter_snapshot snapshot() const noexcept {
    limiter_snapshot s;
    s.waited = load(waited_);
    s.unavailable = load(unavailable_);
    s.rejected = load(rejected_);
    s.timed_out = load(timed_out_);
    s.cancelled = load(cancelled_);
    s.closed = load(closed_);
    s.exceeds_capacity = load(exceeds_capacity_);
    s.failed = load(failed_);
    s.wait = waits_.summarize();
    s.admitted = s.wait.count;
    return s;
  }

  // The waits of the admissions, for percentiles other than p50/p90/p99 and for histogram buckets.
  const wait_histogram& wait_times() const noexcept { return waits_; }

 private:
  static void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
  static std::uint64_t load(const std::atomic<std::uint64_t>& c) noexcept { return c.load(std::memory_order_relaxed); }

  event_handler on_event_;
  // On their own cache line, away from the limiter's hot word when embedded in one.
  alignas(64) std::atomic<std::uint64_t> waited_{0};
  std::atomic<std::uint64_t> unavailable_{0};
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> timed_out_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  std::atomic<std::uint64_t> closed_{0};
  std::atomic<std::uint64_t> exceeds_capacity_{0};
  std::atomic<std::uint64_t> failed_{0};
  wait_histogram waits_;
};

}  // namespace admit
