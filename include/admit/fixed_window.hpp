// admit/fixed_window.hpp — the fixed window counter: at most `limit` requests per window, windows aligned to the clock.
//
// Time is cut into windows [k·w, (k+1)·w) counted from the clock's epoch (so a 1 s window starts on whole seconds of
// the clock), and each window admits up to `limit` requests. It is the simplest limiter and the cheapest, with the
// known weakness at the window boundary: `limit` requests at the end of one window and `limit` more at the start of the
// next pass, so up to 2·limit requests can pass in a time much shorter than one window (see sliding_window.hpp and
// sliding_log.hpp for the remedies).
//
//   admit::fixed_window limiter{100, std::chrono::seconds(1)};   // 100 per calendar-aligned second
//   if (admit::decision d = limiter.decide(); !d) reply_429(d.retry_after);   // retry_after: until the next window
//
// Representation. The whole state is one cache-line-aligned std::atomic<std::int64_t> holding k·(limit + 1) + count,
// the index k of the newest window that admitted anything and that window's count, so one compare-and-swap commits a
// decision; a lost CAS decides again on the fresh state (never a spurious refusal); a refusal writes nothing. The value
// only grows, so a CAS can never succeed on a stale state (no ABA). Nothing resets in the background: a window that
// has passed is simply read as empty.
//
// Bound of the packing: k·(limit + 1) + limit must fit in an int64 for every window index k of the clock's range,
// i.e. floor(2^63 / window_ns)·(limit + 1) + limit < 2^63. Roughly, the window in nanoseconds must exceed the limit
// (at most one request per nanosecond on average; a 1 s window allows a limit up to 999,999,998), but rounding makes
// the exact bound stricter for tiny windows (a 3 ns window allows a limit of 1). The constructor checks the exact
// rule and throws otherwise.
//
// Waiter bound and metrics (detail/rate_limiter_base.hpp): this limiter never blocks a thread; set_max_waiters(k)
// bounds the callers waiting in admit::asio::async_wait on it (the next fails with errc::queue_full), and
// enable_metrics() counts every decision (try_acquire, decide, async_wait's completion).
#pragma once

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/floor_div.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"

namespace admit {

// A fixed window counter: `limit` requests per window of length `window`, windows aligned to multiples of the window
// on the clock's epoch.
//
// Thread safety: every member may be called concurrently. Decisions are lock-free (a CAS retry loop), allocate nothing
// and start no thread or timer. Complexity O(1) expected.
//
// Edge cases, for every decision member:
// - n == 0 is always admitted and changes nothing. A negative n throws std::invalid_argument (in every build), before
//   anything is read or changed; every member taking n may therefore throw.
// - n > limit is refused with retry_after == nanoseconds::max() (decision::exceeds_capacity()).
// - A `now` in a window earlier than the newest window that admitted anything (a clock going backwards, or threads
//   passing slightly stale times) is counted against that newest window: it never reopens a past window and never
//   over-admits; its retry_after runs to the end of that newest window, measured from the `now` passed in.
// - Time points before the clock's epoch work (windows are aligned with floor division).
template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_fixed_window : public detail::rate_limiter_base {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // `limit` requests per `window`. Throws std::invalid_argument, naming the value, when limit < 1, window <= 0, or
  // the pair exceeds the bound of the packed state (see above).
  basic_fixed_window(std::int64_t limit, std::chrono::nanoseconds window)
      : limit_(check_limit(limit)), window_(window.count()), stride_(detail::sat_add(limit_, 1)) {
    if (window_ <= 0) {
      throw std::invalid_argument("admit::fixed_window: window must be positive, got " + std::to_string(window_) +
                                  "ns");
    }
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    if (__builtin_mul_overflow(detail::floor_div(detail::ns_min, window_), stride_, &lo) ||
        __builtin_mul_overflow(detail::floor_div(detail::ns_max, window_), stride_, &hi) ||
        __builtin_add_overflow(hi, limit_, &hi)) {
      throw std::invalid_argument("admit::fixed_window: window " + std::to_string(window_) +
                                  "ns is too short for limit " + std::to_string(limit) +
                                  ": the packed state needs (window index) * (limit + 1) + limit to fit in 64 bits "
                                  "for every time of the clock (roughly: more nanoseconds in a window than the limit)");
    }
    state_.value.store(lo, std::memory_order_relaxed);  // the earliest window, empty
  }

  basic_fixed_window(const basic_fixed_window&) = delete;
  basic_fixed_window& operator=(const basic_fixed_window&) = delete;

  // Admits n at `now` if the current window has room for them (and counts them), else changes nothing and returns
  // false.
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) { return record_try(admit_at(now, n), n); }
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return try_acquire_at(Clock::now(), n); }

  // Like try_acquire_at, with the whole decision:
  // - limit: the per-window limit;
  // - remaining: requests of one the current window still admits after this decision;
  // - retry_after: zero when admitted; else the time from `now` to the start of the next window (when the count
  //   resets); nanoseconds::max() when n > limit;
  // - reset_after: the time from `now` to the start of the next window, or zero when the current window is unused.
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    const decision d = decide_quiet_at(now, n);
    record_try(d.admitted, n);
    return d;
  }
  [[nodiscard]] decision decide(std::int64_t n = 1) { return decide_at(Clock::now(), n); }

  // How long from `now` until n would be admitted, consuming nothing: zero when they fit now, the time to the next
  // window start when the current window is too full, nanoseconds::max() when n > limit.
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) const {
    detail::check_n("admit::fixed_window", n);
    if (n > limit_) return std::chrono::nanoseconds::max();
    const outcome o = const_cast<basic_fixed_window*>(this)->step(to_ns<Clock>(now), n, false);
    return std::chrono::nanoseconds{o.ok ? 0 : o.to_next};
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
    detail::check_n("admit::fixed_window", n);
    if (n == 0) return true;
    return step(to_ns<Clock>(now), n, true).ok;
  }
  decision decide_quiet_at(time_point now, std::int64_t n) {
    detail::check_n("admit::fixed_window", n);
    const outcome o = step(to_ns<Clock>(now), n, n != 0);
    decision d;
    d.admitted = o.ok;
    d.limit = limit_;
    d.remaining = limit_ - o.count;
    d.retry_after = std::chrono::nanoseconds{o.ok ? 0 : n > limit_ ? detail::ns_max : o.to_next};
    d.reset_after = std::chrono::nanoseconds{o.count > 0 ? o.to_next : 0};
    return d;
  }

  struct outcome {
    bool ok = false;
    std::int64_t count = 0;    // the count of the window the request was counted against, after the decision
    std::int64_t to_next = 0;  // ns from now to the start of the window after it
  };

  static std::int64_t check_limit(std::int64_t limit) {
    if (limit < 1) {
      throw std::invalid_argument("admit::fixed_window: limit must be at least 1, got " + std::to_string(limit));
    }
    return limit;
  }

  // ns from t to the start of window k + 1 (saturating at the end of time).
  std::int64_t to_window_after(std::int64_t k, std::int64_t t) const noexcept {
    return detail::sat_sub(detail::sat_mul(k + 1, window_), t);  // k + 1 > t / window: only positive overflow
  }

  outcome step(std::int64_t t, std::int64_t n, bool commit) noexcept {
    const std::int64_t k_now = detail::floor_div(t, window_);
    const std::int64_t base = k_now * stride_;  // cannot overflow: checked in the constructor
    std::int64_t v = state_.value.load(std::memory_order_acquire);
    for (;;) {
      std::int64_t k = k_now;
      std::int64_t count = 0;
      if (v >= base) {
        // v − base >= 0 may exceed int64 only in the unsigned sense; compare as unsigned.
        const std::uint64_t offset = static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(base);
        if (offset < static_cast<std::uint64_t>(stride_)) {
          count = static_cast<std::int64_t>(offset);  // the current window
        } else {
          k = detail::floor_div(v, stride_);  // a later window than `now`'s: count against it
          count = v - k * stride_;
        }
      }
      if (n > limit_ - count) return {false, count, to_window_after(k, t)};
      if (!commit) return {true, count, to_window_after(k, t)};
      const std::int64_t next = k * stride_ + count + n;
      if (state_.value.compare_exchange_weak(v, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return {true, count + n, to_window_after(k, t)};
      }
      // Lost a race (or a spurious failure): `v` holds the fresh state; decide again.
    }
  }

  // Hot: written by every admission, alone on its cache line.
  struct alignas(64) hot_state {
    std::atomic<std::int64_t> value{0};
  };

  hot_state state_;
  const std::int64_t limit_;
  const std::int64_t window_;  // ns
  const std::int64_t stride_;  // limit + 1
};

using fixed_window = basic_fixed_window<std::chrono::steady_clock>;

}  // namespace admit
