// admit/adaptive_limit.hpp — a concurrency limit that is found, not configured: each permit reports how its request
// went (success and its latency, dropped, ignored) and a limit algorithm moves the limit, as Netflix's
// concurrency-limits does (SimpleLimiter over AIMDLimit, Gradient2Limit, VegasLimit).
//
//   admit::adaptive_limiter<admit::vegas_limit> limiter{admit::vegas_limit{{.initial_limit = 10}}};
//   if (auto p = limiter.try_acquire()) { call() ? p->record_success() : p->record_dropped(); } else { shed(); }
//
// The algorithms live in <admit/adaptive/*.hpp> (included here): aimd_limit, gradient2_limit, vegas_limit, and the
// concept they share, limit_algorithm. docs/adaptive_limits.md explains them and what the simulation showed.
//
// The limiter is an admit::basic_semaphore whose capacity is the current limit. A sample that moves the limit grows
// the semaphore (add_permits, serving waiters first) or shrinks it (forget_permits, which never waits: permits held
// beyond the new limit are paid back as they are released, and until then nobody new gets in). So:
// - try_acquire admits exactly while in-flight < limit and nobody waits; acquire / try_acquire_for / _until wait
//   for the limit in FIFO order (the semaphore's), with its deadlines, stop_token cancellation and max_waiters.
// - In-flight never exceeds the limit in force when each permit was taken. Right after a cut, the permits already
//   held may exceed the new limit by what was held above it (at most old limit - new limit); none is admitted until
//   in-flight is back below the new limit.
// - Latency is measured on Clock from the grant (not from the call: time queued in the limiter is not the service's
//   latency) to the record_* call; the explicit `now` overloads take the times from the caller instead.
// - Costs. try_acquire: the semaphore's compare-and-swap, one fetch_add of the in-flight count and one Clock read
//   (none of them on a refusal); no lock, no allocation. record_ignored: one fetch_sub and the semaphore's release.
//   record_success / record_dropped add the algorithm's update under a mutex (O(1), no allocation) and, when the
//   limit changes, the semaphore's add_permits / forget_permits under its mutex.
// - Metrics (opt-in): enable_metrics() counts every acquisition once in an admit::limiter_metrics (admitted with its
//   wait, unavailable, queue_full, timeout, cancelled, closed); metrics() adds the gauges limit, in_flight, waiting.
// - Asynchronous waits: admit::asio::async_acquire(limiter, token) in <admit/asio/adaptive_async_acquire.hpp>, and the
//   middleware layer that measures handlers, <admit/asio/adaptive_layer.hpp>.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <utility>

#include "admit/adaptive/aimd_limit.hpp"
#include "admit/adaptive/gradient2_limit.hpp"
#include "admit/adaptive/limit_algorithm.hpp"
#include "admit/adaptive/vegas_limit.hpp"
#include "admit/clock.hpp"
#include "admit/errc.hpp"
#include "admit/expected.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/permit.hpp"
#include "admit/semaphore.hpp"

namespace admit {

struct adaptive_limiter_options {
  // Requests that may wait at once in acquire / try_acquire_for / _until; one more fails with errc::queue_full.
  // Default unbounded; 0: never wait.
  std::size_t max_waiters = std::numeric_limits<std::size_t>::max();
};

template <limit_algorithm Algorithm, steady_clock_like Clock = std::chrono::steady_clock>
class basic_adaptive_limiter {
 public:
  using algorithm_type = Algorithm;
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // One admitted request. Move-only; report its outcome once with a record_* call, which releases it. A permit
  // destroyed (or assigned over) without an outcome is recorded as ignored: it frees its slot and teaches the
  // algorithm nothing — the safe default for a request abandoned on an exception path. record_* on an empty
  // (moved-from or already recorded) permit does nothing. Thread safety: like any value; different permits may be
  // recorded concurrently. The limiter must outlive its permits.
  class [[nodiscard]] permit {
   public:
    permit() noexcept = default;
    permit(permit&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)),
          held_(std::move(other.held_)),
          start_(other.start_),
          in_flight_(other.in_flight_) {}
    permit& operator=(permit&& other) noexcept {
      if (this != &other) {
        record_ignored();
        owner_ = std::exchange(other.owner_, nullptr);
        held_ = std::move(other.held_);
        start_ = other.start_;
        in_flight_ = other.in_flight_;
      }
      return *this;
    }
    ~permit() { record_ignored(); }

    // Success: latency from the grant to now on Clock (record_success()), to `now` (clamped at zero if `now` is
    // earlier), or the given latency (negative counts as zero).
    void record_success() noexcept { finish(Clock::now(), false); }
    void record_success(time_point now) noexcept { finish(now, false); }
    template <class Rep, class Period>
    void record_success(std::chrono::duration<Rep, Period> latency) noexcept {
      finish_after(std::chrono::duration_cast<std::chrono::nanoseconds>(latency), false);
    }

    // Dropped: an overload signal (timeout, 503, rejected downstream). The algorithm backs off.
    void record_dropped() noexcept { finish(Clock::now(), true); }
    void record_dropped(time_point now) noexcept { finish(now, true); }
    template <class Rep, class Period>
    void record_dropped(std::chrono::duration<Rep, Period> latency) noexcept {
      finish_after(std::chrono::duration_cast<std::chrono::nanoseconds>(latency), true);
    }

    // Ignored: the outcome says nothing about the service's capacity (a client error, a cancelled call). Frees the
    // slot without a sample. Lock-free.
    void record_ignored() noexcept {
      if (owner_ == nullptr) return;
      std::exchange(owner_, nullptr)->release(held_);
    }

    // True until an outcome is recorded.
    explicit operator bool() const noexcept { return owner_ != nullptr; }
    // In-flight just after this permit was granted, itself included (what the algorithm will see).
    std::int64_t in_flight_at_acquire() const noexcept { return in_flight_; }
    // When it was granted, on Clock.
    time_point acquired_at() const noexcept { return from_ns<Clock>(start_.count()); }

   private:
    friend class basic_adaptive_limiter;
    permit(basic_adaptive_limiter& owner, admit::permit held, std::chrono::nanoseconds start,
           std::int64_t in_flight) noexcept
        : owner_(&owner), held_(std::move(held)), start_(start), in_flight_(in_flight) {}

    void finish(time_point now, bool dropped) noexcept {
      finish_after(std::chrono::nanoseconds(to_ns<Clock>(now)) - start_, dropped);
    }
    void finish_after(std::chrono::nanoseconds rtt, bool dropped) noexcept {
      if (owner_ == nullptr) return;
      const limit_sample s{start_, rtt < rtt.zero() ? rtt.zero() : rtt, in_flight_, dropped};
      std::exchange(owner_, nullptr)->record(s, held_);
    }

    basic_adaptive_limiter* owner_ = nullptr;
    admit::permit held_;
    std::chrono::nanoseconds start_{0};
    std::int64_t in_flight_ = 0;
  };

  // The result of a wait: the permit, or an admit::errc (queue_full, timeout, cancelled, closed). An admit::expected,
  // as admit::acquire_result is.
  using acquire_result = expected<permit, errc>;

  // Starts at algorithm.limit(). Throws what the semaphore throws (never, for a valid algorithm).
  explicit basic_adaptive_limiter(Algorithm algorithm = Algorithm{}, adaptive_limiter_options options = {})
      : algorithm_(std::move(algorithm)),
        capacity_(algorithm_.limit()),
        semaphore_(capacity_, semaphore_options{options.max_waiters}),
        limit_(capacity_) {}
  basic_adaptive_limiter(const basic_adaptive_limiter&) = delete;
  basic_adaptive_limiter& operator=(const basic_adaptive_limiter&) = delete;

  // Admits one request if in-flight < limit and nobody waits; never waits. Lock-free. Latency is measured from
  // Clock::now(), read only on success, or from `now`.
  std::optional<permit> try_acquire() {
    return counted(admit_one(semaphore_.try_acquire(), [] { return Clock::now(); }));
  }
  std::optional<permit> try_acquire(time_point now) {
    return counted(admit_one(semaphore_.try_acquire(), [now] { return now; }));
  }

  // Waits, FIFO, for in-flight to fall below the limit, until `stop` is requested (cancelled) or close()
  // (closed); fails at once with queue_full past max_waiters. See admit::basic_semaphore::acquire.
  acquire_result acquire(std::stop_token stop = {}) {
    return timed([&] { return semaphore_.acquire(1, std::move(stop)); });
  }
  // As acquire, at most until `deadline` on Clock (timeout). A deadline already passed does not wait.
  acquire_result try_acquire_until(time_point deadline, std::stop_token stop = {}) {
    return timed([&] { return semaphore_.try_acquire_until(deadline, 1, std::move(stop)); });
  }
  // try_acquire_until(now + timeout); a zero or negative timeout does not wait.
  template <class Rep, class Period>
  acquire_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop = {}) {
    return timed([&] { return semaphore_.try_acquire_for(timeout, 1, std::move(stop)); });
  }

  // Every waiter fails with closed, and so do later acquisitions; held permits may still record outcomes.
  void close() noexcept { semaphore_.close(); }

  // The limit now, in [algorithm.min_limit(), algorithm.max_limit()]. A relaxed snapshot.
  std::int64_t limit() const noexcept { return limit_.load(std::memory_order_relaxed); }
  // Permits held now (granted and not yet recorded). A relaxed snapshot.
  std::int64_t in_flight() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
  // Requests waiting in acquire / try_acquire_for / _until now.
  std::size_t waiting() const noexcept { return semaphore_.waiting(); }
  // A copy of the algorithm's state (takes the mutex).
  Algorithm algorithm() const {
    std::lock_guard lock(mutex_);
    return algorithm_;
  }

  // Metrics: opt-in; call before the limiter is shared (not thread-safe against acquisitions). Each acquisition is
  // then recorded once (one null-pointer test when disabled). metrics(): the counters (all 0 when not enabled) and
  // the gauges limit(), in_flight(), waiting(). wait_times(): the waits of the admitted acquisitions (empty when not
  // enabled).
  void enable_metrics(limiter_metrics::event_handler on_event = {}) {
    metrics_ = std::make_unique<limiter_metrics>(std::move(on_event));
  }
  limiter_snapshot metrics() const {
    limiter_snapshot s = metrics_ ? metrics_->snapshot() : limiter_snapshot{};
    s.limit = limit();
    s.in_flight = in_flight();
    s.waiting = waiting();
    return s;
  }
  const wait_histogram& wait_times() const noexcept {
    static const wait_histogram none;
    return metrics_ ? metrics_->wait_times() : none;
  }

  // For integrations that queue their own waiters (the Asio layer), not for general use: the semaphore's engine, a
  // permit made of one permit taken from it (its latency counted from `granted`), and the recording of an outcome
  // (as the members above record theirs; errc{} is admitted).
  detail::semaphore_state& native_state() noexcept { return semaphore_.native_state(); }
  permit adopt(admit::permit held, time_point granted) {
    return *admit_one(std::optional<admit::permit>(std::move(held)), [granted] { return granted; });
  }
  void record_outcome(errc e, std::chrono::nanoseconds waited) {
    if (metrics_) metrics_->record(e, 1, waited);
  }

 private:
  template <class Now>
  std::optional<permit> admit_one(std::optional<admit::permit> held, Now now) {
    if (!held) return std::nullopt;
    const std::int64_t in_flight = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
    return permit(*this, std::move(*held), std::chrono::nanoseconds(to_ns<Clock>(now())), in_flight);
  }

  acquire_result wrap(admit::acquire_result r) {
    if (!r) return r.error();
    return *admit_one(std::optional<admit::permit>(std::move(*r)), [] { return Clock::now(); });
  }

  std::optional<permit> counted(std::optional<permit> p) {
    if (metrics_) {
      metrics_->record(p ? errc{} : semaphore_.native_state().refusal(1, errc::would_block), 1);
    }
    return p;
  }

  // A wait, timed on Clock for the metrics only when they are enabled (no clock read otherwise).
  template <class Wait>
  acquire_result timed(Wait wait) {
    if (!metrics_) return wrap(wait());
    if (auto p = semaphore_.try_acquire()) {  // admitted at once: waited 0, no clock read
      metrics_->record(errc{}, 1);
      return wrap(admit::acquire_result(std::move(*p)));
    }
    const time_point start = Clock::now();
    acquire_result r = wrap(wait());
    metrics_->record(r ? errc{} : r.error(), 1,
                     std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start));
    return r;
  }

  void release(admit::permit& held) noexcept {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    held.release();
  }

  // Updates the algorithm and resizes the semaphore before the permit goes back, so that a cut is in force (as
  // debt) before this slot can be reused. add_permits / forget_permits cannot throw here: 1 <= limit <= 2^31 - 1.
  void record(const limit_sample& s, admit::permit& held) noexcept {
    {
      std::lock_guard lock(mutex_);
      const std::int64_t next = algorithm_.update(s);
      if (next > capacity_) {
        semaphore_.add_permits(next - capacity_);
      } else if (next < capacity_) {
        semaphore_.forget_permits(capacity_ - next);
      }
      capacity_ = next;
      limit_.store(next, std::memory_order_relaxed);
    }
    release(held);
  }

  mutable std::mutex mutex_;
  Algorithm algorithm_;    // guarded by mutex_
  std::int64_t capacity_;  // guarded by mutex_: the semaphore's capacity, == algorithm_.limit()
  basic_semaphore<Clock> semaphore_;
  std::atomic<std::int64_t> limit_;
  std::atomic<std::int64_t> in_flight_{0};
  std::unique_ptr<limiter_metrics> metrics_;  // null: metrics disabled
};

template <limit_algorithm Algorithm>
using adaptive_limiter = basic_adaptive_limiter<Algorithm>;

}  // namespace admit
