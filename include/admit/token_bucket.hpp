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
#include "admit/detail/saturating.hpp"
#include "admit/detail/seqlock.hpp"
#include "admit/detail/sleep.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/rate.hpp"
#include "admit/reservation.hpp"

namespace admit {

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_token_bucket {
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
    return step(to_ns<Clock>(now), n, mode::allow, 0).ok;
  }
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return try_acquire_at(Clock::now(), n); }

  // Like try_acquire_at, with the whole decision: limit (burst), remaining whole tokens, retry_after
  // (nanoseconds::max() when n can never fit), reset_after (time until the bucket is full).
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    const outcome o = step(to_ns<Clock>(now), n, mode::allow, 0);
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

  // Waits until n tokens are granted. Returns false at once when n can never be granted (n > burst under the reject
  // policy, or rate zero with too few tokens) or `stop` is already requested; returns false after giving the tokens
  // back when `stop` is requested during the wait. Waiters are granted in the order they called (each reserves its
  // place on the bucket's timeline), and a small request is not held back by a large one ahead of it beyond that
  // order. Sleeps on the clock, never polls.
  bool acquire(std::int64_t n = 1, std::stop_token stop = {}) {
    if (stop.stop_requested()) return false;
    reservation r = reserve(n);
    if (!r.ok()) return false;
    if (detail::sleep_until<Clock>(r.ready_at(), stop)) return true;
    r.cancel();
    return false;
  }

  // Waits until n tokens are granted, but only if that happens by `deadline`: a request that cannot be served by
  // then fails at once instead of sleeping in vain (and takes nothing). A deadline in the past only admits at once.
  bool try_acquire_until(time_point deadline, std::int64_t n = 1) {
    const time_point now = Clock::now();
    const std::int64_t max_wait = std::max<std::int64_t>(0, detail::sat_sub(to_ns<Clock>(deadline), to_ns<Clock>(now)));
    reservation r = reserve_within(to_ns<Clock>(now), n, max_wait);
    if (!r.ok()) return false;
    detail::sleep_until<Clock>(r.ready_at(), {});
    return true;
  }
  template <class Rep, class Period>
  bool try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1) {
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

// A claim on tokens now or in the future (x/time/rate's Reservation): an admit::basic_reservation<Clock> (ok(),
// tokens(), ready_at(), delay_from(t), delay(), as the pacer's and the warm-up limiter's) that can also be cancelled
// or settled, once. It derives publicly from basic_reservation because it is one — code that waits on any limiter's
// reservation takes it as `const basic_reservation<Clock>&` — and adds only the right to give tokens back; a copy of
// the base part is a plain value that carries no such right (so the slicing is harmless), and neither type has a
// virtual member (never delete one through a pointer to the base). Move-only; a moved-from reservation is not ok().
// Not thread-safe by itself (one owner), but its operations are safe against concurrent use of the bucket.
template <steady_clock_like Clock>
class basic_token_bucket<Clock>::reservation : public basic_reservation<Clock> {
  using base = basic_reservation<Clock>;

 public:
  reservation() = default;
  reservation(reservation&& other) noexcept { *this = std::move(other); }
  reservation& operator=(reservation&& other) noexcept {
    base::operator=(std::exchange(static_cast<base&>(other), base{}));
    bucket_ = std::exchange(other.bucket_, nullptr);
    time_to_act_ = other.time_to_act_;
    interval_ = other.interval_;
    inf_ = other.inf_;
    return *this;
  }

  // x/time/rate CancelAt: the caller will not act; gives back the tokens that reservations made after this one do not
  // depend on, unless the reservation is already due at `t` (then nothing). Idempotent: later calls do nothing.
  // Afterwards tokens() is 0; ok() and ready_at() are unchanged.
  void cancel_at(time_point t) {
    if (!this->ok() || inf_ || this->tokens() == 0 || bucket_ == nullptr) return;
    bucket_->cancel_reservation(to_ns<Clock>(t), this->tokens(), time_to_act_, interval_);
    this->clear_tokens();
  }
  void cancel() { cancel_at(Clock::now()); }

  // Settles the reservation at its actual cost once known (e.g. bytes actually sent): a smaller cost gives the
  // difference back to the bucket (capped at the burst), a larger one takes the difference (possibly into debt,
  // which later requests wait out). Can be called once; later calls, or calls after cancel, do nothing. Afterwards
  // tokens() is 0.
  void settle_at(time_point t, std::int64_t actual) {
    detail::check_n("admit::token_bucket::reservation::settle", actual, "actual");
    if (!this->ok() || inf_ || bucket_ == nullptr || this->tokens() == 0) return;
    const std::int64_t delta = this->tokens() - actual;
    if (delta != 0) {
      const std::int64_t tn = bucket_->effective_now(to_ns<Clock>(t));
      bucket_->give_back(tn, static_cast<double>(delta));
    }
    this->clear_tokens();
  }
  void settle(std::int64_t actual) { settle_at(Clock::now(), actual); }

 private:
  friend class basic_token_bucket;
  reservation(basic_token_bucket* b, std::int64_t n, std::int64_t time_to_act, double interval, bool inf) noexcept
      : base(n, from_ns<Clock>(time_to_act)), bucket_(b), time_to_act_(time_to_act), interval_(interval), inf_(inf) {}

  basic_token_bucket* bucket_ = nullptr;
  std::int64_t time_to_act_ = 0;  // ready_at() in nanoseconds, exactly (the bucket's unit)
  double interval_ = 0;  // the interval in force when the tokens were reserved (CancelAt restores at that rate)
  bool inf_ = false;
};

using token_bucket = basic_token_bucket<std::chrono::steady_clock>;

}  // namespace admit
