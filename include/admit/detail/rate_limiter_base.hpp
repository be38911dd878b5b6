// admit/detail/rate_limiter_base.hpp — what every local rate limiter (token_bucket, gcra, pacer, fixed_window,
// sliding_window, sliding_log, warmup, keyed) has besides its algorithm: the bound on its waiters and its opt-in
// metrics. Each limiter derives from it publicly, so these members are the limiter's own:
//
//   bucket.set_max_waiters(100);          // the 101st caller that would have to wait fails with errc::queue_full
//   bucket.enable_metrics();              // opt-in, before the limiter is shared
//   admit::limiter_snapshot s = bucket.metrics();   // s.admitted, s.unavailable, s.waiting, s.wait.p99, ...
//
// Waiters. A caller waits when its request cannot be admitted at once: in acquire / try_acquire_until / try_acquire_for
// (token_bucket, pacer, warmup; the pacer's take too) or in admit::asio::async_wait (every rate limiter). It holds a
// place while it sleeps (a thread on its clock, an operation on its timer); a request admitted at once holds none and
// is never refused for the bound. With max_waiters() places held, a caller that would have to wait fails at once with
// errc::queue_full, taking nothing. The bound is exact under concurrency (detail/waiter_gate.hpp).
//
// Metrics. Off by default: a decision then pays one test of a null pointer. enable_metrics() makes every decision —
// try_acquire, decide, each wait, async_wait's completion — count exactly one outcome in an admit::limiter_metrics
// (<admit/limiter_metrics.hpp>): a try_* or decide refusal is `unavailable`; a wait ends admitted (with the time it
// waited, 0 when admitted at once), queue_full, timeout, cancelled or exceeds_capacity. reserve() and the queries
// (time_until_available, tokens, ...) are not decisions and count nothing.
//
// Thread safety: set_max_waiters, max_waiters, waiting and metrics may be called concurrently with anything.
// enable_metrics must be called before the limiter is shared (it is not synchronized with decisions).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "admit/detail/waiter_gate.hpp"
#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/wait_result.hpp"

namespace admit::detail {

// Opens a limiter's decisions that count nothing, for an integration that records the outcome of its own wait once
// (admit::asio::async_wait). Each limiter declares it a friend and has a private `bool try_acquire_quiet(int64_t n)`:
// try_acquire(n) without the metrics.
struct limiter_access {
  template <class Limiter>
  static bool try_acquire_quiet(Limiter& l, std::int64_t n) {
    return l.try_acquire_quiet(n);
  }
  // A keyed limiter's decide_at(key, now, n) without the metrics (its private decide_quiet_at).
  template <class Keyed, class K>
  static auto decide_quiet_at(Keyed& l, const K& key, typename Keyed::time_point now, std::int64_t n) {
    return l.decide_quiet_at(key, now, n);
  }
};

class rate_limiter_base {
 public:
  // Callers that may wait at once (default: unbounded); 0: nobody waits (a request that would have to wait fails
  // with queue_full). Lowering the bound does not disturb those already waiting.
  void set_max_waiters(std::size_t max_waiters) noexcept { gate_.set_max(max_waiters); }
  [[nodiscard]] std::size_t max_waiters() const noexcept { return gate_.max(); }
  // Callers waiting now (blocking and asynchronous).
  [[nodiscard]] std::size_t waiting() const noexcept { return gate_.waiting(); }

  // Starts counting every decision from now on, calling `on_event` once per decision (limiter_metrics' event hook).
  // Calling it again starts afresh (the counts so far are dropped). Not thread-safe against decisions: call it
  // before the limiter is shared.
  void enable_metrics(limiter_metrics::event_handler on_event = {}) {
    metrics_ = std::make_unique<limiter_metrics>(std::move(on_event));
  }
  // The counters (all 0 when metrics are not enabled) and the waiting gauge; limit and in_flight are 0 (a rate
  // limiter has neither). About a microsecond: for a scrape, not for every request.
  [[nodiscard]] limiter_snapshot metrics() const noexcept {
    limiter_snapshot s = metrics_ ? metrics_->snapshot() : limiter_snapshot{};
    s.waiting = waiting();
    return s;
  }
  // The admitted requests' waits (the Prometheus registry's histogram buckets); empty when metrics are not enabled.
  [[nodiscard]] const wait_histogram& wait_times() const noexcept {
    static const wait_histogram none;
    return metrics_ ? metrics_->wait_times() : none;
  }

  // For integrations that wait on their own (the Asio layer): the bound's counter and the metrics (null when off).
  waiter_gate& native_waiters() noexcept { return gate_; }
  limiter_metrics* native_metrics() const noexcept { return metrics_.get(); }

 protected:
  rate_limiter_base() = default;
  ~rate_limiter_base() = default;
  rate_limiter_base(const rate_limiter_base&) = delete;
  rate_limiter_base& operator=(const rate_limiter_base&) = delete;

  // A try_* or decide decision: admitted, or refused (unavailable). Returns `admitted`.
  bool record_try(bool admitted, std::int64_t n) const {
    if (metrics_) [[unlikely]]
      metrics_->record(admitted ? acquire_outcome::admitted : acquire_outcome::unavailable, n);
    return admitted;
  }
  // A wait that ended without waiting (admitted at once, or refused at once).
  wait_result end_at_once(errc e, std::int64_t n) const {
    if (metrics_) [[unlikely]]
      metrics_->record(e, n);
    return result_of(e);
  }
  // A wait that began at `start` on Clock and ended now (the clock is read only when metrics are on).
  template <class Clock>
  wait_result end_after(errc e, std::int64_t n, typename Clock::time_point start) const {
    if (metrics_) [[unlikely]]
      metrics_->record(e, n, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start));
    return result_of(e);
  }
  static wait_result result_of(errc e) noexcept { return e == errc{} ? wait_result{} : wait_result{e}; }

  waiter_gate& gate() noexcept { return gate_; }

 private:
  std::unique_ptr<limiter_metrics> metrics_;  // null: metrics off (read by every decision; written only by enable)
  alignas(64) waiter_gate gate_;              // written by waiters only: its own cache line
};

}  // namespace admit::detail
