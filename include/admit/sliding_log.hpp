// admit/sliding_log.hpp — the sliding log: an exact limit on the requests of the last window, no approximation.
//
// The limiter remembers the time of each of the last `limit` admitted requests (a request of n counts n times) and
// admits n at t iff the requests admitted in (t − window, t] plus n are at most `limit`. Unlike the fixed window it
// never lets 2·limit through across a window boundary, and unlike the sliding window counter it does not estimate:
// every interval of length `window` holds at most `limit` admitted requests. The price is memory: one slot per unit
// of the limit (16 bytes each), allocated once at construction — bounded by the limit, not by the traffic.
//
//   admit::sliding_log limiter{100, std::chrono::seconds(1)};   // never more than 100 in any second
//   if (admit::decision d = limiter.decide(); !d) reply_429(d.retry_after);   // when the oldest blocking entry leaves
//
// Representation. A ring of `limit` slots holds the times of the last `limit` admitted units in admission order,
// which is also time order (each admission is recorded at max(now, the newest time recorded), so the ring stays
// sorted even when clocks or threads disagree). A request of n fits iff the n-th oldest of those times has left the
// window. One compare-and-swap on a unit counter (the head) claims n slots and commits the decision; a lost CAS
// decides again on the fresh state (never a spurious refusal); a refusal writes nothing. The claimer then writes its
// time into the claimed slots, each slot carrying the number of the unit it holds.
//
// Progress. No lock is ever taken, but like a bounded multi-producer ring (Vyukov's queue) a thread can meet a slot
// that another thread has claimed and not yet written — a window of a few instructions after that thread's CAS — and
// then waits for the write (spinning, then yielding). That happens only when the decision depends on one of the last
// few admissions still being written, i.e. when admissions in flight together exceed what the ring has expired; a
// writer descheduled in that window delays those decisions until it runs again.
//
// Waiter bound and metrics (detail/rate_limiter_base.hpp): this limiter never blocks a thread; set_max_waiters(k)
// bounds the callers waiting in admit::asio::async_wait on it (the next fails with errc::queue_full), and
// enable_metrics() counts every decision (try_acquire, decide, async_wait's completion).
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/atomic_max.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"

namespace admit {

// A sliding log: at most `limit` requests in any window of length `window`, exactly.
//
// Thread safety: every member may be called concurrently. Decisions take no lock, allocate nothing and start no
// thread or timer; O(1) expected (a CAS retry loop), O(n) slot writes for an admitted request of n, O(log limit) more
// for decide()'s `remaining`. See "Progress" above for the one wait.
//
// Edge cases, for every decision member:
// - n == 0 is always admitted and changes nothing. A negative n throws std::invalid_argument (in every build), before
//   anything is read or changed; every member taking n may therefore throw.
// - n > limit is refused with retry_after == nanoseconds::max() (decision::exceeds_capacity()).
// - A `now` earlier than a time already recorded (a clock going backwards, or threads passing slightly stale times)
//   counts every recorded request later than now − window, including those recorded after `now`, and is recorded at
//   the newest recorded time: it never over-admits, in any interval of the times passed in; retry_after is measured
//   from the `now` passed in.
template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_sliding_log : public detail::rate_limiter_base {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // The largest limit accepted: the ring takes 16 bytes per unit of the limit (256 MiB at this limit).
  static constexpr std::int64_t max_limit = (std::int64_t{1} << 24) - 1;

  // At most `limit` requests in any `window`. Allocates the ring (limit slots). Throws std::invalid_argument, naming
  // the value, when limit is not in [1, max_limit] or window <= 0.
  basic_sliding_log(std::int64_t limit, std::chrono::nanoseconds window)
      : limit_(check_limit(limit)),
        window_(check_window(window)),
        slots_(std::make_unique<slot[]>(static_cast<std::size_t>(limit_))) {
    // Units 0..limit−1 stand for "never admitted" (time −infinity); real admissions are numbered from `limit` on.
    for (std::int64_t j = 0; j < limit_; ++j) {
      slots_[static_cast<std::size_t>(j)].unit.store(j, std::memory_order_relaxed);
      slots_[static_cast<std::size_t>(j)].time.store(detail::ns_min, std::memory_order_relaxed);
    }
    hot_.head.store(limit_, std::memory_order_release);
  }

  basic_sliding_log(const basic_sliding_log&) = delete;
  basic_sliding_log& operator=(const basic_sliding_log&) = delete;

  // Admits n at `now` if at most limit − n requests were admitted in (now − window, now] (and records them), else
  // changes nothing and returns false.
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) { return record_try(admit_at(now, n), n); }
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return try_acquire_at(Clock::now(), n); }

  // Like try_acquire_at, with the whole decision:
  // - limit: the limit;
  // - remaining: requests of one that would be admitted right after this decision (exact when no other thread is
  //   deciding at the same moment; a snapshot otherwise);
  // - retry_after: zero when admitted; else the time from `now` until the oldest entry that must go has left the
  //   window (the n-th oldest of the last `limit`); nanoseconds::max() when n > limit;
  // - reset_after: the time from `now` until the newest entry has left the window (the log is empty), zero when it
  //   is empty.
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    const decision d = decide_quiet_at(now, n);
    record_try(d.admitted, n);
    return d;
  }
  [[nodiscard]] decision decide(std::int64_t n = 1) { return decide_at(Clock::now(), n); }

  // How long from `now` until n would be admitted, consuming nothing: zero when they fit now, the time until the n-th
  // oldest of the last `limit` entries leaves the window otherwise, nanoseconds::max() when n > limit.
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) const {
    detail::check_n("admit::sliding_log", n);
    if (n == 0) return std::chrono::nanoseconds{0};
    return std::chrono::nanoseconds{const_cast<basic_sliding_log*>(this)->step(to_ns<Clock>(now), n, false).wait};
  }
  [[nodiscard]] std::chrono::nanoseconds time_until_available(std::int64_t n = 1) const {
    return time_until_available_at(Clock::now(), n);
  }

  [[nodiscard]] std::int64_t limit() const noexcept { return limit_; }
  [[nodiscard]] std::chrono::nanoseconds window() const noexcept { return std::chrono::nanoseconds{window_}; }

 private:
  friend struct detail::limiter_access;
  bool try_acquire_quiet(std::int64_t n) { return admit_at(Clock::now(), n); }
  // try_acquire_at and decide_at without the metrics.
  bool admit_at(time_point now, std::int64_t n) {
    detail::check_n("admit::sliding_log", n);
    if (n == 0) return true;
    return step(to_ns<Clock>(now), n, true).ok;
  }
  decision decide_quiet_at(time_point now, std::int64_t n) {
    detail::check_n("admit::sliding_log", n);
    const std::int64_t t = to_ns<Clock>(now);
    const outcome o = n == 0 ? outcome{true, 0} : step(t, n, true);
    decision d;
    d.admitted = o.ok;
    d.limit = limit_;
    d.retry_after = std::chrono::nanoseconds{o.wait};
    d.remaining = expired_units(t);
    const std::int64_t newest = hot_.newest.load(std::memory_order_acquire);
    const std::int64_t empty_at = detail::sat_add(newest, window_);
    d.reset_after = std::chrono::nanoseconds{empty_at > t ? detail::sat_sub(empty_at, t) : 0};
    return d;
  }

  struct outcome {
    bool ok = false;
    std::int64_t wait = 0;  // ns until the request fits (ns_max: never)
  };

  // One admitted unit: its number (or −(number + 1) while its time is being written) and its recorded time.
  struct slot {
    std::atomic<std::int64_t> unit{0};
    std::atomic<std::int64_t> time{0};
  };

  enum class peek { ok, pending, stale };

  static std::int64_t check_limit(std::int64_t limit) {
    if (limit < 1 || limit > max_limit) {
      throw std::invalid_argument("admit::sliding_log: limit must be from 1 to " + std::to_string(max_limit) +
                                  ", got " + std::to_string(limit));
    }
    return limit;
  }
  static std::int64_t check_window(std::chrono::nanoseconds window) {
    if (window.count() <= 0) {
      throw std::invalid_argument("admit::sliding_log: window must be positive, got " + std::to_string(window.count()) +
                                  "ns");
    }
    return window.count();
  }

  static void backoff(unsigned& spins) noexcept {
    if (++spins > 64) std::this_thread::yield();
  }

  slot& slot_of(std::int64_t unit) const noexcept { return slots_[static_cast<std::size_t>(unit % limit_)]; }

  // The recorded time of `unit`, read consistently (a sequence-lock read of its slot): ok; pending when the unit (or
  // an earlier one in the same slot) is still being written; stale when the slot already holds a later unit.
  peek read_time(std::int64_t unit, std::int64_t& out) const noexcept {
    const slot& s = slot_of(unit);
    const std::int64_t u1 = s.unit.load(std::memory_order_acquire);
    if (u1 != unit) {
      const std::int64_t held = u1 >= 0 ? u1 : -u1 - 1;
      return held > unit ? peek::stale : peek::pending;
    }
    out = s.time.load(std::memory_order_acquire);
    // A writer of a later unit marks the slot before writing its time (release): seeing its time means seeing the mark.
    return s.unit.load(std::memory_order_acquire) == unit ? peek::ok : peek::stale;
  }

  void write_time(std::int64_t unit, std::int64_t time) noexcept {
    slot& s = slot_of(unit);
    const std::int64_t previous = unit - limit_;
    // The previous occupant of this slot may still be being written by its (slower) claimer: wait for it, so that
    // slots only move forward.
    for (unsigned spins = 0; s.unit.load(std::memory_order_acquire) != previous;) backoff(spins);
    s.unit.store(-unit - 1, std::memory_order_relaxed);
    s.time.store(time, std::memory_order_release);
    s.unit.store(unit, std::memory_order_release);
  }

  void raise_newest(std::int64_t t) noexcept { detail::raise_to(hot_.newest, t); }

  outcome step(std::int64_t t, std::int64_t n, bool commit) noexcept {
    if (n > limit_) return {false, detail::ns_max};
    const std::int64_t cutoff = detail::sat_sub(t, window_);  // entries at or before it have left the window
    std::int64_t head = hot_.head.load(std::memory_order_acquire);
    for (unsigned spins = 0;;) {
      // Read after the head: at least the time of every admission the head includes.
      const std::int64_t newest = hot_.newest.load(std::memory_order_acquire);
      // The n-th oldest of the last `limit` units: it and all older ones must have left the window.
      const std::int64_t needed = head - limit_ + n - 1;
      std::int64_t time = 0;
      const peek p = read_time(needed, time);
      if (p != peek::ok) {
        if (p == peek::pending) backoff(spins);
        head = hot_.head.load(std::memory_order_acquire);
        continue;
      }
      if (time > cutoff) return {false, detail::sat_sub(detail::sat_add(time, window_), t)};
      if (!commit) return {true, 0};
      const std::int64_t record = std::max(t, newest);  // keeps the ring in time order
      raise_newest(record);                             // before the claim: whoever sees the claim sees the time
      if (hot_.head.compare_exchange_weak(head, head + n, std::memory_order_acq_rel, std::memory_order_acquire)) {
        for (std::int64_t u = head; u < head + n; ++u) write_time(u, record);
        return {true, 0};
      }
      // Lost a race (or a spurious failure): `head` holds the fresh value; decide again.
    }
  }

  // Requests of one that fit at t: how many of the last `limit` units have left the window. They are in time order,
  // so a binary search finds the first one still inside; a slot being written counts as inside.
  std::int64_t expired_units(std::int64_t t) const noexcept {
    const std::int64_t cutoff = detail::sat_sub(t, window_);
    const std::int64_t head = hot_.head.load(std::memory_order_acquire);
    std::int64_t lo = 0;  // units [head − limit, head − limit + lo) have expired
    std::int64_t hi = limit_;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      std::int64_t time = 0;
      if (read_time(head - limit_ + mid, time) == peek::ok && time <= cutoff) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Hot: the head (claimed by every admission) and the newest recorded time, read together by every decision.
  struct alignas(64) hot_state {
    std::atomic<std::int64_t> head{0};
    std::atomic<std::int64_t> newest{detail::ns_min};
  };

  hot_state hot_;
  const std::int64_t limit_;
  const std::int64_t window_;  // ns
  const std::unique_ptr<slot[]> slots_;
};

using sliding_log = basic_sliding_log<std::chrono::steady_clock>;

}  // namespace admit
