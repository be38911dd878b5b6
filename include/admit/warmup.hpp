// admit/warmup.hpp — a rate limiter that warms up (Guava's RateLimiter.create(rate, warmupPeriod), SmoothWarmingUp).
//
// A backend that has been idle (cold caches, closed connections) should not take full load at once. This limiter
// starts cold, serving requests `cold_factor` times slower than the stable rate, and speeds up as it is used until,
// after about `warmup_period` of saturated demand, it runs at the stable rate. Left idle, it goes cold again: after
// `warmup_period` of idleness (plus the last request's cost) it is fully cold.
//
//   admit::warmup w{admit::rate::per_second(2), std::chrono::seconds(4)};   // cold: 1.5s apart; warm: 0.5s apart
//   auto wait = w.reserve().delay();   // Guava's acquire() from cold: 0, 1.375s, 1.125s, 0.875s, 0.625s, 0.5s...
//
// Semantics are Guava's, number for number (tests check Guava's own sequences): idle time banks "stored permits" at
// one per warmup_period / max_permits, up to max_permits; a request spends stored permits first, and a stored permit
// costs between the stable interval (at or below threshold_permits) and the cold interval (at max_permits), the cost
// being the integral of that line. "The cost of a request is paid by the next one": a request is admitted whenever no
// earlier debt is outstanding — whatever its size (Guava's oversize behaviour: oversize_policy::debt) — and its own
// cost pushes the next free time forward. Durations are nanoseconds (Guava: microseconds), costs rounded up.
//
// Representation. Guava's state is two numbers — the next free time and the stored permits — and both are in use at
// once (a request served from stored permits leaves permits *and* a debt behind), so no single "zero time" can hold
// it: encoding both in one time point lets a cold limiter admit several requests at once instead of one. The two live
// on one cache line under a sequence number: a decision reads them optimistically and commits with a
// compare-and-swap of the sequence number, after which it stores the two values (three stores, no system call). A
// refusal reads one word and writes nothing; a lost compare-and-swap retries, never refusing a request that fits. The
// forms that read the clock read it after the state they compare it with (Guava reads it under its lock): a reading
// older than another caller's admission is never compared with it, which would refuse a request that fits.
// The price: a committing thread preempted between its compare-and-swap and its last store makes other decisions that
// need both values spin (then yield) until it runs again; refusals and time_until_available never wait. Nothing runs in
// the background: idle time is credited lazily from `now`.
//
// Waiter bound and metrics (detail/rate_limiter_base.hpp): set_max_waiters(k) lets at most k callers sleep out their
// debt at once (the next that would have to sleep fails with errc::queue_full, charging nothing); enable_metrics()
// counts every decision.
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
#include <stdexcept>
#include <stop_token>
#include <string>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/format_double.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/seqlock.hpp"
#include "admit/detail/sleep.hpp"
#include "admit/rate.hpp"
#include "admit/reservation.hpp"
#include "admit/wait_result.hpp"

namespace admit {

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_warmup : public detail::rate_limiter_base {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // Guava's RateLimiter.create(stable, warmup_period) with its coldFactor: stable interval s = 1 / stable, cold
  // interval c = cold_factor * s, threshold_permits = warmup_period / (2 s), max_permits = threshold_permits +
  // 2 warmup_period / (s + c). Starts cold (max_permits stored). A zero warmup period gives a plain smooth limiter
  // (one request every s, no stored permits); an infinite rate admits everything. Throws std::invalid_argument naming
  // the value when the rate is zero, the warmup period negative, or cold_factor not a finite number > 1 (NaN too; a
  // cold factor of 1 would be no warm-up at all — Guava's public API never passes one either).
  basic_warmup(rate stable, std::chrono::nanoseconds warmup_period, double cold_factor = 3.0)
      : stable_rate_(stable), warmup_period_(warmup_period), cold_factor_(cold_factor) {
    if (stable.is_zero()) throw std::invalid_argument("admit::warmup: the stable rate must be positive, got 0/s");
    if (warmup_period.count() < 0) {
      throw std::invalid_argument("admit::warmup: the warmup period must not be negative, got " +
                                  std::to_string(warmup_period.count()) + "ns");
    }
    if (!(cold_factor > 1.0) || std::isinf(cold_factor)) {
      throw std::invalid_argument("admit::warmup: the cold factor must be a finite number greater than 1, got " +
                                  detail::format_double(cold_factor));
    }
    stable_ = stable.interval_ns();
    const double w = static_cast<double>(warmup_period.count());
    if (stable_ > 0) {
      threshold_ = 0.5 * w / stable_;
      max_ = threshold_ + 2.0 * w / (stable_ + stable_ * cold_factor);
      if (max_ > threshold_) slope_ = (stable_ * cold_factor - stable_) / (max_ - threshold_);
      if (max_ > 0) cool_down_ = w / max_;
    }
    state_.stored.store(max_, std::memory_order_relaxed);  // starts cold
  }

  basic_warmup(const basic_warmup&) = delete;
  basic_warmup& operator=(const basic_warmup&) = delete;

  // --- Never waits -------------------------------------------------------------------------------------------------

  // Guava's tryAcquire(n, 0): admits — and charges the cost of `n` permits to whoever comes next — when no earlier
  // debt is outstanding at `now`; else false, changing nothing. Any n fits (n == 0 always, charging nothing). A `now`
  // earlier than the next free time is refused, so a clock going backwards never over-admits. try_acquire() reads the
  // clock after the state it compares it with (as Guava reads its clock under its lock): a clock reading older than
  // another caller's admission is read again, never turned into a refusal. Thread safety: safe from any number of
  // threads; a refusal is one atomic load (and the clock read); a lost race retries instead of refusing.
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return record_try(admit_one(clock_now{}, n), n); }
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) {
    return record_try(admit_one(given_now{to_ns<Clock>(now)}, n), n);
  }

  // try_acquire_at with the details: limit = 1 (one request, of any size, is admitted whenever no debt is
  // outstanding); remaining = 1 if another request would be admitted right after this decision, else 0;
  // retry_after = the outstanding debt (never nanoseconds::max(): every size fits eventually); reset_after = time
  // until the limiter is fully cold again if left idle. decide() reads the clock after the state, as try_acquire().
  // Thread safety: as try_acquire_at.
  [[nodiscard]] decision decide(std::int64_t n = 1) { return recorded(decide_with(clock_now{}, n), n); }
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    return recorded(decide_with(given_now{to_ns<Clock>(now)}, n), n);
  }

  // How long from `now` until a request of `n` permits would be admitted — the outstanding debt, whatever n (0 =
  // now). Consumes nothing. time_until_available() reads the clock after the state. Thread safety: one atomic load.
  [[nodiscard]] std::chrono::nanoseconds time_until_available(std::int64_t n = 1) const {
    return debt_with(clock_now{}, n);
  }
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) const {
    return debt_with(given_now{to_ns<Clock>(now)}, n);
  }

  // Guava's reserve(n): charges `n` permits now. The reservation (admit/reservation.hpp) is always ok(), holds n
  // tokens, and is ready_at() the end of the debt outstanding at `now` (`now` itself when there is none), so
  // delay_from(now) is Guava's wait. Never refuses; cannot be undone. n == 0 charges nothing and is ready at `now`.
  // reserve() reads the clock after the state (as try_acquire()) and is ready from that reading on. Edge case: costs
  // that would push the next free time past year ~2262 saturate, exhausting the limiter. Thread safety: as
  // try_acquire_at.
  basic_reservation<Clock> reserve(std::int64_t n = 1) { return reserve_with(clock_now{}, n); }
  basic_reservation<Clock> reserve_at(time_point now, std::int64_t n = 1) {
    return reserve_with(given_now{to_ns<Clock>(now)}, n);
  }

  // --- Waits (detail::sleep_until on Clock) --------------------------------------------------------------------------

  // Guava's acquire(n): charges `n` permits and sleeps out the debt before them. The result (admit/wait_result.hpp) is
  // true when through; otherwise error() says why: cancelled when `stop` is requested first (at once, charging
  // nothing, when already requested; a stopped caller's charge is given back when nobody was charged after it — the
  // state is then exactly as if it had never come — otherwise it stays, the callers behind keep their times), or
  // queue_full (max_waiters() callers already sleeping: rejected at once, charging nothing; a request admitted at once
  // never sleeps and is never refused for the bound). Thread safety: any number of threads; they go in the order
  // they were charged.
  wait_result acquire(std::int64_t n = 1, std::stop_token stop = {}) {
    return wait(n, detail::ns_max, std::move(stop));
  }

  // Guava's tryAcquire(n, timeout): fails at once with timeout, charging nothing, when the debt outstanding would
  // outlast `deadline`; otherwise charges `n` permits, sleeps out the debt and succeeds. A deadline in the past (or a
  // zero or negative timeout) is try_acquire(). queue_full and cancelled (by `stop`) as acquire. Thread safety: as
  // acquire.
  wait_result try_acquire_until(time_point deadline, std::int64_t n = 1, std::stop_token stop = {}) {
    return wait(n, to_ns<Clock>(deadline), std::move(stop));
  }
  template <class Rep, class Period>
  wait_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1,
                              std::stop_token stop = {}) {
    return try_acquire_until(to_time_point(detail::sat_add(to_ns<Clock>(Clock::now()), detail::ceil_ns(timeout))), n,
                             std::move(stop));
  }

  // --- Introspection (thread safe) ---------------------------------------------------------------------------------

  // Stored permits at `now`: max_permits() when fully cold, 0 when fully warm. Idle time after the next free time is
  // credited; while a debt is outstanding it is the permits the last charge left.
  [[nodiscard]] double stored_permits_at(time_point now) const noexcept {
    const snapshot s = load();
    const std::int64_t t = to_ns<Clock>(now);
    return t > s.next_free ? refilled(s.stored, t, s.next_free) : s.stored;
  }
  [[nodiscard]] double max_permits() const noexcept { return max_; }
  [[nodiscard]] double threshold_permits() const noexcept { return threshold_; }
  [[nodiscard]] rate stable_rate() const noexcept { return stable_rate_; }
  [[nodiscard]] std::chrono::nanoseconds warmup_period() const noexcept { return warmup_period_; }
  [[nodiscard]] double cold_factor() const noexcept { return cold_factor_; }

 private:
  struct snapshot {
    std::uint64_t seq;
    std::int64_t next_free;
    double stored;
  };
  struct grant {
    std::int64_t at;         // when the request may go: max(next free time, now)
    std::int64_t next_free;  // the next free time after it
    double stored;           // stored permits left
  };
  struct claimed {
    bool ok;
    std::int64_t t;  // the `now` it was decided at
    snapshot before;
    grant g;
  };

  [[nodiscard]] bool infinite() const noexcept { return stable_ == 0; }

  friend struct detail::limiter_access;
  bool try_acquire_quiet(std::int64_t n) { return admit_one(clock_now{}, n); }
  decision recorded(const decision& d, std::int64_t n) const {
    record_try(d.admitted, n);
    return d;
  }

  // The waits: through at once (no place taken), or refused at once (timeout when the debt outlasts `latest`,
  // queue_full), or a place under the bound, a charge and a sleep; gives the charge back on stop.
  wait_result wait(std::int64_t n, std::int64_t latest, std::stop_token stop) {
    detail::check_n("admit::warmup", n);
    if (stop.stop_requested()) return end_at_once(errc::cancelled, n);
    if (n == 0 || infinite() || admit_one(clock_now{}, n)) return end_at_once(errc{}, n);
    const time_point start = Clock::now();
    if (state_.next_free.load(std::memory_order_acquire) > std::max(latest, to_ns<Clock>(start))) {
      return end_at_once(errc::timeout, n);
    }
    const detail::waiter_gate::slot place = gate().enter();
    if (!place) return end_at_once(errc::queue_full, n);
    const claimed c = claim(clock_now{}, n, latest);
    if (!c.ok) return end_after<Clock>(errc::timeout, n, start);  // others were charged in between
    if (c.g.at <= c.t || detail::sleep_until<Clock>(to_time_point(c.g.at), std::move(stop))) {
      return end_after<Clock>(errc{}, n, start);
    }
    give_back(c);
    return end_after<Clock>(errc::cancelled, n, start);
  }

  // Where a decision's `now` comes from: the caller (the *_at forms), or the clock (read after the state it is
  // compared with; see admit_one).
  struct given_now {
    std::int64_t t;
    static constexpr bool reads_clock = false;
    std::int64_t operator()() const noexcept { return t; }
  };
  struct clock_now {
    static constexpr bool reads_clock = true;
    std::int64_t operator()() const noexcept(noexcept(Clock::now())) { return to_ns<Clock>(Clock::now()); }
  };

  // try_acquire / try_acquire_at. (g++ 12 -O3 inlines all of it, charge() and load() included, with no struct copied
  // through the stack: no [[gnu::always_inline]] needed, unlike token_bucket.hpp.)
  //
  // The clock is read after the next free time it is compared with, so that a refusal compares it with a commit that
  // happened before the reading. Read before, a reading older than another caller's admission (that caller read the
  // clock later and committed first) would be refused although the request fits when it is decided. Should a commit
  // land between the reading and the snapshot, the clock is read again. A caller-supplied `now` is taken as given.
  // (Recording the latest committed `now`, as token_bucket.hpp does, would change nothing here: every admission leaves
  // the next free time after its own `now` — a cost is at least 1 ns — so an earlier `now` is refused either way, and
  // a cancelled acquire restores a state in which the later `now` never happened.)
  template <class Now>
  bool admit_one(Now now, std::int64_t n) {
    detail::check_n("admit::warmup", n);
    if (n == 0 || infinite()) return true;
    for (;;) {
      // The refusal reads one word. The next free time only grows (but for a cancelled acquire giving its charge
      // back), and any value read is one the state really had during this call.
      const std::int64_t seen = state_.next_free.load(std::memory_order_acquire);
      const std::int64_t t = now();
      if (t < seen) return false;
      const snapshot s = load();
      if (t < s.next_free) {
        if constexpr (Now::reads_clock) continue;  // a commit landed after the clock was read: read it again
        return false;
      }
      const grant g = charge(s, t, n);
      if (publish(s.seq, g.next_free, g.stored)) return true;
      // Lost a race: decide again on the fresh state (never a spurious refusal).
    }
  }

  template <class Now>
  decision decide_with(Now now, std::int64_t n) {
    detail::check_n("admit::warmup", n);
    decision d;
    d.limit = 1;
    if (infinite()) {
      d.admitted = true;
      d.remaining = 1;
      return d;
    }
    for (;;) {
      const snapshot s = load();
      const std::int64_t t = now();  // after the snapshot, as in admit_one
      if (n > 0 && t < s.next_free) {
        d.retry_after = std::chrono::nanoseconds{detail::sat_sub(s.next_free, t)};
        d.reset_after = until_cold(t, s.next_free, s.stored);
        return d;
      }
      if (n == 0) {
        d.admitted = true;
        d.remaining = t >= s.next_free ? 1 : 0;
        d.reset_after = until_cold(t, s.next_free, s.stored);
        return d;
      }
      const grant g = charge(s, t, n);
      if (!publish(s.seq, g.next_free, g.stored)) continue;  // lost a race: decide again on the fresh state
      d.admitted = true;
      d.remaining = g.next_free <= t ? 1 : 0;
      d.reset_after = until_cold(t, g.next_free, g.stored);
      return d;
    }
  }

  template <class Now>
  std::chrono::nanoseconds debt_with(Now now, std::int64_t n) const {
    detail::check_n("admit::warmup", n);
    if (n == 0 || infinite()) return std::chrono::nanoseconds{0};
    const std::int64_t next = state_.next_free.load(std::memory_order_acquire);
    return std::chrono::nanoseconds{std::max<std::int64_t>(0, detail::sat_sub(next, now()))};
  }

  template <class Now>
  basic_reservation<Clock> reserve_with(Now now, std::int64_t n) {
    detail::check_n("admit::warmup", n);
    if (n == 0 || infinite()) return {n, to_time_point(now())};
    const claimed c = claim(now, n, detail::ns_max);
    return {n, to_time_point(std::max(c.g.at, c.t))};
  }

  // Rounds up, so that sleeping until the returned point never lets a caller through early.
  static time_point to_time_point(std::int64_t ns) noexcept { return detail::ceil_time_point<time_point>(ns); }

  // Stored permits after idling from `since` to `now` (now > since): one per cool-down interval, up to max.
  double refilled(double stored, std::int64_t now, std::int64_t since) const noexcept {
    if (cool_down_ == 0) return 0;
    return std::min(max_, stored + (static_cast<double>(now) - static_cast<double>(since)) / cool_down_);
  }
  // The throttling interval with `permits` stored above the threshold.
  double throttle(double permits_above_threshold) const noexcept { return stable_ + permits_above_threshold * slope_; }
  // Guava's storedPermitsToWaitTime + fresh permits: the area under the throttling line over the stored permits
  // spent [stored - spend, stored], plus the stable interval for each fresh permit.
  double cost(double stored, double spend, double fresh) const noexcept {
    double t = 0;
    const double above = stored - threshold_;
    if (above > 0) {
      const double take = std::min(above, spend);
      t = take * (throttle(above) + throttle(above - take)) / 2.0;
      spend -= take;
    }
    return t + stable_ * (spend + fresh);
  }
  // Guava's resync + reserveEarliestAvailable on a snapshot.
  grant charge(const snapshot& s, std::int64_t now, std::int64_t n) const noexcept {
    grant g{s.next_free, s.next_free, s.stored};
    if (now > s.next_free) {
      g.stored = refilled(s.stored, now, s.next_free);
      g.at = now;
    }
    const double permits = static_cast<double>(n);
    const double spend = std::min(permits, g.stored);
    g.next_free = detail::sat_add(g.at, detail::ceil_ns(cost(g.stored, spend, permits - spend)));
    g.stored -= spend;
    return g;
  }
  std::chrono::nanoseconds until_cold(std::int64_t now, std::int64_t next_free, double stored) const noexcept {
    const std::int64_t cold_at = detail::sat_add(next_free, detail::ceil_ns((max_ - stored) * cool_down_));
    return std::chrono::nanoseconds{std::max<std::int64_t>(0, detail::sat_sub(cold_at, now))};
  }
  // Charges n permits if the request may go by `latest` (or by `now`, when later). Lock-free but for the publish
  // window (see the top). The clock, if read, is read after the snapshot.
  template <class Now>
  claimed claim(Now now, std::int64_t n, std::int64_t latest) noexcept(noexcept(now())) {
    for (;;) {
      const snapshot s = load();
      const std::int64_t t = now();
      if (s.next_free > std::max(latest, t)) return {false, t, s, {}};
      const grant g = charge(s, t, n);
      if (publish(s.seq, g.next_free, g.stored)) return {true, t, s, g};
    }
  }
  // Undoes a charge if nothing was committed after it (the sequence number says so exactly: it only grows).
  void give_back(const claimed& c) noexcept {
    const snapshot& s = c.before;
    publish(s.seq + 2, s.next_free, s.stored);
  }

  // Sequence lock (detail::seqlock): readers retry until the number is the same even value before and after reading
  // both values; a commit is a compare-and-swap of the number (try_write_begin), then the two stores.
  snapshot load() const noexcept {
    for (unsigned spins = 0;; ++spins) {
      const std::uint64_t seq = state_.seq.read_begin();
      if (!detail::seqlock::writing(seq)) {
        const std::int64_t next = detail::seqlock::load(state_.next_free);
        const double stored = detail::seqlock::load(state_.stored);
        if (state_.seq.read_validate(seq)) return {seq, next, stored};
      }
      detail::seqlock::pause(spins);  // a committing thread was preempted mid-store
    }
  }
  // Commits (next_free, stored) if the sequence number is still `seq`; false if another commit came first.
  bool publish(std::uint64_t seq, std::int64_t next_free, double stored) noexcept {
    if (!state_.seq.try_write_begin(seq)) return false;
    detail::seqlock::store(state_.next_free, next_free);
    detail::seqlock::store(state_.stored, stored);
    state_.seq.write_end(seq);
    return true;
  }

  rate stable_rate_;
  std::chrono::nanoseconds warmup_period_;
  double cold_factor_;
  double stable_ = 0;     // stable interval, ns (0 = infinite rate)
  double threshold_ = 0;  // permits
  double max_ = 0;        // permits
  double slope_ = 0;      // ns per permit above the threshold
  double cool_down_ = 0;  // ns per stored permit while idle (0 = nothing is ever stored)

  // Hot state, alone on its cache line. next_free starts "long ago", so a new limiter is cold.
  struct alignas(64) hot_state {
    detail::seqlock seq;  // publishes next_free and stored together
    std::atomic<std::int64_t> next_free{detail::ns_min};
    std::atomic<double> stored{0};
  };
  hot_state state_;
  static_assert(std::atomic<double>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free);
};

using warmup = basic_warmup<std::chrono::steady_clock>;

}  // namespace admit
