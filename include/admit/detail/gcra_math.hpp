// admit/detail/gcra_math.hpp — the arithmetic of GCRA on a plain state word, shared by admit::basic_gcra (one atomic
// state, committed by compare-and-swap) and the keyed store of <admit/keyed.hpp> (one state word per key, under its
// shard's lock). Pure functions of (configuration, state, now, n): no atomics, no clock, no allocation.
//
// The state is TAT − τ in nanoseconds (see gcra.hpp): ns_min, "long ago", is a full limiter. Times passed in are the
// effective time (gcra_effective): the clock's nanoseconds, or 0 for the zero rate, whose time stands still so that the
// state counts the tokens spent against a fixed burst.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/decision.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/rate.hpp"

namespace admit::detail {

// The shared, immutable part of a GCRA: derived once from (rate, burst, policy).
struct gcra_config {
  rate r;                  // as configured (get_rate())
  std::int64_t burst = 1;  // >= 1
  oversize_policy policy = oversize_policy::reject;
  bool inf = false;           // rate inf: admits everything, keeps no state
  bool zero = false;          // rate zero: never refills
  std::int64_t interval = 1;  // T in ns, rounded up (1 for the zero rate: a unit of counting)
  std::int64_t tau = 1;       // burst·T, the tolerance

  // Throws std::invalid_argument, naming the value, when burst < 1 or burst·T overflows an int64 of nanoseconds.
  // `who` prefixes the message ("admit::gcra").
  static gcra_config make(rate rt, std::int64_t burst, oversize_policy policy, const char* who = "admit::gcra") {
    if (burst < 1) {
      throw std::invalid_argument(std::string(who) + ": burst must be at least 1, got " + std::to_string(burst));
    }
    gcra_config c;
    c.r = rt;
    c.burst = burst;
    c.policy = policy;
    c.inf = rt.is_inf();
    c.zero = rt.is_zero();
    // Strictly up (as the token bucket), so that the limiter never admits more than the rate asked for.
    c.interval = (c.inf || c.zero) ? 1 : std::max<std::int64_t>(1, ceil_ns(rt.interval_ns()));
    c.tau = sat_mul(burst, c.interval);
    if (c.tau == ns_max) {
      throw std::invalid_argument(std::string(who) + ": burst " + std::to_string(burst) + " at rate " + rt.to_string() +
                                  " spans more than the int64 range of nanoseconds (~292 years)");
    }
    return c;
  }
};

// The state of a full limiter ("long ago").
inline constexpr std::int64_t gcra_full_state = ns_min;

// The effective time for `now_ns`: time stands still (0) for the zero rate.
[[nodiscard]] constexpr std::int64_t gcra_effective(const gcra_config& c, std::int64_t now_ns) noexcept {
  return c.zero ? 0 : now_ns;
}

// The answer of gcra_step: whether n fits at t against state s, the state to commit if so, and otherwise how long
// until it would fit (ns_max: never).
struct gcra_step_result {
  bool ok = false;
  std::int64_t next = 0;  // the state after admitting (meaningful when ok)
  std::int64_t wait = 0;  // ns from t until the request fits; 0 when ok
};

// Decides n >= 1 at effective time t against state s, without committing. n == 0 and the infinite rate are the
// caller's to short-cut (both always admit and change nothing).
[[nodiscard]] [[gnu::always_inline]] inline gcra_step_result gcra_step(const gcra_config& c, std::int64_t s,
                                                                       std::int64_t t, std::int64_t n) noexcept {
  if (n > c.burst && c.policy == oversize_policy::reject) return {false, s, ns_max};
  // A request fits when the first n·T (at most τ: an oversized request under debt needs a full limiter) of its cost
  // lies in the past; it is charged its whole cost.
  const std::int64_t check = sat_mul(std::min(n, c.burst), c.interval);
  const std::int64_t base = std::max(s, sat_sub(t, c.tau));  // sat_sub(t, tau): the state of a full limiter at t
  const std::int64_t ready = sat_add(base, check);
  if (ready > t) return {false, s, c.zero ? ns_max : sat_sub(ready, t)};
  return {true, sat_add(base, sat_mul(n, c.interval)), 0};
}

// remaining and reset_after of `d` for state s at effective time t.
inline void gcra_describe(const gcra_config& c, std::int64_t s, std::int64_t t, decision& d) noexcept {
  const std::int64_t full = sat_sub(t, c.tau);
  const std::int64_t base = std::max(s, full);
  if (base < t) {
    // t − base <= τ when full is exact; the unsigned difference cannot overflow either way.
    const std::uint64_t spare = static_cast<std::uint64_t>(t) - static_cast<std::uint64_t>(base);
    const std::uint64_t whole = spare / static_cast<std::uint64_t>(c.interval);
    d.remaining = static_cast<std::int64_t>(std::min(whole, static_cast<std::uint64_t>(c.burst)));
  } else {
    d.remaining = 0;
  }
  if (base <= full) {
    d.reset_after = std::chrono::nanoseconds{0};
  } else if (c.zero) {
    d.reset_after = std::chrono::nanoseconds::max();
  } else {
    d.reset_after = std::chrono::nanoseconds{std::max<std::int64_t>(0, sat_sub(sat_add(base, c.tau), t))};
  }
}

// The whole decision for n at `now_ns` on a plain state word, committing an admission into `s` (as basic_gcra's
// decide_at does on its atomic). n must not be negative.
[[nodiscard]] inline decision gcra_decide(const gcra_config& c, std::int64_t& s, std::int64_t now_ns,
                                          std::int64_t n) noexcept {
  decision d;
  d.limit = c.burst;
  if (c.inf) {
    d.admitted = true;
    d.remaining = c.burst;
    return d;
  }
  const std::int64_t t = gcra_effective(c, now_ns);
  if (n == 0) {
    d.admitted = true;
  } else {
    const gcra_step_result o = gcra_step(c, s, t, n);
    d.admitted = o.ok;
    d.retry_after = std::chrono::nanoseconds{o.wait};
    if (o.ok) s = o.next;
  }
  gcra_describe(c, s, t, d);
  return d;
}

// The earliest clock time (ns) from which state s is full — a state that carries no information: ns_min when it is
// full whatever the time, ns_max when it never will be (the zero rate after anything was spent).
[[nodiscard]] constexpr std::int64_t gcra_full_at(const gcra_config& c, std::int64_t s) noexcept {
  if (c.zero) return s <= -c.tau ? ns_min : ns_max;
  return sat_add(s, c.tau);
}

// The state of a limiter that became full at clock time `at` (ns_min: always full): full for every now >= at, and
// for an earlier now no fuller than any state whose gcra_full_at is <= at.
[[nodiscard]] constexpr std::int64_t gcra_full_since(const gcra_config& c, std::int64_t at) noexcept {
  if (c.zero || at == ns_min) return gcra_full_state;
  return sat_sub(at, c.tau);
}

}  // namespace admit::detail
