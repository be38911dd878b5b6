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
// The arithmetic on plain values lives in detail/token_bucket_math.hpp, shared with admit::keyed<token_bucket>.
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
#include <atomic>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/atomic_max.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/seqlock.hpp"
#include "admit/detail/sleep.hpp"
#include "admit/detail/token_bucket_math.hpp"
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
  basic_token_bucket(rate r, std::int64_t burst, oversize_policy policy = oversize_policy::reject) : policy_(policy) {
    const std::int64_t t = to_ns<Clock>(Clock::now());
    const config c = make_config(r, burst, t);
    write_config(c, r);  // no other thread can see the bucket yet: no sequence bump needed
    // "Long ago": below t - tol for every t, so the bucket starts full; every use of it saturates.
    state_.tat.store(detail::ns_min, std::memory_order_relaxed);
  }

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
  // admits at once. Other errors as acquire.
  wait_result try_acquire_until(time_point deadline, std::int64_t n = 1) {
    return wait(n, to_ns<Clock>(deadline), std::stop_token{});
  }
  template <class Rep, class Period>
  wait_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1) {
    const auto now = Clock::now();
    // Whole nanoseconds, rounded down (never wait longer than asked) and saturating (hours::max() waits "forever").
    const long double ns = std::chrono::duration<long double, std::nano>(timeout).count();
    const std::int64_t wait = !(ns > 0) ? 0 : ns >= 9.2e18L ? detail::ns_max : static_cast<std::int64_t>(ns);
    return try_acquire_until(from_ns<Clock>(detail::sat_add(to_ns<Clock>(now), wait)), n);
  }

  // --- Configuration -----------------------------------------------------------------------------------------------

  // Change the rate at `now`, keeping the tokens accrued up to `now` (and any debt of reservations made, which is
  // then paid back at the new rate) — x/time/rate SetLimitAt. Thread-safe; serialized with other setters; concurrent
  // decisions stay lock-free (one racing the change may be accounted at the old rate).
  void set_rate_at(time_point now, rate r) { reconfigure(to_ns<Clock>(now), &r, nullptr); }
  void set_rate(rate r) { set_rate_at(Clock::now(), r); }

  // Change the burst at `now`, keeping the tokens accrued up to `now` (capped at the new burst) — SetBurstAt.
  // Throws std::invalid_argument when negative.
  void set_burst_at(time_point now, std::int64_t burst) { reconfigure(to_ns<Clock>(now), nullptr, &burst); }
  void set_burst(std::int64_t burst) { set_burst_at(Clock::now(), burst); }

  // --- Observers ---------------------------------------------------------------------------------------------------

  // Tokens available at `now` (negative while reservations are outstanding; the burst when the rate is inf).
  [[nodiscard]] double tokens_at(time_point now) const noexcept {
    const snapshot s = load(effective_now(to_ns<Clock>(now)));
    if (s.cfg.inf()) return static_cast<double>(s.cfg.burst);
    return tokens_of(s.cfg, s.tat, s.t);
  }
  [[nodiscard]] double tokens() const noexcept { return tokens_at(Clock::now()); }
  // Whether reservations have put the bucket in debt at `now` (fewer than zero tokens): then nothing passes, not even
  // n == 0, until time_until_available_at(now, 0). False for the infinite and the zero rate. Consumes nothing.
  [[nodiscard]] bool in_debt_at(time_point now) const noexcept {
    const snapshot s = load(effective_now(to_ns<Clock>(now)));
    return detail::token_bucket_debt_wait(s.cfg, s.tat, s.t) != 0;
  }
  [[nodiscard]] bool in_debt() const noexcept { return in_debt_at(Clock::now()); }
  [[nodiscard]] rate get_rate() const { return configured_rate(); }
  [[nodiscard]] std::int64_t burst() const noexcept { return load(0).cfg.burst; }
  [[nodiscard]] oversize_policy policy() const noexcept { return policy_; }

 private:
  // The configuration, derived from rate and burst; published under a sequence lock so that a decision always sees
  // one consistent configuration together with a state that belongs to it.
  using config = detail::token_bucket_config;
  struct snapshot {
    config cfg;
    std::int64_t tat = 0;
    std::int64_t t = 0;  // the effective now (never earlier than the latest now seen)
  };
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

  // The rate as configured (its exact interval, before rounding), from the value write_config() stored.
  rate configured_rate() const {
    const double interval = config_.interval.load(std::memory_order_acquire);
    if (interval == 0) return rate::inf();
    if (std::isinf(interval)) return rate{};
    return rate::every(std::chrono::duration<double, std::nano>(interval));
  }

  // Throws std::invalid_argument naming the values when the burst is negative or its refill exceeds 2^62 ns.
  static config make_config(rate r, std::int64_t burst, std::int64_t now_ns) {
    return detail::make_token_bucket_config(r, burst, now_ns);
  }

  // A signed number of nanoseconds from a double, rounded up and saturating instead of overflowing.
  static std::int64_t ceil_signed_ns(double ns) noexcept {
    if (!(ns > -9.2e18)) return detail::ns_min;
    if (!(ns < 9.2e18)) return detail::ns_max;
    return static_cast<std::int64_t>(std::ceil(ns));
  }

  // Tokens held at effective time t for state tat (may be negative).
  static double tokens_of(const config& c, std::int64_t tat, std::int64_t t) noexcept {
    return detail::token_bucket_tokens(c, tat, t);
  }

  std::int64_t effective_now(std::int64_t t) const noexcept {
    return std::max(t, state_.last_now.load(std::memory_order_relaxed));
  }
  // Records `t` as seen. Called only after a committed change (the cache line is then this thread's already), so that
  // refusals stay read-only and threads that are refused do not fight over the line. Racy by design: a concurrent
  // smaller store can win, which only makes a later out-of-order `now` see slightly fewer tokens — never more.
  void note_now(std::int64_t t) noexcept {
    if (t > state_.last_now.load(std::memory_order_relaxed)) state_.last_now.store(t, std::memory_order_relaxed);
  }

  // A consistent (config, state) pair. Spins only while a setter is publishing a new configuration.
  // Always inlined (as step() and read_config()): g++ 12 otherwise calls them out of line and copies the structs
  // through the stack, tripling the instructions of a decision (bench/, callgrind).
  [[gnu::always_inline]] snapshot load(std::int64_t t) const noexcept {
    for (unsigned spins = 0;; ++spins) {
      const std::uint64_t seq = config_.seq.read_begin();
      if (detail::seqlock::writing(seq)) {
        // A setter is publishing (a handful of stores under its mutex). Should it be preempted meanwhile, give the CPU
        // away rather than spin against it.
        detail::seqlock::pause(spins);
        continue;
      }
      snapshot s;
      s.tat = state_.tat.load(std::memory_order_acquire);
      s.cfg = read_config();
      if (!config_.seq.read_validate(seq)) continue;
      s.t = t;
      return s;
    }
  }

  // The decision logic: one function for allow, reserve and query, so they cannot drift apart.
  [[gnu::always_inline]] outcome step(std::int64_t now_ns, std::int64_t n, mode m, std::int64_t max_wait) {
    detail::check_n("admit::token_bucket", n);
    const std::int64_t t = effective_now(now_ns);
    for (;;) {
      const snapshot s = load(t);
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
        if (m == mode::reserve) raise_last_event(o.time_to_act);
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
      if (m == mode::reserve) raise_last_event(time_to_act);
      std::int64_t expected = s.tat;
      if (!state_.tat.compare_exchange_weak(expected, new_tat, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        continue;  // lost a race: decide again on the fresh state (never a spurious refusal)
      }
      note_now(t);
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

  void raise_last_event(std::int64_t t) noexcept { detail::raise_to(state_.last_event, t, std::memory_order_release); }

  // The last event: x/time/rate's lastEvent, the time to act of the latest reservation. x/time/rate assigns it at
  // each reservation, so it moves back when a reservation acts earlier than the one before it (after a rate increase,
  // or after a cancellation gave tokens back). Here reservations raise state_.last_event without a lock; the times
  // they raise it with only grow while nothing gives tokens back or changes the configuration, so the maximum is the
  // latest. Cancellation and reconfiguration (under setter_) begin a new epoch instead: they fold the epoch's value
  // into epoch_start_event_ and reset last_event to "none yet", so the next reservation sets it, earlier or not.
  // Must be called under setter_.
  std::int64_t begin_event_epoch() noexcept {
    const std::int64_t raised = state_.last_event.exchange(detail::ns_min, std::memory_order_acq_rel);
    if (raised != detail::ns_min) epoch_start_event_ = raised;
    return epoch_start_event_;
  }

  // x/time/rate CancelAt, on the TAT: give back the tokens of a reservation that later reservations do not depend on.
  // The state is read before the last event and the give-back commits only if the state is still the one read: a
  // reservation that committed in between made its time visible first (step()), so it is either counted as "later"
  // or makes this attempt fail and start over — the restore is never computed without a reservation that depends on it.
  // A reservation that announced its time before this attempt's epoch began but commits after the give-back fails its
  // compare-and-swap (the state changed) and announces again, in the new epoch.
  void cancel_reservation(std::int64_t now_ns, std::int64_t n, std::int64_t time_to_act, double interval) {
    std::lock_guard lock(setter_);     // cancellations are rare; serialize them with each other and reconfiguration
    if (time_to_act < now_ns) return;  // already acted upon (x/time/rate compares with the caller's t)
    const std::int64_t t = effective_now(now_ns);
    for (;;) {
      const std::int64_t tat = state_.tat.load(std::memory_order_acquire);
      const std::int64_t last_event = begin_event_epoch();
      // At most n: x/time/rate gives back more than n when the last event is earlier than this reservation's time
      // (a reservation made after a rate increase, or after another cancellation), which can admit more than the
      // rate and burst allow.
      const double later = static_cast<double>(std::max<std::int64_t>(0, detail::sat_sub(last_event, time_to_act)));
      const double restore = static_cast<double>(n) - later / interval;
      if (restore <= 0) return;
      if (!give_back(t, restore, &tat)) continue;
      if (time_to_act == last_event) {
        // Nothing after it: the previous reservation's time is the latest again (unless a new one has set it since).
        const std::int64_t prev = detail::sat_sub(time_to_act, detail::sat_mul(n, static_cast<std::int64_t>(interval)));
        if (prev >= now_ns) epoch_start_event_ = prev;
      }
      return;
    }
  }

  // Adds `tokens` (negative: takes them, possibly into debt) at effective time t, capped at the burst. With
  // `expected_tat`, only if the state is still that value (returns false otherwise, changing nothing).
  bool give_back(std::int64_t t, double tokens, const std::int64_t* expected_tat = nullptr) noexcept {
    for (;;) {
      const snapshot s = load(t);
      if (s.cfg.inf()) return true;
      const config& c = s.cfg;
      const std::int64_t at = c.zero() ? c.frozen : t;
      const std::int64_t base = std::max(s.tat, detail::sat_sub(at, c.tol));
      // Rounded towards no change (a refund never gives back more than owed, a charge never takes less).
      const std::int64_t delta = -ceil_signed_ns(-tokens * c.interval());
      const std::int64_t new_tat = std::max(detail::sat_sub(base, delta), detail::sat_sub(at, c.tol));
      if (expected_tat && s.tat != *expected_tat) return false;
      std::int64_t expected = s.tat;
      if (state_.tat.compare_exchange_weak(expected, new_tat, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        return true;
      }
      if (expected_tat) return false;
    }
  }

  void reconfigure(std::int64_t now_ns, const rate* new_rate, const std::int64_t* new_burst) {
    std::lock_guard lock(setter_);
    const std::int64_t t = effective_now(now_ns);
    note_now(t);
    const config old = read_config();
    const rate old_rate = configured_rate();
    const rate next_rate = new_rate ? *new_rate : old_rate;
    config next = make_config(next_rate, new_burst ? *new_burst : old.burst, t);
    if (!new_rate && old.zero()) next.frozen = old.frozen;  // a burst change does not restart a stopped clock

    const std::uint64_t seq = config_.seq.write_begin();  // odd: decisions wait for the new configuration
    // Reservations from now on set the last event afresh: after a rate increase they act earlier than those before.
    begin_event_epoch();
    std::int64_t cur = state_.tat.load(std::memory_order_acquire);
    for (;;) {
      // Tokens held at t under the old configuration (the bucket is full after an infinite rate, as in x/time/rate).
      double tokens = old.inf() ? static_cast<double>(next.burst) : tokens_of(old, cur, t);
      tokens = std::min(tokens, static_cast<double>(next.burst));
      const std::int64_t at = next.zero() ? next.frozen : t;
      std::int64_t converted = next.inf() ? cur : detail::sat_sub(at, ceil_signed_ns(tokens * next.interval()));
      // A converted state equal to the old one would let a decision computed under the old configuration commit
      // against the new one (ABA); one nanosecond of difference makes its CAS fail and retry.
      // (A burst change keeps the interval, so the same value means the same thing and needs no nudge.)
      if (converted == cur && next_rate != old_rate) converted = detail::sat_add(converted, 1);
      if (state_.tat.compare_exchange_weak(cur, converted, std::memory_order_acq_rel, std::memory_order_acquire)) {
        break;
      }
    }
    write_config(next, next_rate);
    config_.seq.write_end(seq);
  }

  // The configuration's fields, stored and loaded as detail::seqlock prescribes (release / acquire, no fences).
  void write_config(const config& c, rate r) noexcept {
    detail::seqlock::store(config_.interval, r.interval_ns());
    detail::seqlock::store(config_.burst, c.burst);
    detail::seqlock::store(config_.cost1, c.cost1);
    detail::seqlock::store(config_.tol, c.tol);
    detail::seqlock::store(config_.frozen, c.frozen);
  }
  [[gnu::always_inline]] config read_config() const noexcept {
    config c;
    c.burst = detail::seqlock::load(config_.burst);
    c.cost1 = detail::seqlock::load(config_.cost1);
    c.tol = detail::seqlock::load(config_.tol);
    c.frozen = detail::seqlock::load(config_.frozen);
    return c;
  }

  // Hot, written by every admission: its own cache line.
  struct alignas(64) hot_state {
    std::atomic<std::int64_t> tat{0};
    std::atomic<std::int64_t> last_now{detail::ns_min};    // the latest `now` of a committed change
    std::atomic<std::int64_t> last_event{detail::ns_min};  // the latest time_to_act of this epoch's reservations
  };
  // Read-mostly: another cache line.
  struct alignas(64) config_state {
    detail::seqlock seq;  // publishes the fields below together (reconfigure)
    std::atomic<double> interval{
        0};  // the configured rate's exact interval_ns(), for get_rate(); not read by decisions
    std::atomic<std::int64_t> burst{0};
    std::atomic<std::int64_t> cost1{0};
    std::atomic<std::int64_t> tol{0};
    std::atomic<std::int64_t> frozen{0};
  };

  hot_state state_;
  config_state config_;
  const oversize_policy policy_;
  std::mutex setter_;  // serializes reconfiguration and cancellation; never taken by a decision
  std::int64_t epoch_start_event_ = detail::ns_min;  // the last event when the epoch began (begin_event_epoch); setter_
};

using token_bucket = basic_token_bucket<std::chrono::steady_clock>;

}  // namespace admit

#include "admit/detail/token_bucket_reservation.hpp"  // defines basic_token_bucket<Clock>::reservation
