// admit/detail/token_bucket_math.hpp — the arithmetic of the token bucket on plain values, shared by
// admit::basic_token_bucket (one atomic TAT committed by compare-and-swap, configuration under a sequence lock) and the
// keyed store of <admit/keyed.hpp> (a TAT and the latest `now` per key, under its shard's lock). Pure functions of
// (configuration, state, time, n): no atomics, no clock, no allocation.
//
// The state is the TAT in nanoseconds (see token_bucket.hpp): the instant the bucket was or will be empty, so that
// tokens(t) = min(burst, (t − tat) / interval); ns_min, "long ago", is a full bucket. Times passed in are the effective
// time: the latest `now` seen (a stale `now` is raised to it). With the zero rate, time stands still at `frozen`.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "admit/decision.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/rate.hpp"

namespace admit::detail {

// Derived from rate and burst.
struct token_bucket_config {
  std::int64_t burst = 0;
  std::int64_t cost1 = 0;        // ns one token costs: the interval rounded up; 0 for an infinite rate
  std::int64_t tol = 0;          // ns the full burst costs, burst · cost1: tokens(t) == burst iff tat <= t - tol
  std::int64_t frozen = ns_min;  // rate zero: the instant time stopped for this bucket (cost1 is then a unit of 1 ns)

  [[nodiscard]] bool inf() const noexcept { return cost1 == 0; }
  [[nodiscard]] bool zero() const noexcept { return frozen != ns_min; }
  [[nodiscard]] double interval() const noexcept { return static_cast<double>(cost1); }
};

// The longest refill of a whole burst the state can hold: tat, now and now - tol all stay within int64.
inline constexpr std::int64_t token_bucket_max_tol = std::int64_t{1} << 62;

// n tokens cost n whole intervals. The interval is rounded up to whole nanoseconds once, and every cost — one token,
// n tokens, the whole burst — is a multiple of it, so a full burst always fits at once and the bucket never admits
// more than rate·w + burst in any window w. The rate enforced is 1/ceil(interval): slower than asked by under one
// nanosecond per token (under 0.1% up to 1,000,000/s); rates above 1e9/s act as 1e9/s.
[[nodiscard]] inline std::int64_t token_bucket_cost(const token_bucket_config& c, std::int64_t n) noexcept {
  return sat_mul(n, c.cost1);
}

// The configuration of (r, burst), time stopping at `now_ns` for the zero rate. Throws std::invalid_argument, naming
// the values (prefixed by `who`), when the burst is negative or its refill exceeds token_bucket_max_tol.
[[nodiscard]] inline token_bucket_config make_token_bucket_config(rate r, std::int64_t burst, std::int64_t now_ns,
                                                                  const char* who = "admit::token_bucket") {
  if (burst < 0) {
    throw std::invalid_argument(std::string(who) + ": burst must not be negative, got " + std::to_string(burst));
  }
  token_bucket_config c;
  c.burst = burst;
  if (r.is_zero()) c.frozen = now_ns;
  // Rate zero: time stands still, so the interval is only a unit for counting tokens; 1 ns allows any burst.
  c.cost1 = r.is_inf() ? 0 : r.is_zero() ? 1 : std::max<std::int64_t>(1, ceil_ns(r.interval_ns()));
  c.tol = sat_mul(burst, c.cost1);
  if (c.tol > token_bucket_max_tol) {
    throw std::invalid_argument(std::string(who) + ": burst " + std::to_string(burst) + " at rate " + r.to_string() +
                                " takes more than 2^62 ns (146 years) to refill, beyond the range of the state");
  }
  return c;
}

// Tokens held at effective time t for state tat (may be negative; not meaningful for the infinite rate).
[[nodiscard]] inline double token_bucket_tokens(const token_bucket_config& c, std::int64_t tat,
                                                std::int64_t t) noexcept {
  const std::int64_t at = c.zero() ? c.frozen : t;
  if (tat <= sat_sub(at, c.tol)) return static_cast<double>(c.burst);
  return static_cast<double>(at - tat) / c.interval();
}

// How long from effective time t until the bucket is out of debt (tokens >= 0): x/time/rate's answer to n == 0 (AllowN
// is false and ReserveN waits that long). Zero for the infinite and the zero rate (x/time/rate admits n == 0 at once
// under both).
[[nodiscard]] inline std::int64_t token_bucket_debt_wait(const token_bucket_config& c, std::int64_t tat,
                                                         std::int64_t t) noexcept {
  if (c.inf() || c.zero()) return 0;
  return tat > t ? sat_sub(tat, t) : 0;
}

// What taking n tokens at effective time t against state tat would do, committing nothing.
struct token_bucket_step_result {
  std::int64_t wait = 0;     // ns from t until the tokens are there: 0 now, ns_max never (or saturated)
  std::int64_t new_tat = 0;  // the state once they are taken (meaningful unless `never`)
  bool never = false;        // they never will be: n above the burst (reject), or the zero rate and too few tokens
};

// n >= 1 tokens at effective time t against state tat; the rate must not be infinite (the caller's short-cut: it
// always admits and changes nothing; n == 0 is token_bucket_debt_wait). Under oversize_policy::debt, n above the burst
// is served once the bucket is full and owes the excess.
[[nodiscard]] [[gnu::always_inline]] inline token_bucket_step_result token_bucket_step(const token_bucket_config& c,
                                                                                       oversize_policy policy,
                                                                                       std::int64_t tat, std::int64_t t,
                                                                                       std::int64_t n) noexcept {
  const std::int64_t at = c.zero() ? c.frozen : t;  // rate zero: time stands still, nothing refills
  const std::int64_t full_at = sat_sub(at, c.tol);
  const std::int64_t base = std::max(tat, full_at);
  std::int64_t ready = 0;  // when the request can be served
  std::int64_t new_tat = 0;
  if (n > c.burst) {
    if (policy == oversize_policy::reject) return {ns_max, tat, true};
    // Debt: served once the bucket is full, then owes the excess.
    ready = sat_add(tat, c.tol);
    new_tat = sat_add(base, token_bucket_cost(c, n));
  } else {
    new_tat = sat_add(base, token_bucket_cost(c, n));
    ready = new_tat;
  }
  if (c.zero() && ready > at) return {ns_max, tat, true};  // never refills
  return {ready > at ? sat_sub(ready, at) : 0, new_tat, false};
}

// The decision of a request at effective time t: admitted or not, `wait` as token_bucket_step said (ignored when
// admitted), `tat` the state after it (committed when admitted).
[[nodiscard]] [[gnu::always_inline]] inline decision token_bucket_describe(const token_bucket_config& c, bool admitted,
                                                                           std::int64_t wait, std::int64_t tat,
                                                                           std::int64_t t) noexcept {
  decision d;
  d.admitted = admitted;
  d.limit = c.burst;
  if (c.inf()) {
    d.remaining = c.burst;
    return d;
  }
  const double tokens = token_bucket_tokens(c, tat, t);
  d.remaining = tokens > 0 ? static_cast<std::int64_t>(std::floor(tokens)) : 0;
  if (!admitted) d.retry_after = std::chrono::nanoseconds{wait};
  if (c.zero()) {
    d.reset_after =
        tokens >= static_cast<double>(c.burst) ? std::chrono::nanoseconds{0} : std::chrono::nanoseconds::max();
  } else {
    const std::int64_t full_at = sat_add(tat, c.tol);
    d.reset_after = std::chrono::nanoseconds{std::max<std::int64_t>(0, sat_sub(full_at, t))};
  }
  return d;
}

// The whole decision (basic_token_bucket::decide_at) for n at `now_ns` on plain values: the state `tat` and the latest
// `now` of an admission, `last_now` (ns_min: none), both committed when admitted. n must not be negative. n == 0 takes
// nothing and is refused only while the bucket is in debt (x/time/rate AllowN(t, 0)).
[[nodiscard]] inline decision token_bucket_decide(const token_bucket_config& c, oversize_policy policy,
                                                  std::int64_t& tat, std::int64_t& last_now, std::int64_t now_ns,
                                                  std::int64_t n) noexcept {
  const std::int64_t t = std::max(now_ns, last_now);
  if (c.inf()) return token_bucket_describe(c, true, 0, tat, t);
  if (n == 0) {
    const std::int64_t wait = token_bucket_debt_wait(c, tat, t);
    return token_bucket_describe(c, wait == 0, wait, tat, t);
  }
  const token_bucket_step_result r = token_bucket_step(c, policy, tat, t, n);
  if (r.wait != 0) return token_bucket_describe(c, false, r.wait, tat, t);
  tat = r.new_tat;
  last_now = t;
  return token_bucket_describe(c, true, 0, tat, t);
}

}  // namespace admit::detail
