// admit/sliding_window.hpp — the sliding window counter: a fixed window smoothed by a weighted previous window.
//
// Windows are aligned as in fixed_window.hpp, but a request is judged against an estimate of the requests in the last
// window length rather than the current window alone (as Cloudflare and envoy describe it):
//
//   estimate(t) = previous_window_count · (1 − elapsed_fraction_of_current_window) + current_window_count
//
// and n is admitted iff estimate + n <= limit. The previous window's requests are assumed to have been spread evenly,
// so the boundary burst of the fixed window (2·limit in a moment) is gone, at the cost of two counters and an
// approximation. The arithmetic is exact (integers, no floating point), and so is retry_after: the first nanosecond
// at which the weighting lets the request in.
//
//   admit::sliding_window limiter{100, std::chrono::seconds(1)};
//   if (admit::decision d = limiter.decide(); !d) reply_429(d.retry_after);
//
// Representation. The state is one cache-line-aligned std::atomic<std::uint64_t> packing the current window's count,
// the previous window's count (each in bit_width(limit) bits) and the low bits of the current window's index, so one
// compare-and-swap commits a decision; a lost CAS decides again on the fresh state (never a spurious refusal); a
// refusal writes nothing. A second atomic, written only when a newer window is entered (once per window), holds the
// newest window index in full; every writer raises it before its CAS, so a reader always knows the state's window is
// not later than that one, and the low bits tell how many windows ago it was.
//
// Bounds of the packing: limit <= max_limit (2^24 − 1), leaving at least 16 bits of window index in the state. A
// request more than one window past the newest window knows the state is older than the previous window; otherwise
// the low bits tell the state's window apart from the current and the previous one unless it lags the newest window
// by a multiple of 2^(64 − 2·bit_width(limit)) windows (65,536 at the largest limit) — which only a writer that raised
// the newest window and then lost its CAS to an older window's writer can leave behind. Even then a misreading only
// counts old requests as recent: it refuses more, never admits more.
//
// Waiter bound and metrics (detail/rate_limiter_base.hpp): this limiter never blocks a thread; set_max_waiters(k)
// bounds the callers waiting in admit::asio::async_wait on it (the next fails with errc::queue_full), and
// enable_metrics() counts every decision (try_acquire, decide, async_wait's completion).
#pragma once

#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/atomic_max.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/floor_div.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/sliding_window_math.hpp"

namespace admit {

// A sliding window counter: about `limit` requests per `window`, windows aligned to multiples of the window on the
// clock's epoch, the previous window weighted by the part of it that still overlaps the last window length.
//
// Thread safety: every member may be called concurrently. Decisions are lock-free (a CAS retry loop), allocate nothing
// and start no thread or timer. Complexity O(1) expected.
//
// Edge cases, for every decision member:
// - n == 0 is always admitted and changes nothing. A negative n throws std::invalid_argument (in every build), before
//   anything is read or changed; every member taking n may therefore throw.
// - n > limit is refused with retry_after == nanoseconds::max() (decision::exceeds_capacity()).
// - A `now` in a window earlier than the newest window entered (a clock going backwards, or threads passing slightly
//   stale times) is judged at the start of that newest window, where its estimate is highest: it never reopens a past
//   window and never over-admits; its retry_after is measured from the `now` passed in. A `now` earlier within the
//   current window sees a larger weight on the previous window, so it is refused sooner, never admitted more.
template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_sliding_window : public detail::rate_limiter_base {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // The largest limit the packed state holds.
  static constexpr std::int64_t max_limit = (std::int64_t{1} << 24) - 1;

  // About `limit` requests per `window`. Throws std::invalid_argument, naming the value, when limit is not in
  // [1, max_limit] or window <= 0.
  basic_sliding_window(std::int64_t limit, std::chrono::nanoseconds window)
      : limit_(check_limit(limit)),
        window_(check_window(window)),
        count_bits_(static_cast<unsigned>(std::bit_width(static_cast<std::uint64_t>(limit_)))),
        count_mask_((std::uint64_t{1} << count_bits_) - 1),
        index_mask_((std::uint64_t{1} << (64 - 2 * count_bits_)) - 1) {}

  basic_sliding_window(const basic_sliding_window&) = delete;
  basic_sliding_window& operator=(const basic_sliding_window&) = delete;

  // Admits n at `now` if the estimate leaves room for them (and counts them), else changes nothing and returns false.
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) { return record_try(admit_at(now, n), n); }
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return try_acquire_at(Clock::now(), n); }

  // Like try_acquire_at, with the whole decision:
  // - limit: the limit;
  // - remaining: requests of one the estimate still admits right after this decision (floor(limit − estimate));
  // - retry_after: zero when admitted; else the exact time from `now` until the weighting admits this request if
  //   nothing else is admitted meanwhile (possibly in the next window, or the one after); nanoseconds::max() when
  //   n > limit;
  // - reset_after: the time from `now` until the estimate is back to zero (the end of the next window when the
  //   current one has counts, the end of the current one when only the previous one has), zero when it is zero.
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    const decision d = decide_quiet_at(now, n);
    record_try(d.admitted, n);
    return d;
  }
  [[nodiscard]] decision decide(std::int64_t n = 1) { return decide_at(Clock::now(), n); }

  // How long from `now` until n would be admitted, consuming nothing: zero when they fit now, nanoseconds::max()
  // when n > limit; otherwise the exact wait (as decision::retry_after).
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) const {
    detail::check_n("admit::sliding_window", n);
    const std::int64_t t = to_ns<Clock>(now);
    const view v = const_cast<basic_sliding_window*>(this)->step(t, n, false);
    return std::chrono::nanoseconds{v.ok ? 0 : retry_ns(v, n, t)};
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
    detail::check_n("admit::sliding_window", n);
    if (n == 0) return true;
    return step(to_ns<Clock>(now), n, true).ok;
  }
  decision decide_quiet_at(time_point now, std::int64_t n) {
    detail::check_n("admit::sliding_window", n);
    const std::int64_t t = to_ns<Clock>(now);
    const view v = step(t, n, n != 0);
    decision d;
    d.admitted = v.ok;
    d.limit = limit_;
    const std::int64_t weighted = ceil_weighted(v.prev, v.elapsed);
    d.remaining = std::max<std::int64_t>(0, limit_ - v.cur - weighted);
    d.retry_after = std::chrono::nanoseconds{v.ok ? 0 : retry_ns(v, n, t)};
    std::int64_t zero_at = t;
    if (v.cur > 0) {
      zero_at = detail::sat_add(detail::sat_add(v.start, window_), window_);
    } else if (v.prev > 0) {
      zero_at = detail::sat_add(v.start, window_);
    }
    d.reset_after = std::chrono::nanoseconds{std::max<std::int64_t>(0, detail::sat_sub(zero_at, t))};
    return d;
  }

  // The counters as a decision saw them.
  struct view {
    bool ok = false;
    std::int64_t prev = 0;     // the previous window's count
    std::int64_t cur = 0;      // the current window's count (after the decision when admitted)
    std::int64_t start = 0;    // ns: the start of the window judged in
    std::int64_t elapsed = 0;  // ns into that window at which it was judged
  };

  static std::int64_t check_limit(std::int64_t limit) {
    if (limit < 1 || limit > max_limit) {
      throw std::invalid_argument("admit::sliding_window: limit must be from 1 to " + std::to_string(max_limit) +
                                  ", got " + std::to_string(limit));
    }
    return limit;
  }
  static std::int64_t check_window(std::chrono::nanoseconds window) {
    if (window.count() <= 0) {
      throw std::invalid_argument("admit::sliding_window: window must be positive, got " +
                                  std::to_string(window.count()) + "ns");
    }
    return window.count();
  }

  std::uint64_t pack(std::int64_t k, std::int64_t prev, std::int64_t cur) const noexcept {
    return ((static_cast<std::uint64_t>(k) & index_mask_) << (2 * count_bits_)) |
           (static_cast<std::uint64_t>(prev) << count_bits_) | static_cast<std::uint64_t>(cur);
  }

  detail::sliding_window_math math() const noexcept { return {limit_, window_}; }
  std::int64_t ceil_weighted(std::int64_t prev, std::int64_t elapsed) const noexcept {
    return math().ceil_weighted(prev, elapsed);
  }
  bool fits(std::int64_t prev, std::int64_t cur, std::int64_t elapsed, std::int64_t n) const noexcept {
    return math().fits(prev, cur, elapsed, n);
  }
  // ns from t until n fits, for a refused request judged with view v, if nothing else is admitted.
  std::int64_t retry_ns(const view& v, std::int64_t n, std::int64_t t) const noexcept {
    return math().retry_ns(v.start, v.prev, v.cur, n, t);
  }

  view step(std::int64_t t, std::int64_t n, bool commit) noexcept {
    const std::int64_t k_now = detail::floor_div(t, window_);
    const std::int64_t e_now = detail::floor_mod(t, window_);
    const unsigned shift = 2 * count_bits_;
    std::uint64_t s = hot_.state.load(std::memory_order_acquire);
    for (;;) {
      // Read after the state: at least the window of the state just read (every writer raises it before its CAS).
      const std::int64_t k_max = hot_.newest.load(std::memory_order_acquire);
      view v;
      std::int64_t k = k_now;
      if (k_now >= k_max) {
        v.start = detail::sat_sub(t, e_now);  // (t near time_point::min(): the window began before it)
        v.elapsed = e_now;
      } else {
        k = k_max;  // behind the newest window: judge at its start, where the estimate is highest
        v.start = detail::sat_mul(k_max, window_);  // k_max > k_now: only positive overflow
        v.elapsed = 0;
      }
      // Windows since the state's: its low bits give it modulo 2^(64 − 2·bit_width(limit)); the newest window
      // resolves the rest, as the state's window is never later than the newest.
      const std::uint64_t age = static_cast<std::uint64_t>(k) - static_cast<std::uint64_t>(k_max) >= 2
                                    ? 2
                                    : (static_cast<std::uint64_t>(k) - (s >> shift)) & index_mask_;
      const auto cur_in_state = static_cast<std::int64_t>(s & count_mask_);
      const auto prev_in_state = static_cast<std::int64_t>((s >> count_bits_) & count_mask_);
      if (age == 0) {
        v.prev = prev_in_state;
        v.cur = cur_in_state;
      } else if (age == 1) {
        v.prev = cur_in_state;
      }
      if (!fits(v.prev, v.cur, v.elapsed, n)) return v;
      v.ok = true;
      if (!commit) return v;
      if (k > k_max) raise_newest(k);
      if (hot_.state.compare_exchange_weak(s, pack(k, v.prev, v.cur + n), std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
        v.cur += n;
        return v;
      }
      // Lost a race (or a spurious failure): `s` holds the fresh state; decide again.
    }
  }

  void raise_newest(std::int64_t k) noexcept { detail::raise_to(hot_.newest, k); }

  // Hot: the packed state (written by every admission) and the newest window (written once per window), together on
  // one cache line since a decision reads both.
  struct alignas(64) hot_state {
    std::atomic<std::uint64_t> state{0};
    std::atomic<std::int64_t> newest{detail::ns_min};
  };

  hot_state hot_;
  const std::int64_t limit_;
  const std::int64_t window_;  // ns
  const unsigned count_bits_;  // bits of each count in the state
  const std::uint64_t count_mask_;
  const std::uint64_t index_mask_;
};

using sliding_window = basic_sliding_window<std::chrono::steady_clock>;

}  // namespace admit
