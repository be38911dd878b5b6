// serve/engine/charging_policies.hpp — GCRA and the token bucket per key under `over_limit_hits: count`: a hit over
// the limit is charged all the same, as admit::redis::gcra and token_bucket charge it with
// limiter_options::charge_refused (src/redis/lua/gcra.lua, token_bucket.lua: the same arithmetic in microseconds).
//
//   admit::keyed<charging_token_bucket> budgets{charging_token_bucket::config_type{...}};
//   admit::decision d = budgets.decide_at(user, now, tokens_used);
//   bool over = charging_verdict_over(d);
//
// Each keeps admit's own state word (keyed_policy.hpp): the instant the key's tokens were, or will be, all spent —
// tokens(t) = (t − s) / interval, at most the burst. A hit of n that fits is admitted exactly as admit's policy admits
// it. One that does not is charged: s = max(s, t − τ) + n · interval (τ: the whole burst's refill), which may put s
// beyond t — a debt. While s > t, every hit is over the limit, n = 0 too; the debt is repaid at the rate. A debt is
// capped at max_debt (2^51 µs, 71 years), as the Redis scripts cap it.
//
// keyed stores a new key's state only when a decision admits it (keyed_policy.hpp), and a charged refusal must be
// stored: so these policies answer every decision `admitted` and carry the verdict in retry_after — zero when the hit
// fitted, else the time until the key is out of debt (always positive: a charged refusal leaves a debt). Use
// charging_verdict_over(d) to read it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "admit/decision.hpp"
#include "admit/detail/gcra_math.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/keyed_policy.hpp"
#include "serve/engine/window_policies.hpp"

namespace admit::serve {

// The largest debt, s − t, in nanoseconds: 2^51 µs, the Redis scripts' cap (their times must stay exact in doubles).
inline constexpr std::int64_t max_debt = (std::int64_t{1} << 51) * 1000;

// True when a charging policy's decision was over the limit (see the header comment). Also true of admit's own
// policies' refusals, so a caller can read any policy's decision with it.
[[nodiscard]] constexpr bool charging_verdict_over(const decision& d) noexcept {
  return !d.admitted || d.retry_after > std::chrono::nanoseconds::zero();
}

struct charging_gcra {
  using base = keyed_gcra_policy<unix_clock>;
  using clock_type = unix_clock;
  using config_type = base::config_type;
  using state_type = base::state_type;

  static decision decide(const config_type& c, state_type& s, std::int64_t now_ns, std::int64_t n) noexcept {
    const std::int64_t t = admit::detail::gcra_effective(c, now_ns);
    if (n > 0) {
      const admit::detail::gcra_step_result r = admit::detail::gcra_step(c, s, t, n);
      if (r.ok) {
        s = r.next;
      } else {
        s = std::min(admit::detail::sat_add(std::max(s, admit::detail::sat_sub(t, c.tau)),
                                            admit::detail::sat_mul(n, c.interval)),
                     admit::detail::sat_add(t, max_debt));
      }
    }
    decision d;
    d.admitted = true;
    d.limit = c.burst;
    admit::detail::gcra_describe(c, s, t, d);
    // Over when the key is in debt after the charge (a refused n >= 1 always leaves one; n = 0 is over while one is
    // owed). An admission never leaves a debt: its cost fitted.
    if (s > t) d.retry_after = std::chrono::nanoseconds{admit::detail::sat_sub(s, t)};
    return d;
  }
  static std::int64_t full_at(const config_type& c, const state_type& s) noexcept { return base::full_at(c, s); }
  static state_type full_since(const config_type& c, std::int64_t at) noexcept { return base::full_since(c, at); }
};

struct charging_token_bucket {
  using base = keyed_token_bucket_policy<unix_clock>;
  using clock_type = unix_clock;
  using config_type = base::config_type;
  using state_type = base::state_type;

  static decision decide(const config_type& c, state_type& s, std::int64_t now_ns, std::int64_t n) noexcept {
    const admit::detail::token_bucket_config& b = c.bucket;
    const std::int64_t t = std::max(now_ns, s.last_now);  // a stale now is answered at the latest admission's
    if (n > 0) {
      const admit::detail::token_bucket_step_result r =
          admit::detail::token_bucket_step(b, oversize_policy::reject, s.tat, t, n);
      if (r.wait == 0) {
        s.tat = r.new_tat;
      } else {
        s.tat = std::min(admit::detail::sat_add(std::max(s.tat, admit::detail::sat_sub(t, b.tol)),
                                                admit::detail::token_bucket_cost(b, n)),
                         admit::detail::sat_add(t, max_debt));
      }
      s.last_now = t;
    }
    decision d = admit::detail::token_bucket_describe(b, true, 0, s.tat, t);
    if (s.tat > t) d.retry_after = std::chrono::nanoseconds{admit::detail::sat_sub(s.tat, t)};
    return d;
  }
  static std::int64_t full_at(const config_type& c, const state_type& s) noexcept { return base::full_at(c, s); }
  static state_type full_since(const config_type& c, std::int64_t at) noexcept { return base::full_since(c, at); }
};

}  // namespace admit::serve
