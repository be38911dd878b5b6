// admit/token_bucket.hpp — a token bucket with the semantics of Go's golang.org/x/time/rate, lock-free.
//
// The bucket holds up to `burst` tokens, starts full and refills at `rate`. `try_acquire` takes tokens if they are
// there (x/time/rate AllowN); `reserve` takes them now or in the future and says how long to wait (ReserveN), and a
// reservation can be cancelled (CancelAt) or settled at its actual cost; `acquire`/`try_acquire_for/until` wait.
//
//   admit::token_bucket bucket{admit::rate::per_second(100), 10};
//   if (bucket.try_acquire()) serve(); else reject();
//
// Representation. The whole state is one int64, the "theoretical arrival time" (TAT) in nanoseconds: the instant at
// which the bucket was (or will be) empty, so that tokens(t) = min(burst, (t - tat) / interval). Taking n tokens moves
// it by n intervals; a reservation into the future is a TAT past now (negative tokens, as x/time/rate allows). One
// compare-and-swap commits a decision; a lost CAS retries with the fresh state — it never turns into a refusal. A
// refusal writes nothing. Nothing refills in the background: the state is brought up to date lazily from `now`.
// The interval is rounded up to whole nanoseconds, so the bucket never admits more than rate·w + burst in any
// window w, and a full burst always fits at once.
// The arithmetic on plain values lives in detail/token_bucket_math.hpp, shared with admit::keyed<token_bucket>; the
// state, its configuration and what changes them outside a decision (reconfiguration, cancellation) in
// detail/token_bucket_state.hpp; the reservation in detail/token_bucket_reservation.hpp.
//
// Deliberate differences from x/time/rate:
// - A `now` earlier than that of the latest admission (or reconfiguration) is treated as that later `now`: it never
//   adds tokens, and going forward again does not count the same interval twice. (A refusal records nothing; a later
//   `now` that was refused changes nothing a stale caller could gain from.) (x/time/rate moves its clock back and then
//   refills the interval again, admitting more than rate and burst allow — its own tests say "should violate
//   Limit,Burst".)
// - With rate zero x/time/rate mutates the burst; here the bucket simply stops refilling: the tokens present at the
//   change (or the initial burst) can be spent, never more.
// - Cancelling a reservation twice restores its tokens once, and a cancellation never restores more than the
//   reservation's n (x/time/rate can, when the latest reservation acts earlier than the cancelled one, e.g. after a
//   rate increase: admitting more than the rate and burst allow).
// - Negative n throws std::invalid_argument; oversize_policy::debt (not in x/time/rate) serves n above the burst.
// - n == 0 is as in x/time/rate (refused, or waited for, while in debt). The rate's interval is rounded up to whole
//   nanoseconds (see above); x/time/rate computes in float64 seconds.
// See docs/algorithms.md for the whole list.
//
// Waiter bound and metrics (detail/rate_limiter_base.hpp): set_max_waiters(k) lets at most k callers wait at once
// (the next that would have to wait fails with errc::queue_full); enable_metrics() counts every decision.
//
// Counts: a negative n throws std::invalid_argument, in every build, before anything is read or changed (so every
// member taking n may throw).
#pragma once

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/sleep.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/detail/token_bucket_state.hpp"
#include "admit/rate.hpp"
#include "admit/reservation.hpp"
#include "admit/wait_result.hpp"

namespace admit {

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_token_bucket : public detail::rate_limiter_base {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  class reservation;

  // A full bucket of `burst` tokens refilling at `r`. Burst zero admits nothing but n == 0 (unless the rate is inf).
  // Throws std::invalid_argument, naming the values, when burst is negative or when refilling the whole burst takes
  // more than 2^62 ns (146 years: e.g. a burst above 4.6e12 at 1000/s), the range of the nanosecond state.
  basic_token_bucket(rate r, std::int64_t burst, oversize_policy policy = oversize_policy::reject)
      : state_(r, burst, to_ns<Clock>(Clock::now())), policy_(policy) {}

  basic_token_bucket(const basic_token_bucket&) = delete;
  basic_token_bucket& operator=(const basic_token_bucket&) = delete;

  // --- Never waits -------------------------------------------------------------------------------------------------

  // x/time/rate AllowN: takes n tokens if the bucket holds them at `now`, else takes nothing and returns false.
  // n > burst never succeeds (unless the rate is inf, or under oversize_policy::debt with a full bucket). n == 0 takes
  // nothing and, as AllowN(t, 0), is false while the bucket is in debt (in_debt_at).
  // Lock-free, allocation-free; O(1) expected (a CAS retry loop under contention).
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) {
    return record_try(step(to_ns<Clock>(now), n, mode::allow, 0).ok, n);
  }
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return try_acquire_at(Clock::now(), n); }

  // Like try_acquire_at, with the whole decision: limit (burst), remaining whole tokens, retry_after
  // (nanoseconds::max() when n can never fit), reset_after (time until the bucket is full).
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    const outcome o = step(to_ns<Clock>(now), n, mode::allow, 0);
    record_try(o.ok, n);
    return detail::token_bucket_describe(o.cfg, o.ok, o.wait, o.tat, o.t);
  }
  [[nodiscard]] decision decide(std::int64_t n = 1) { return decide_at(Clock::now(), n); }

  // How long from `now` until n tokens would be there, consuming nothing: zero when they are there now,
  // nanoseconds::max() when they never will be (n above the burst, or the rate is zero and the bucket is short).
  // For n == 0: how long until the debt of the reservations is paid (zero when not in debt).
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) const {
    const outcome o = const_cast<basic_token_bucket*>(this)->step(to_ns<Clock>(now), n, mode::query, 0);
    return std::chrono::nanoseconds{o.wait};
  }
  [[nodiscard]] std::chrono::nanoseconds time_until_available(std::int64_t n = 1) const {
    return time_until_available_at(Clock::now(), n);
  }

  // --- Reservations (x/time/rate ReserveN) -------------------------------------------------------------------------

  // Takes n tokens now or in the future. The reservation is ok() unless n exceeds the burst (reject policy) or the
  // rate is zero and the bucket cannot cover n; its delay says how long the caller must wait before acting (n == 0:
  // until the bucket is out of debt, as ReserveN(t, 0); it takes nothing, and cancelling it gives nothing back). A
  // caller that will not act must cancel() so the tokens go back. The reservation refers to this bucket: it must not
  // outlive it. Lock-free.
  [[nodiscard]] reservation reserve_at(time_point now, std::int64_t n = 1) {
    return reserve_within(to_ns<Clock>(now), n, detail::ns_max);
  }
  [[nodiscard]] reservation reserve(std::int64_t n = 1) { return reserve_at(Clock::now(), n); }

  // As reserve_at, but only if the caller would have to wait at most `max_wait` (x/time/rate's maxFutureReserve):
  // otherwise the reservation is not ok() and nothing is taken. A negative max_wait is treated as zero.
  [[nodiscard]] reservation reserve_at(time_point now, std::int64_t n, duration max_wait) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(max_wait).count();
    return reserve_within(to_ns<Clock>(now), n, std::max<std::int64_t>(0, ns));
  }

  // --- Waiting (x/time/rate WaitN) ---------------------------------------------------------------------------------

  // Waits until n tokens are granted. Waiters are granted in the order they called (each reserves its place on the
  // bucket's timeline), and a small request is not held back by a large one ahead of it beyond that order. Sleeps on
  // the clock, never polls. The result (admit/wait_result.hpp) is true when granted; otherwise error() says why, and
  // nothing is taken: exceeds_capacity at once (n > burst under the reject policy, or rate zero with too few
  // tokens), queue_full at once (max_waiters() callers already waiting; a request granted at once never waits and is
  // never refused for the bound), cancelled when `stop` is requested before the call or during the wait (the tokens
  // are then given back as reservation::cancel does).
  wait_result acquire(std::int64_t n = 1, std::stop_token stop = {}) {
    return wait(n, detail::ns_max, std::move(stop));
  }

  // Waits until n tokens are granted, but only if that happens by `deadline`: a request that cannot be served by
  // then fails at once with timeout instead of sleeping in vain (and takes nothing). A deadline in the past only
  // admits at once. Other errors as acquire (cancelled by `stop`: a deadline and a cancellation, as Go's WaitN with a
  // context that has both).
  wait_result try_acquire_until(time_point deadline, std::int64_t n = 1, std::stop_token stop = {}) {
    return wait(n, to_ns<Clock>(deadline), std::move(stop));
  }
  template <class Rep, class Period>
  wait_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1,
                              std::stop_token stop = {}) {
    const auto now = Clock::now();
    // Whole nanoseconds, rounded down (never wait longer than asked) and saturating (hours::max() waits "forever").
    const long double ns = std::chrono::duration<long double, std::nano>(timeout).count();
    const std::int64_t wait = !(ns > 0) ? 0 : ns >= 9.2e18L ? detail::ns_max : static_cast<std::int64_t>(ns);
    return try_acquire_until(from_ns<Clock>(detail::sat_add(to_ns<Clock>(now), wait)), n, std::move(stop));
  }

  // --- Configuration -----------------------------------------------------------------------------------------------

  // Change the rate at `now`, keeping the tokens accrued up to `now` (and any debt of reservations made, which is
  // then paid back at the new rate) — x/time/rate SetLimitAt. Thread-safe; serialized with other setters; concurrent
  // decisions stay lock-free (one racing the change may be accounted at the old rate).
  void set_rate_at(time_point now, rate r) { state_.reconfigure(to_ns<Clock>(now), &r, nullptr); }
  void set_rate(rate r) { set_rate_at(Clock::now(), r); }

  // Change the burst at `now`, keeping the tokens accrued up to `now` (capped at the new burst) — SetBurstAt.
  // Throws std::invalid_argument when negative.
  void set_burst_at(time_point now, std::int64_t burst) { state_.reconfigure(to_ns<Clock>(now), nullptr, &burst); }
  void set_burst(std::int64_t burst) { set_burst_at(Clock::now(), burst); }

  // --- Observers ---------------------------------------------------------------------------------------------------

  // Tokens available at `now` (negative while reservations are outstanding; the burst when the rate is inf).
  [[nodiscard]] double tokens_at(time_point now) const noexcept {
    const snapshot s = state_.load(state_.effective_now(to_ns<Clock>(now)));
    if (s.cfg.inf()) return static_cast<double>(s.cfg.burst);
    return detail::token_bucket_tokens(s.cfg, s.tat, s.t);
  }
  [[nodiscard]] double tokens() const noexcept { return tokens_at(Clock::now()); }
  // Whether reservations have put the bucket in debt at `now` (fewer than zero tokens): then nothing passes, not even
  // n == 0, until time_until_available_at(now, 0). False for the infinite and the zero rate. Consumes nothing.
  [[nodiscard]] bool in_debt_at(time_point now) const noexcept {
    const snapshot s = state_.load(state_.effective_now(to_ns<Clock>(now)));
    return detail::token_bucket_debt_wait(s.cfg, s.tat, s.t) != 0;
  }
  [[nodiscard]] bool in_debt() const noexcept { return in_debt_at(Clock::now()); }
  [[nodiscard]] rate get_rate() const { return state_.configured_rate(); }
  [[nodiscard]] std::int64_t burst() const noexcept { return state_.load(0).cfg.burst; }
  [[nodiscard]] oversize_policy policy() const noexcept { return policy_; }

 private:
  // The state, its configuration and what changes them outside a decision: detail/token_bucket_state.hpp.
  using config = detail::token_bucket_config;
  using snapshot = detail::token_bucket_state::snapshot;
  enum class mode { allow, reserve, query };
  struct outcome {
    bool ok = false;
    std::int64_t wait = 0;         // ns from t until the tokens are there (ns_max: never)
    std::int64_t time_to_act = 0;  // reserve: when the caller may act
    std::int64_t tat = 0;          // the state after the decision
    std::int64_t t = 0;
    config cfg;
    bool never = false;  // the tokens never will be there (see token_bucket_step_result)
  };

  // The decision logic: one function for allow, reserve and query, so they cannot drift apart.
  [[gnu::always_inline]] outcome step(std::int64_t now_ns, std::int64_t n, mode m, std::int64_t max_wait) {
    detail::check_n("admit::token_bucket", n);
    const std::int64_t t = state_.effective_now(now_ns);
    for (;;) {
      const snapshot s = state_.load(t);
      outcome o;
      o.cfg = s.cfg;
      o.t = t;
      o.tat = s.tat;
      o.time_to_act = now_ns;
      if (s.cfg.inf()) {
        o.ok = true;
        return o;
      }
      if (n == 0) {
        // x/time/rate's answer to n == 0: nothing to take, but not while the bucket is in debt (AllowN is false,
        // ReserveN waits until the debt is paid). Nothing is committed; a reservation still announces its time.
        o.wait = detail::token_bucket_debt_wait(s.cfg, s.tat, t);
        if (m == mode::query) return o;
        if (m == mode::allow ? o.wait != 0 : o.wait > max_wait) return o;
        o.time_to_act = o.wait == 0 ? now_ns : detail::sat_add(t, o.wait);
        if (m == mode::reserve) state_.raise_last_event(o.time_to_act);
        o.ok = true;
        return o;
      }
      const detail::token_bucket_step_result r = detail::token_bucket_step(s.cfg, policy_, s.tat, t, n);
      o.wait = r.wait;
      o.never = r.never;
      if (r.never) return o;  // n above the burst, or the rate is zero and the bucket is short
      const std::int64_t new_tat = r.new_tat;
      if (m == mode::query) return o;
      if (m == mode::allow ? o.wait != 0 : o.wait > max_wait) return o;
      const std::int64_t time_to_act = o.wait == 0 ? now_ns : detail::sat_add(t, o.wait);
      // A reservation announces its time before it commits, so that a cancellation that sees the commit also sees
      // the time (cancel_reservation): too high a last_event only makes a cancellation give back less, never more.
      if (m == mode::reserve) state_.raise_last_event(time_to_act);
      if (!state_.try_commit(s.tat, new_tat)) {
        continue;  // lost a race: decide again on the fresh state (never a spurious refusal)
      }
      state_.note_now(t);
      o.ok = true;
      o.tat = new_tat;
      o.time_to_act = time_to_act;
      return o;
    }
  }

  friend struct detail::limiter_access;
  bool try_acquire_quiet(std::int64_t n) { return step(to_ns<Clock>(Clock::now()), n, mode::allow, 0).ok; }

  // The waits: granted at once (no place taken), or refused at once (exceeds_capacity, timeout when the tokens come
  // after `deadline_ns`, queue_full), or a place under the bound, a reservation and a sleep until it is due.
  wait_result wait(std::int64_t n, std::int64_t deadline_ns, std::stop_token stop) {
    detail::check_n("admit::token_bucket", n);
    if (stop.stop_requested()) return end_at_once(errc::cancelled, n);
    const time_point start = Clock::now();
    const std::int64_t t = to_ns<Clock>(start);
    const outcome now = step(t, n, mode::reserve, 0);  // a reservation due at once is a grant
    if (now.ok) return end_at_once(errc{}, n);
    if (now.never) return end_at_once(errc::exceeds_capacity, n);
    const std::int64_t max_wait =
        deadline_ns == detail::ns_max ? detail::ns_max : std::max<std::int64_t>(0, detail::sat_sub(deadline_ns, t));
    if (now.wait > max_wait) return end_at_once(errc::timeout, n);
    const detail::waiter_gate::slot place = gate().enter();
    if (!place) return end_at_once(errc::queue_full, n);
    reservation r = reserve_within(t, n, max_wait);
    if (!r.ok()) {  // others reserved (or the configuration changed) in between
      const bool never = step(t, n, mode::query, 0).never;
      return end_after<Clock>(never ? errc::exceeds_capacity : errc::timeout, n, start);
    }
    if (detail::sleep_until<Clock>(r.ready_at(), std::move(stop))) return end_after<Clock>(errc{}, n, start);
    r.cancel();
    return end_after<Clock>(errc::cancelled, n, start);
  }

  reservation reserve_within(std::int64_t now_ns, std::int64_t n, std::int64_t max_wait) {
    const outcome o = step(now_ns, n, mode::reserve, max_wait);
    if (!o.ok) return reservation{};
    return reservation{this, n, o.time_to_act, o.cfg.interval(), o.cfg.inf()};
  }

  detail::token_bucket_state state_;
  const oversize_policy policy_;
};

using token_bucket = basic_token_bucket<std::chrono::steady_clock>;

}  // namespace admit

#include "admit/detail/token_bucket_reservation.hpp"  // defines basic_token_bucket<Clock>::reservation
