// admit/pacer.hpp — a pacer (leaky bucket with slack, as uber-go/ratelimit): callers pass one by one, evenly spaced.
//
// A pacer hands out *slots* one `interval` apart (interval = 1 / rate). `take()` claims the next slot and sleeps until
// it; a caller that arrives after its slot goes at once. Idle time is not lost entirely: up to `slack` slots that went
// unused may be claimed later at once, so after idling `slack + 1` callers pass together (the one whose slot it is,
// plus `slack` paid for by the idle time), then the pace is even again. Without slack the pace is strictly even.
// Unlike a token bucket, which is usually asked "may I, now?", a pacer is usually asked "when may I?" and waited on.
//
//   admit::pacer p{admit::rate::per_second(100)};           // 10ms apart, slack 10
//   for (auto& job : jobs) if (p.take()) run(job);          // at most 100 jobs/s on average, 11 at once after idling
//
// Semantics follow uber-go/ratelimit's atomic int64 limiter: the first call goes at once and earns no slack (pacing
// starts at the first call, not at construction); `per` sets the period the rate is counted in (New(7, Per(minute))).
// Differences, on purpose: the interval is the rate's interval rounded *up* to whole nanoseconds (uber truncates, so
// it runs slightly fast); slack is capped continuously (uber's cap jumps by one slot at the boundary); n > 1 slots can
// be claimed at once; and a cancelled wait gives its slot back.
//
// State: one cache-line-aligned std::atomic<std::int64_t>, the start of the next free slot in nanoseconds of `Clock`,
// updated by compare-and-swap. No lock, no allocation, no thread, no timer: the state changes only inside calls. A
// lost compare-and-swap retries; it is never reported as a refusal. Bound: over any window of length w, at most
// w / interval + slack + 1 callers pass (tests check it).
//
// Waiter bound and metrics (detail/rate_limiter_base.hpp): set_max_waiters(k) lets at most k callers sleep towards
// their slot at once (the next that would have to sleep fails with errc::queue_full, claiming nothing);
// enable_metrics() counts every decision.
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
#include <optional>
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
#include "admit/detail/sleep.hpp"
#include "admit/expected.hpp"
#include "admit/rate.hpp"
#include "admit/reservation.hpp"
#include "admit/wait_result.hpp"

namespace admit {

// Configuration of a pacer: `pacer_options{.slack = 3, .per = std::chrono::minutes(1)}`.
struct pacer_options {
  // Unused slots that idle time may bank for a later burst (uber's WithSlack). 0 = strictly even. Must be >= 0.
  std::int64_t slack = 10;
  // The period the rate's count is read in (uber's Per): the rate's "N per second" becomes "N per `per`". With the
  // default of one second the rate is used as given. Must be positive.
  std::chrono::nanoseconds per = std::chrono::seconds(1);

  // uber's WithoutSlack: every caller waits its full interval; idle time earns nothing.
  static constexpr pacer_options without_slack() noexcept {
    pacer_options o;
    o.slack = 0;
    return o;
  }
};

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_pacer : public detail::rate_limiter_base {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // Throws std::invalid_argument (naming the value) when the rate is zero, slack is negative, per is not positive,
  // or interval * (slack + 1) exceeds ~146 years. The interval is rounded up to whole nanoseconds (so at most 1e9
  // callers per second pass). An infinite rate lets every caller through at once and never touches the state.
  explicit basic_pacer(rate r, pacer_options options = {}) : rate_(r), slack_(options.slack) {
    if (r.is_zero()) throw std::invalid_argument("admit::pacer: the rate must be positive, got " + r.to_string());
    if (options.slack < 0) {
      throw std::invalid_argument("admit::pacer: slack must not be negative, got " + std::to_string(options.slack));
    }
    if (options.per.count() <= 0) {
      throw std::invalid_argument("admit::pacer: per must be positive, got " + std::to_string(options.per.count()) +
                                  "ns");
    }
    const double ns = std::ceil(r.interval_ns() * (static_cast<double>(options.per.count()) / 1e9));
    constexpr double limit = 4.6e18;  // ~146 years: interval * (slack + 1) must stay well inside int64
    if (!(ns * (static_cast<double>(options.slack) + 1) < limit)) {
      throw std::invalid_argument("admit::pacer: interval (" + detail::format_double(ns) + "ns) times slack + 1 (" +
                                  std::to_string(options.slack) + " + 1) is too large");
    }
    interval_ = static_cast<std::int64_t>(ns);
    max_slack_ = interval_ * slack_;
  }

  basic_pacer(const basic_pacer&) = delete;
  basic_pacer& operator=(const basic_pacer&) = delete;

  // Claims the next slot and sleeps (detail::sleep_until on Clock) until it starts; returns the time the caller was
  // let through: the slot's start, or Clock::now() when the slot had already begun (uber's Take). Fails only with
  // queue_full (max_waiters() callers already sleeping towards their slots: rejected at once, claiming nothing; a
  // caller whose slot has begun never sleeps and is never refused for the bound). Thread safety: any number of
  // threads may take at once; each gets its own slot, in the order their compare-and-swap succeeded (not
  // necessarily call order).
  expected<time_point, errc> take() { return pass(1, max_ns, std::stop_token{}); }

  // take(), cancellable: fails with cancelled when `stop` is requested before the slot starts (at once, claiming
  // nothing, when it is already requested). A cancelled caller gives its slot back when nobody claimed a later slot
  // meanwhile (the state is exactly as if it had never come); otherwise its slot stays unused — the callers after it
  // keep their slots (they are already sleeping towards them), the pace just has a one-slot gap. Thread safety: as
  // take().
  expected<time_point, errc> take(std::stop_token stop) { return pass(1, max_ns, std::move(stop)); }

  // The verb family of the other limiters, with their result (admit/wait_result.hpp). acquire: take() of `n`
  // consecutive slots, returning when the last starts; fails with cancelled (the slots are given back as in
  // take(stop)) or queue_full. try_acquire_until: the same, but fails at once with timeout — claiming nothing, not
  // sleeping in vain — when the last slot would start after `deadline`; a deadline in the past behaves as
  // try_acquire(); `stop` cancels it as acquire's does. try_acquire_for: relative to Clock::now(); zero or negative is
  // try_acquire(). n == 0 succeeds at once. Thread safety: as take().
  wait_result acquire(std::int64_t n = 1, std::stop_token stop = {}) {
    return as_wait_result(pass(n, max_ns, std::move(stop)));
  }
  wait_result try_acquire_until(time_point deadline, std::int64_t n = 1, std::stop_token stop = {}) {
    return as_wait_result(pass(n, to_ns<Clock>(deadline), std::move(stop)));
  }
  template <class Rep, class Period>
  wait_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1,
                              std::stop_token stop = {}) {
    return try_acquire_until(to_time_point(detail::sat_add(to_ns<Clock>(Clock::now()), detail::ceil_ns(timeout))), n,
                             std::move(stop));
  }

  // Claims `n` consecutive slots without sleeping. The reservation (admit/reservation.hpp) is always ok(), holds n
  // tokens, and is ready_at() the start of the last slot, or `now` when it has begun; delay_from(now) is the wait. The
  // claim cannot be undone. n == 0 claims nothing and is ready at `now`. Edge cases: an n so large that its slots run
  // past year ~2262 saturates and exhausts the pacer. A `now` earlier than one already seen gets no slot before the
  // next free one and banks no idle time: it never gets more than a later `now` would.
  // Thread safety: lock-free, any number of threads.
  basic_reservation<Clock> reserve(std::int64_t n = 1) { return reserve_at(Clock::now(), n); }
  basic_reservation<Clock> reserve_at(time_point now, std::int64_t n = 1) {
    detail::check_n("admit::pacer", n);
    const std::int64_t t = to_ns<Clock>(now);
    if (n == 0 || interval_ == 0) return {n, now};
    return {n, to_time_point(std::max(claim(t, n, max_ns).last, t))};
  }

  // True, consuming `n` slots, when all of them have begun by `now` (the caller goes now); false, consuming nothing,
  // otherwise. n > slack + 1 never fits (unless the rate is infinite); n == 0 always does. Thread safety: lock-free;
  // a lost compare-and-swap retries, so a request that fits is never refused because of contention.
  [[nodiscard]] bool try_acquire(std::int64_t n = 1) { return try_acquire_at(Clock::now(), n); }
  [[nodiscard]] bool try_acquire_at(time_point now, std::int64_t n = 1) {
    return record_try(try_acquire_quiet_at(to_ns<Clock>(now), n), n);
  }

  // try_acquire_at with the details: limit = slack + 1 (the largest burst); remaining = callers that could pass right
  // after this decision; retry_after = time until these `n` slots have begun (nanoseconds::max() when n > slack + 1);
  // reset_after = time until the full slack is banked again. Thread safety: as try_acquire.
  [[nodiscard]] decision decide(std::int64_t n = 1) { return decide_at(Clock::now(), n); }
  [[nodiscard]] decision decide_at(time_point now, std::int64_t n = 1) {
    detail::check_n("admit::pacer", n);
    const std::int64_t t = to_ns<Clock>(now);
    decision d;
    d.limit = slack_ + 1;
    if (interval_ == 0) {
      record_try(true, n);
      d.admitted = true;
      d.remaining = std::numeric_limits<std::int64_t>::max();
      return d;
    }
    if (n == 0) {
      const std::int64_t next = started(t);
      record_try(true, n);
      d.admitted = true;
      d.remaining = remaining(next, t);
      d.reset_after = reset_after(next, t);
      return d;
    }
    const claim_result c = claim(t, n, t);
    record_try(c.ok, n);
    d.admitted = c.ok;
    d.remaining = remaining(c.after, t);
    d.reset_after = reset_after(c.after, t);
    if (!c.ok) {
      d.retry_after =
          n > slack_ + 1 ? std::chrono::nanoseconds::max() : std::chrono::nanoseconds{detail::sat_sub(c.last, t)};
    }
    return d;
  }

  // How long from `now` until `n` slots would have begun, consuming nothing: 0 = now, nanoseconds::max() = never
  // (n > slack + 1). Like every call it starts the pacing clock if no call has yet (so that the answer stays true).
  // Thread safety: lock-free.
  [[nodiscard]] std::chrono::nanoseconds time_until_available(std::int64_t n = 1) {
    return time_until_available_at(Clock::now(), n);
  }
  [[nodiscard]] std::chrono::nanoseconds time_until_available_at(time_point now, std::int64_t n = 1) {
    detail::check_n("admit::pacer", n);
    if (n == 0 || interval_ == 0) return std::chrono::nanoseconds{0};
    if (n > slack_ + 1) return std::chrono::nanoseconds::max();
    const std::int64_t t = to_ns<Clock>(now);
    const std::int64_t last = detail::sat_add(first_slot(started(t), t), (n - 1) * interval_);
    return std::chrono::nanoseconds{std::max<std::int64_t>(0, detail::sat_sub(last, t))};
  }

  // Configuration, as given (the interval after `per` and rounding up to whole nanoseconds). Thread safe.
  [[nodiscard]] rate get_rate() const noexcept { return rate_; }
  [[nodiscard]] std::chrono::nanoseconds interval() const noexcept { return std::chrono::nanoseconds{interval_}; }
  [[nodiscard]] std::int64_t slack() const noexcept { return slack_; }

 private:
  static constexpr std::int64_t max_ns = detail::ns_max;
  // next_ before the first call: pacing has not started.
  static constexpr std::int64_t unset = detail::ns_min;

  struct claim_result {
    bool ok;             // the slots were claimed
    std::int64_t prior;  // state before
    std::int64_t after;  // state after (== prior when !ok)
    std::int64_t last;   // start of the last of the n slots
  };

  // Rounds up, so that sleeping until the returned point never lets a caller through before its slot.
  static time_point to_time_point(std::int64_t ns) noexcept { return detail::ceil_time_point<time_point>(ns); }

  // The state, starting the pacing clock at `now` on the first call: the first caller goes at once, banking nothing.
  std::int64_t started(std::int64_t now) noexcept {
    std::int64_t cur = next_.load(std::memory_order_acquire);
    if (cur == unset && next_.compare_exchange_strong(cur, now, std::memory_order_acq_rel)) return now;
    return cur;
  }
  // The first slot a caller at `now` may claim: the next free one, or the oldest still within the slack.
  std::int64_t first_slot(std::int64_t next, std::int64_t now) const noexcept {
    return std::max(next, detail::sat_sub(now, max_slack_));
  }
  std::int64_t remaining(std::int64_t next, std::int64_t now) const noexcept {
    const std::int64_t first = first_slot(next, now);
    return first > now ? 0 : (now - first) / interval_ + 1;
  }
  std::chrono::nanoseconds reset_after(std::int64_t next, std::int64_t now) const noexcept {
    return std::chrono::nanoseconds{std::max<std::int64_t>(0, detail::sat_sub(detail::sat_add(next, max_slack_), now))};
  }

  // Claims n >= 1 consecutive slots if the last of them starts no later than `latest`. Lock-free.
  claim_result claim(std::int64_t now, std::int64_t n, std::int64_t latest) noexcept {
    std::int64_t cur = started(now);
    for (;;) {
      const std::int64_t last = detail::sat_add(first_slot(cur, now), detail::sat_mul(n - 1, interval_));
      if (last > latest) return {false, cur, cur, last};
      const std::int64_t after = detail::sat_add(last, interval_);
      // On failure `cur` is reloaded and the claim recomputed: contention never turns into a refusal.
      if (next_.compare_exchange_weak(cur, after, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return {true, cur, after, last};
      }
    }
  }

  friend struct detail::limiter_access;
  bool try_acquire_quiet(std::int64_t n) { return try_acquire_quiet_at(to_ns<Clock>(Clock::now()), n); }
  bool try_acquire_quiet_at(std::int64_t t, std::int64_t n) {
    detail::check_n("admit::pacer", n);
    if (interval_ == 0) return true;
    if (n == 0) {
      (void)started(t);  // like every call, starts the pacing clock, so that decide_at(t, 0) leaves the same state
      return true;
    }
    return claim(t, n, t).ok;
  }

  static wait_result as_wait_result(const expected<time_point, errc>& r) noexcept {
    return r ? wait_result{} : wait_result{r.error()};
  }

  // The blocking forms: through at once (no place taken), or refused at once (timeout when the last slot starts
  // after `latest`, queue_full), or a place under the bound, a claim and a sleep; gives the slots back on stop.
  // Returns the go time.
  expected<time_point, errc> pass(std::int64_t n, std::int64_t latest, std::stop_token stop) {
    detail::check_n("admit::pacer", n);
    if (stop.stop_requested()) return end_at_once(errc::cancelled, n).error();
    const time_point now = Clock::now();
    const std::int64_t t = to_ns<Clock>(now);
    if (n == 0 || interval_ == 0 || claim(t, n, t).ok) {
      (void)end_at_once(errc{}, n);
      return now;
    }
    if (last_slot_start(t, n) > std::max(latest, t)) return end_at_once(errc::timeout, n).error();
    const detail::waiter_gate::slot place = gate().enter();
    if (!place) return end_at_once(errc::queue_full, n).error();
    const claim_result c = claim(t, n, std::max(latest, t));
    if (!c.ok) return end_after<Clock>(errc::timeout, n, now).error();  // others claimed the slots in between
    const time_point go = c.last <= t ? now : to_time_point(c.last);
    if (c.last > t && !detail::sleep_until<Clock>(go, std::move(stop))) {
      // Give the slots back only if the state is still ours: every later claim moved it further (claims only ever
      // increase it), so equality means nobody claimed after us, and restoring `prior` undoes our call exactly.
      std::int64_t expected = c.after;
      next_.compare_exchange_strong(expected, c.prior, std::memory_order_acq_rel);
      return end_after<Clock>(errc::cancelled, n, now).error();
    }
    (void)end_after<Clock>(errc{}, n, now);
    return go;
  }
  // When the last of n slots claimed at t would start (nothing claimed).
  std::int64_t last_slot_start(std::int64_t t, std::int64_t n) noexcept {
    return detail::sat_add(first_slot(started(t), t), detail::sat_mul(n - 1, interval_));
  }

  rate rate_;
  std::int64_t slack_;
  std::int64_t interval_ = 0;   // ns between slots; 0 = infinite rate
  std::int64_t max_slack_ = 0;  // interval_ * slack_
  // Start of the next free slot (ns of Clock), or `unset`. Alone on its cache line.
  alignas(64) std::atomic<std::int64_t> next_{unset};
};

using pacer = basic_pacer<std::chrono::steady_clock>;

}  // namespace admit
