// admit/gcra.hpp — the Generic Cell Rate Algorithm (GCRA), as redis-cell and Rust's governor implement it, lock-free.
//
// GCRA is a token bucket expressed as one time value. Requests are spaced by the emission interval T = 1 / rate, and
// up to `burst` of them may arrive at once: the limiter tracks the "theoretical arrival time" (TAT) of the next
// request and admits a request of n at `now` iff TAT + n·T − burst·T <= now. Every decision reports what a server
// needs for `Retry-After` and the `RateLimit-*` headers (as redis-cell's CL.THROTTLE): admitted, limit (the burst),
// remaining (whole requests of one that still fit), retry_after (when this request would fit) and reset_after (when
// the limiter is back to full, TAT − now).
//
//   admit::gcra limiter{admit::rate::per(30, std::chrono::minutes(1)), 16};   // redis-cell's "15 30 60"
//   if (admit::decision d = limiter.decide(); !d) reply_429(d.retry_after, d.limit, d.remaining, d.reset_after);
//
// Representation. The whole state is one cache-line-aligned std::atomic<std::int64_t> holding TAT − τ in
// nanoseconds, where τ = burst·T is the tolerance (governor's `earliest_time`, redis-cell's `allow_at` of the next
// request of one minus T). Storing TAT − τ rather than TAT keeps the stored value at or before the `now` that wrote it,
// so it cannot overflow whatever the clock reads. Admitting n moves it by n·T with
// one compare-and-swap; a lost CAS decides again on the fresh state and never turns into a refusal; a refusal writes
// nothing. Nothing refills in the background: the state is interpreted lazily against `now`. The arithmetic on the
// state word lives in detail/gcra_math.hpp, shared with admit::keyed<gcra> (<admit/keyed.hpp>), which keeps one such
// word per key and the configuration once.
//
// Rounding. T is rounded up to whole nanoseconds (as redis-cell and governor keep it in integer nanoseconds, but
// upwards), so the limiter never admits more than rate·w + burst in any window w, a burst of `burst` requests always
// fits at once, and the rate actually enforced is 1 / ceil(T): slower than asked by less than 1 ns per request
// (under 0.1% for rates up to 1,000,000/s; rates above 1e9/s behave as 1e9/s).
//
// Not provided: set_rate / set_burst. Changing T or τ must convert the state in the same atomic step as the
// configuration a concurrent decision reads; without a double-width CAS that needs either a lock (or a sequence lock
// that decisions spin on) or fewer bits of time in the state word. A GCRA is cheap to build: construct a new one.
//
// Waiter bound and metrics (detail/rate_limiter_base.hpp): this limiter never blocks a thread; set_max_waiters(k)
// bounds the callers waiting in admit::asio::async_wait on it (the next fails with errc::queue_full), and
// enable_metrics() counts every decision (try_acquire, decide, async_wait's completion).
#pragma once

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/gcra_math.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/rate.hpp"

namespace admit {

// A GCRA limiter: `rate` requests per unit of time on average, up to `burst` at once.
//
// Thread safety: every member may be called concurrently. Decisions are lock-free (a CAS retry loop), allocate nothing
// and start no thread or timer. Complexity O(1) expected.
//
// Edge cases, for every decision member:
// - n == 0 is always admitted and changes nothing. A negative n throws std::invalid_argument (in every build), before
//   anything is read or changed; every member taking n may therefore throw.
// - n > burst is refused with retry_after == nanoseconds::max() (decision::exceeds_capacity()) under
//   oversize_policy::reject (the default, as governor's InsufficientCapacity); under oversize_policy::debt it is
//   admitted once the limiter is full and later requests wait out the excess (as Guava).
// - rate::inf() admits everything, n > burst included; rate zero spends the initial burst and never refills (a
//   refusal then has retry_after == nanoseconds::max(), and reset_after is nanoseconds::max() once anything is spent).
// - A `now` earlier than one already seen (a clock going backwards, or threads passing slightly stale times) sees no
//   more capacity than the latest `now` did — fewer, in fact: it never adds tokens and never over-admits; retry_after
//   is measured from the `now` passed in.
template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_gcra : public detail::rate_limiter_base {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // A full limiter: `burst` requests fit at once, then one every 1/r.
  // Throws std::invalid_argument, naming the value, when burst < 1 or when burst·T does not fit in an int64 of
  // nanoseconds (about 292 years: e.g. a burst above ~106,000 at one request a day).
  basic_gcra(rate r, std::int64_t burst, oversize_policy policy = oversize_policy::reject)
      : cfg_(detail::gcra_config::make(r, burst, policy)) {}

  basic_gcra(const basic_gcra&) = delete;
  basic_gcra& operator=(const basic_gcra&) = delete;

  // Admits n at `now` if they fit (and consumes them), else changes nothing and returns false.
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) { return record_try(admit_at(now, n), n); }
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return try_acquire_at(Clock::now(), n); }

  // Like try_acquire_at, with the whole decision (redis-cell's CL.THROTTLE reply):
  // - limit: the burst;
  // - remaining: whole requests of one that would be admitted right after this decision (0..burst);
  // - retry_after: zero when admitted; else how long from `now` until this request would fit if nothing else
  //   happened; nanoseconds::max() when it never can (n > burst under the reject policy, or the rate is zero);
  // - reset_after: how long from `now` until the limiter is full again (TAT − now); zero when it is full.
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    const decision d = decide_quiet_at(now, n);
    record_try(d.admitted, n);
    return d;
  }
  [[nodiscard]] decision decide(std::int64_t n = 1) { return decide_at(Clock::now(), n); }

  // How long from `now` until n would be admitted, consuming nothing: zero when they fit now, nanoseconds::max()
  // when they never will (n > burst under the reject policy; rate zero and too little left).
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) const {
    detail::check_n("admit::gcra", n);
    if (cfg_.inf || n == 0) return std::chrono::nanoseconds{0};
    return std::chrono::nanoseconds{const_cast<basic_gcra*>(this)->step(to_ns<Clock>(now), n, false).wait};
  }
  [[nodiscard]] std::chrono::nanoseconds time_until_available(std::int64_t n = 1) const {
    return time_until_available_at(Clock::now(), n);
  }

  // Whole requests of one that would be admitted at `now` (the burst for rate inf). Consumes nothing.
  [[nodiscard]] std::int64_t remaining_at(time_point now) const noexcept {
    if (cfg_.inf) return cfg_.burst;
    decision d;
    detail::gcra_describe(cfg_, state_.value.load(std::memory_order_acquire),
                          detail::gcra_effective(cfg_, to_ns<Clock>(now)), d);
    return d.remaining;
  }

  [[nodiscard]] rate get_rate() const noexcept { return cfg_.r; }
  [[nodiscard]] std::int64_t burst() const noexcept { return cfg_.burst; }
  [[nodiscard]] oversize_policy policy() const noexcept { return cfg_.policy; }
  // The emission interval T actually enforced: the rate's interval rounded up to whole nanoseconds (0 for rate inf,
  // nanoseconds::max() for rate zero).
  [[nodiscard]] std::chrono::nanoseconds emission_interval() const noexcept {
    if (cfg_.inf) return std::chrono::nanoseconds{0};
    if (cfg_.zero) return std::chrono::nanoseconds::max();
    return std::chrono::nanoseconds{cfg_.interval};
  }

 private:
  friend struct detail::limiter_access;
  bool try_acquire_quiet(std::int64_t n) { return admit_at(Clock::now(), n); }
  // try_acquire_at and decide_at without the metrics.
  bool admit_at(time_point now, std::int64_t n) {
    detail::check_n("admit::gcra", n);
    if (cfg_.inf || n == 0) return true;
    return step(to_ns<Clock>(now), n, true).ok;
  }
  decision decide_quiet_at(time_point now, std::int64_t n) {
    detail::check_n("admit::gcra", n);
    decision d;
    d.limit = cfg_.burst;
    if (cfg_.inf) {
      d.admitted = true;
      d.remaining = cfg_.burst;
      return d;
    }
    const std::int64_t t = to_ns<Clock>(now);
    const outcome o =
        n == 0 ? outcome{true, state_.value.load(std::memory_order_acquire), detail::gcra_effective(cfg_, t), 0}
               : step(t, n, true);
    d.admitted = o.ok;
    d.retry_after = std::chrono::nanoseconds{o.wait};
    detail::gcra_describe(cfg_, o.state, o.t, d);
    return d;
  }

  struct outcome {
    bool ok = false;
    std::int64_t state = 0;  // TAT − τ after the decision
    std::int64_t t = 0;      // the effective now
    std::int64_t wait = 0;   // ns until the request fits (ns_max: never)
  };

  // The one decision procedure, for admitting (commit) and for querying: detail::gcra_step on the atomic state,
  // committed by compare-and-swap.
  outcome step(std::int64_t now_ns, std::int64_t n, bool commit) noexcept {
    const std::int64_t t = detail::gcra_effective(cfg_, now_ns);
    std::int64_t s = state_.value.load(std::memory_order_acquire);
    for (;;) {
      const detail::gcra_step_result r = detail::gcra_step(cfg_, s, t, n);
      if (!r.ok) return {false, s, t, r.wait};
      if (!commit) return {true, s, t, 0};
      if (state_.value.compare_exchange_weak(s, r.next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return {true, r.next, t, 0};
      }
      // Lost a race (or a spurious failure): `s` now holds the fresh state; decide again.
    }
  }

  // Hot: written by every admission, alone on its cache line. Starts "long ago": the limiter is full.
  struct alignas(64) hot_state {
    std::atomic<std::int64_t> value{detail::gcra_full_state};
  };

  hot_state state_;
  const detail::gcra_config cfg_;  // the arithmetic's configuration (detail/gcra_math.hpp), shared with keyed<gcra>
};

using gcra = basic_gcra<std::chrono::steady_clock>;

}  // namespace admit
