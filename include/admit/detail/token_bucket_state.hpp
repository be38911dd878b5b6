// admit/detail/token_bucket_state.hpp — the shared state of admit::basic_token_bucket (include admit/token_bucket.hpp):
// the TAT and the latest `now` on one cache line, the configuration on another under a sequence lock, a consistent
// (configuration, state) snapshot for a decision, and what changes the state outside a decision: reconfiguration
// (x/time/rate SetLimitAt / SetBurstAt), a cancelled reservation's give-back (CancelAt) with its epochs of the last
// event, and the give-back or charge of a settled reservation. Clock-free: every time is in nanoseconds of the
// bucket's clock, and the bucket converts.
//
// The decision itself (allow, reserve, query) is the bucket's: it reads a snapshot, computes with
// detail/token_bucket_math.hpp and commits with try_commit; a lost compare-and-swap retries with a fresh snapshot.
//
// Thread safety: every member may be called concurrently with every other. load, try_commit, raise_last_event,
// note_now, effective_now and give_back are lock-free; reconfigure and cancel_reservation take the setter mutex,
// which no decision ever takes.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "admit/detail/atomic_max.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/seqlock.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/rate.hpp"

namespace admit::detail {

class token_bucket_state {
 public:
  // The configuration, derived from rate and burst; published under a sequence lock so that a decision always sees
  // one consistent configuration together with a state that belongs to it.
  using config = token_bucket_config;
  struct snapshot {
    config cfg;
    std::int64_t tat = 0;
    std::int64_t t = 0;  // the effective now (never earlier than the latest now seen)
  };

  // A full bucket of `burst` tokens refilling at `r`, configured at `now_ns`. Throws std::invalid_argument naming the
  // values when the burst is negative or its refill exceeds 2^62 ns.
  token_bucket_state(rate r, std::int64_t burst, std::int64_t now_ns) {
    write_config(make_token_bucket_config(r, burst, now_ns), r);  // nobody can see the state yet: no sequence bump
    // "Long ago": below t - tol for every t, so the bucket starts full; every use of it saturates.
    hot_.tat.store(ns_min, std::memory_order_relaxed);
  }

  token_bucket_state(const token_bucket_state&) = delete;
  token_bucket_state& operator=(const token_bucket_state&) = delete;

  // The rate as configured (its exact interval, before rounding), from the value write_config() stored.
  rate configured_rate() const {
    const double interval = config_.interval.load(std::memory_order_acquire);
    if (interval == 0) return rate::inf();
    if (std::isinf(interval)) return rate{};
    return rate::every(std::chrono::duration<double, std::nano>(interval));
  }

  std::int64_t effective_now(std::int64_t t) const noexcept {
    return std::max(t, hot_.last_now.load(std::memory_order_relaxed));
  }
  // Records `t` as seen. Called only after a committed change (the cache line is then this thread's already), so that
  // refusals stay read-only and threads that are refused do not fight over the line. Racy by design: a concurrent
  // smaller store can win, which only makes a later out-of-order `now` see slightly fewer tokens — never more.
  void note_now(std::int64_t t) noexcept {
    if (t > hot_.last_now.load(std::memory_order_relaxed)) hot_.last_now.store(t, std::memory_order_relaxed);
  }

  // A consistent (config, state) pair. Spins only while a setter is publishing a new configuration.
  // Always inlined (as the bucket's step() and read_config()): g++ 12 otherwise calls them out of line and copies the
  // structs through the stack, tripling the instructions of a decision (bench/, callgrind).
  [[gnu::always_inline]] snapshot load(std::int64_t t) const noexcept {
    for (unsigned spins = 0;; ++spins) {
      const std::uint64_t seq = config_.seq.read_begin();
      if (seqlock::writing(seq)) {
        // A setter is publishing (a handful of stores under its mutex). Should it be preempted meanwhile, give the CPU
        // away rather than spin against it.
        seqlock::pause(spins);
        continue;
      }
      snapshot s;
      s.tat = hot_.tat.load(std::memory_order_acquire);
      s.cfg = read_config();
      if (!config_.seq.read_validate(seq)) continue;
      s.t = t;
      return s;
    }
  }

  // Commits a decision: the state becomes `new_tat` if it is still `expected` (the snapshot's tat). May fail
  // spuriously (a weak compare-and-swap): the caller decides again on a fresh snapshot.
  [[gnu::always_inline]] bool try_commit(std::int64_t expected, std::int64_t new_tat) noexcept {
    return hot_.tat.compare_exchange_weak(expected, new_tat, std::memory_order_acq_rel, std::memory_order_relaxed);
  }

  // A reservation announces its time to act before it commits, so that a cancellation that sees the commit also sees
  // the time (cancel_reservation): too high a last event only makes a cancellation give back less, never more.
  void raise_last_event(std::int64_t t) noexcept { raise_to(hot_.last_event, t, std::memory_order_release); }

  // x/time/rate CancelAt, on the TAT: give back the tokens of a reservation that later reservations do not depend on.
  // The state is read before the last event and the give-back commits only if the state is still the one read: a
  // reservation that committed in between made its time visible first (the bucket's step()), so it is either counted
  // as "later" or makes this attempt fail and start over — the restore is never computed without a reservation that
  // depends on it. A reservation that announced its time before this attempt's epoch began but commits after the
  // give-back fails its compare-and-swap (the state changed) and announces again, in the new epoch.
  void cancel_reservation(std::int64_t now_ns, std::int64_t n, std::int64_t time_to_act, double interval) {
    std::lock_guard lock(setter_);     // cancellations are rare; serialize them with each other and reconfiguration
    if (time_to_act < now_ns) return;  // already acted upon (x/time/rate compares with the caller's t)
    const std::int64_t t = effective_now(now_ns);
    for (;;) {
      const std::int64_t tat = hot_.tat.load(std::memory_order_acquire);
      const std::int64_t last_event = begin_event_epoch();
      // At most n: x/time/rate gives back more than n when the last event is earlier than this reservation's time
      // (a reservation made after a rate increase, or after another cancellation), which can admit more than the
      // rate and burst allow.
      const double later = static_cast<double>(std::max<std::int64_t>(0, sat_sub(last_event, time_to_act)));
      const double restore = static_cast<double>(n) - later / interval;
      if (restore <= 0) return;
      if (!give_back(t, restore, &tat)) continue;
      if (time_to_act == last_event) {
        // Nothing after it: the previous reservation's time is the latest again (unless a new one has set it since).
        const std::int64_t prev = sat_sub(time_to_act, sat_mul(n, static_cast<std::int64_t>(interval)));
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
      const std::int64_t base = std::max(s.tat, sat_sub(at, c.tol));
      // Rounded towards no change (a refund never gives back more than owed, a charge never takes less).
      const std::int64_t delta = -ceil_signed_ns(-tokens * c.interval());
      const std::int64_t new_tat = std::max(sat_sub(base, delta), sat_sub(at, c.tol));
      if (expected_tat && s.tat != *expected_tat) return false;
      std::int64_t expected = s.tat;
      if (hot_.tat.compare_exchange_weak(expected, new_tat, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        return true;
      }
      if (expected_tat) return false;
    }
  }

  // Changes the rate (new_rate) or the burst (new_burst) at `now_ns`, keeping the tokens accrued up to then (capped at
  // the new burst) and any debt. Throws std::invalid_argument, changing nothing, when the new configuration is
  // invalid (make_token_bucket_config).
  void reconfigure(std::int64_t now_ns, const rate* new_rate, const std::int64_t* new_burst) {
    std::lock_guard lock(setter_);
    const std::int64_t t = effective_now(now_ns);
    note_now(t);
    const config old = read_config();
    const rate old_rate = configured_rate();
    const rate next_rate = new_rate ? *new_rate : old_rate;
    config next = make_token_bucket_config(next_rate, new_burst ? *new_burst : old.burst, t);
    if (!new_rate && old.zero()) next.frozen = old.frozen;  // a burst change does not restart a stopped clock

    const std::uint64_t seq = config_.seq.write_begin();  // odd: decisions wait for the new configuration
    // Reservations from now on set the last event afresh: after a rate increase they act earlier than those before.
    begin_event_epoch();
    std::int64_t cur = hot_.tat.load(std::memory_order_acquire);
    for (;;) {
      // Tokens held at t under the old configuration (the bucket is full after an infinite rate, as in x/time/rate).
      double tokens = old.inf() ? static_cast<double>(next.burst) : token_bucket_tokens(old, cur, t);
      tokens = std::min(tokens, static_cast<double>(next.burst));
      const std::int64_t at = next.zero() ? next.frozen : t;
      std::int64_t converted = next.inf() ? cur : sat_sub(at, ceil_signed_ns(tokens * next.interval()));
      // A converted state equal to the old one would let a decision computed under the old configuration commit
      // against the new one (ABA); one nanosecond of difference makes its CAS fail and retry.
      // (A burst change keeps the interval, so the same value means the same thing and needs no nudge.)
      if (converted == cur && next_rate != old_rate) converted = sat_add(converted, 1);
      if (hot_.tat.compare_exchange_weak(cur, converted, std::memory_order_acq_rel, std::memory_order_acquire)) {
        break;
      }
    }
    write_config(next, next_rate);
    config_.seq.write_end(seq);
  }

 private:
  // A signed number of nanoseconds from a double, rounded up and saturating instead of overflowing.
  static std::int64_t ceil_signed_ns(double ns) noexcept {
    if (!(ns > -9.2e18)) return ns_min;
    if (!(ns < 9.2e18)) return ns_max;
    return static_cast<std::int64_t>(std::ceil(ns));
  }

  // The last event: x/time/rate's lastEvent, the time to act of the latest reservation. x/time/rate assigns it at
  // each reservation, so it moves back when a reservation acts earlier than the one before it (after a rate increase,
  // or after a cancellation gave tokens back). Here reservations raise hot_.last_event without a lock; the times
  // they raise it with only grow while nothing gives tokens back or changes the configuration, so the maximum is the
  // latest. Cancellation and reconfiguration (under setter_) begin a new epoch instead: they fold the epoch's value
  // into epoch_start_event_ and reset last_event to "none yet", so the next reservation sets it, earlier or not.
  // Must be called under setter_.
  std::int64_t begin_event_epoch() noexcept {
    const std::int64_t raised = hot_.last_event.exchange(ns_min, std::memory_order_acq_rel);
    if (raised != ns_min) epoch_start_event_ = raised;
    return epoch_start_event_;
  }

  // The configuration's fields, stored and loaded as detail::seqlock prescribes (release / acquire, no fences).
  void write_config(const config& c, rate r) noexcept {
    seqlock::store(config_.interval, r.interval_ns());
    seqlock::store(config_.burst, c.burst);
    seqlock::store(config_.cost1, c.cost1);
    seqlock::store(config_.tol, c.tol);
    seqlock::store(config_.frozen, c.frozen);
  }
  [[gnu::always_inline]] config read_config() const noexcept {
    config c;
    c.burst = seqlock::load(config_.burst);
    c.cost1 = seqlock::load(config_.cost1);
    c.tol = seqlock::load(config_.tol);
    c.frozen = seqlock::load(config_.frozen);
    return c;
  }

  // Hot, written by every admission: its own cache line.
  struct alignas(64) hot_state {
    std::atomic<std::int64_t> tat{0};
    std::atomic<std::int64_t> last_now{ns_min};    // the latest `now` of a committed change
    std::atomic<std::int64_t> last_event{ns_min};  // the latest time_to_act of this epoch's reservations
  };
  // Read-mostly: another cache line.
  struct alignas(64) config_state {
    seqlock seq;  // publishes the fields below together (reconfigure)
    std::atomic<double> interval{
        0};  // the configured rate's exact interval_ns(), for get_rate(); not read by decisions
    std::atomic<std::int64_t> burst{0};
    std::atomic<std::int64_t> cost1{0};
    std::atomic<std::int64_t> tol{0};
    std::atomic<std::int64_t> frozen{0};
  };

  hot_state hot_;
  config_state config_;
  std::mutex setter_;                        // serializes reconfiguration and cancellation; never taken by a decision
  std::int64_t epoch_start_event_ = ns_min;  // the last event when the epoch began (begin_event_epoch); setter_
};

}  // namespace admit::detail
