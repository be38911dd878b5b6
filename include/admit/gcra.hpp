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
// nothing. Nothing refills in the background: the state is interpreted lazily against `now`.
//
// Rounding. T is rounded up to whole nanoseconds (as redis-cell and governor keep it in integer nanoseconds, but
// upwards), so the limiter never admits more than rate·w + burst in any window w, a burst of `burst` requests always
// fits at once, and the rate actually enforced is 1 / ceil(T): slower than asked by less than 1 ns per request
// (under 0.1% for rates up to 1,000,000/s; rates above 1e9/s behave as 1e9/s).
//
// Not provided: set_rate / set_burst. Changing T or τ must convert the state in the same atomic step as the
// configuration a concurrent decision reads; without a double-width CAS that needs either a lock (or a sequence lock
// that decisions spin on) or fewer bits of time in the state word. A GCRA is cheap to build: construct a new one.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/rate.hpp"

namespace admit {

// A GCRA limiter: `rate` requests per unit of time on average, up to `burst` at once.
//
// Thread safety: every member may be called concurrently. Decisions are lock-free (a CAS retry loop), allocate nothing
// and start no thread or timer. Complexity O(1) expected.
//
// Edge cases, for every decision member:
// - n == 0 is always admitted and changes nothing. Negative n is a contract violation (assert).
// - n > burst is refused with retry_after == nanoseconds::max() (decision::exceeds_capacity()) under
//   oversize_policy::reject (the default, as governor's InsufficientCapacity); under oversize_policy::debt it is
//   admitted once the limiter is full and later requests wait out the excess (as Guava).
// - rate::inf() admits everything, n > burst included; rate zero spends the initial burst and never refills (a
//   refusal then has retry_after == nanoseconds::max(), and reset_after is nanoseconds::max() once anything is spent).
// - A `now` earlier than one already seen (a clock going backwards, or threads passing slightly stale times) sees no
//   more capacity than the latest `now` did — fewer, in fact: it never adds tokens and never over-admits; retry_after
//   is measured from the `now` passed in.
template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_gcra {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // A full limiter: `burst` requests fit at once, then one every 1/r.
  // Throws std::invalid_argument, naming the value, when burst < 1 or when burst·T does not fit in an int64 of
  // nanoseconds (about 292 years: e.g. a burst above ~106,000 at one request a day).
  basic_gcra(rate r, std::int64_t burst, oversize_policy policy = oversize_policy::reject)
      : rate_(r),
        burst_(check_burst(burst)),
        policy_(policy),
        inf_(r.is_inf()),
        zero_(r.is_zero()),
        interval_((inf_ || zero_) ? 1 : round_up_interval(r.interval_ns())),
        tau_(detail::sat_mul(burst_, interval_)) {
    if (tau_ == detail::ns_max) {
      throw std::invalid_argument("admit::gcra: burst " + std::to_string(burst) + " at rate " + r.to_string() +
                                  " spans more than the int64 range of nanoseconds (~292 years)");
    }
  }

  basic_gcra(const basic_gcra&) = delete;
  basic_gcra& operator=(const basic_gcra&) = delete;

  // Admits n at `now` if they fit (and consumes them), else changes nothing and returns false.
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) noexcept {
    assert(n >= 0 && "admit::gcra: n must not be negative");
    if (inf_ || n == 0) return true;
    return step(to_ns<Clock>(now), n, true).ok;
  }
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) noexcept { return try_acquire_at(Clock::now(), n); }

  // Like try_acquire_at, with the whole decision (redis-cell's CL.THROTTLE reply):
  // - limit: the burst;
  // - remaining: whole requests of one that would be admitted right after this decision (0..burst);
  // - retry_after: zero when admitted; else how long from `now` until this request would fit if nothing else
  //   happened; nanoseconds::max() when it never can (n > burst under the reject policy, or the rate is zero);
  // - reset_after: how long from `now` until the limiter is full again (TAT − now); zero when it is full.
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) noexcept {
    assert(n >= 0 && "admit::gcra: n must not be negative");
    decision d;
    d.limit = burst_;
    if (inf_) {
      d.admitted = true;
      d.remaining = burst_;
      return d;
    }
    const std::int64_t t = to_ns<Clock>(now);
    const outcome o =
        n == 0 ? outcome{true, state_.value.load(std::memory_order_acquire), effective(t), 0} : step(t, n, true);
    d.admitted = o.ok;
    d.retry_after = std::chrono::nanoseconds{o.wait};
    describe(o.state, o.t, d);
    return d;
  }
  [[nodiscard]] decision decide(std::int64_t n = 1) noexcept { return decide_at(Clock::now(), n); }

  // How long from `now` until n would be admitted, consuming nothing: zero when they fit now, nanoseconds::max()
  // when they never will (n > burst under the reject policy; rate zero and too little left).
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) const noexcept {
    assert(n >= 0 && "admit::gcra: n must not be negative");
    if (inf_ || n == 0) return std::chrono::nanoseconds{0};
    return std::chrono::nanoseconds{const_cast<basic_gcra*>(this)->step(to_ns<Clock>(now), n, false).wait};
  }
  [[nodiscard]] std::chrono::nanoseconds time_until_available(std::int64_t n = 1) const noexcept {
    return time_until_available_at(Clock::now(), n);
  }

  // Whole requests of one that would be admitted at `now` (the burst for rate inf). Consumes nothing.
  [[nodiscard]] std::int64_t remaining_at(time_point now) const noexcept {
    if (inf_) return burst_;
    decision d;
    describe(state_.value.load(std::memory_order_acquire), effective(to_ns<Clock>(now)), d);
    return d.remaining;
  }

  [[nodiscard]] rate get_rate() const noexcept { return rate_; }
  [[nodiscard]] std::int64_t burst() const noexcept { return burst_; }
  [[nodiscard]] oversize_policy policy() const noexcept { return policy_; }
  // The emission interval T actually enforced: the rate's interval rounded up to whole nanoseconds (0 for rate inf,
  // nanoseconds::max() for rate zero).
  [[nodiscard]] std::chrono::nanoseconds emission_interval() const noexcept {
    if (inf_) return std::chrono::nanoseconds{0};
    if (zero_) return std::chrono::nanoseconds::max();
    return std::chrono::nanoseconds{interval_};
  }

 private:
  struct outcome {
    bool ok = false;
    std::int64_t state = 0;  // TAT − τ after the decision
    std::int64_t t = 0;      // the effective now
    std::int64_t wait = 0;   // ns until the request fits (ns_max: never)
  };

  static std::int64_t check_burst(std::int64_t burst) {
    if (burst < 1) {
      throw std::invalid_argument("admit::gcra: burst must be at least 1, got " + std::to_string(burst));
    }
    return burst;
  }

  // Strictly up (as the token bucket), so that the limiter never admits more than the rate asked for.
  static std::int64_t round_up_interval(double ns) noexcept { return std::max<std::int64_t>(1, detail::ceil_ns(ns)); }

  // Rate zero: time stands still (every now is 0), so the state counts the tokens spent against a fixed burst.
  std::int64_t effective(std::int64_t t) const noexcept { return zero_ ? 0 : t; }

  // The one decision procedure, for admitting (commit) and for querying.
  outcome step(std::int64_t now_ns, std::int64_t n, bool commit) noexcept {
    const std::int64_t t = effective(now_ns);
    std::int64_t s = state_.value.load(std::memory_order_acquire);
    if (n > burst_ && policy_ == oversize_policy::reject) return {false, s, t, detail::ns_max};
    // A request fits when the first n·T (at most τ: an oversized request under debt needs a full limiter) of its cost
    // lies in the past; it is charged its whole cost.
    const std::int64_t check = detail::sat_mul(std::min(n, burst_), interval_);
    const std::int64_t charge = detail::sat_mul(n, interval_);
    const std::int64_t full = detail::sat_sub(t, tau_);  // the state of a full limiter at t
    for (;;) {
      const std::int64_t base = std::max(s, full);
      const std::int64_t ready = detail::sat_add(base, check);
      if (ready > t) return {false, s, t, zero_ ? detail::ns_max : detail::sat_sub(ready, t)};
      if (!commit) return {true, s, t, 0};
      const std::int64_t next = detail::sat_add(base, charge);
      if (state_.value.compare_exchange_weak(s, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return {true, next, t, 0};
      }
      // Lost a race (or a spurious failure): `s` now holds the fresh state; decide again.
    }
  }

  // remaining and reset_after for state `s` at effective time t.
  void describe(std::int64_t s, std::int64_t t, decision& d) const noexcept {
    const std::int64_t full = detail::sat_sub(t, tau_);
    const std::int64_t base = std::max(s, full);
    if (base < t) {
      // t − base <= τ when full is exact; the unsigned difference cannot overflow either way.
      const std::uint64_t spare = static_cast<std::uint64_t>(t) - static_cast<std::uint64_t>(base);
      const std::uint64_t whole = spare / static_cast<std::uint64_t>(interval_);
      d.remaining = static_cast<std::int64_t>(std::min(whole, static_cast<std::uint64_t>(burst_)));
    } else {
      d.remaining = 0;
    }
    if (base <= full) {
      d.reset_after = std::chrono::nanoseconds{0};
    } else if (zero_) {
      d.reset_after = std::chrono::nanoseconds::max();
    } else {
      d.reset_after =
          std::chrono::nanoseconds{std::max<std::int64_t>(0, detail::sat_sub(detail::sat_add(base, tau_), t))};
    }
  }

  // Hot: written by every admission, alone on its cache line. Starts "long ago": the limiter is full.
  struct alignas(64) hot_state {
    std::atomic<std::int64_t> value{detail::ns_min};
  };

  hot_state state_;
  const rate rate_;
  const std::int64_t burst_;
  const oversize_policy policy_;
  const bool inf_;
  const bool zero_;
  const std::int64_t interval_;  // T in ns (1 for the zero rate, whose state counts tokens)
  const std::int64_t tau_;       // burst·T, saturated
};

using gcra = basic_gcra<std::chrono::steady_clock>;

}  // namespace admit
