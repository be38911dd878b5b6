// admit/detail/admission_rule.hpp — the share rule of admit::admission on plain values: which class head to admit
// next, and the arithmetic of the classes' assured token buckets. admission.hpp states the rule; this file computes
// it. Pure functions: no state, no clock, no lock (the caller holds the admission's mutex).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "admit/decision.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/token_bucket_math.hpp"

namespace admit::detail {

// The assured bucket's state once n more are charged to it at effective time t (into debt if need be).
[[nodiscard]] inline std::int64_t assured_charge(const token_bucket_config& c, std::int64_t tat, std::int64_t t,
                                                 std::int64_t n) noexcept {
  const std::int64_t at = c.zero() ? c.frozen : t;
  return sat_add(std::max(tat, sat_sub(at, c.tol)), token_bucket_cost(c, n));
}

// How long from t until the assured bucket holds a whole token: 0 now, ns_max never (burst 0, or the zero rate).
[[nodiscard]] inline std::int64_t assured_wait(const token_bucket_config& c, std::int64_t tat,
                                               std::int64_t t) noexcept {
  if (c.burst < 1) return ns_max;
  const std::int64_t at = c.zero() ? c.frozen : t;
  const std::int64_t ready = sat_add(std::max(tat, sat_sub(at, c.tol)), c.cost1);
  if (ready <= at) return 0;
  return c.zero() ? ns_max : sat_sub(ready, at);
}

// The global bucket (state tat) can never hold n tokens, from effective time t on (n above the burst, or the zero
// rate and fewer tokens left than n).
[[nodiscard]] inline bool admission_never(const token_bucket_config& global, std::int64_t tat, std::int64_t t,
                                          std::int64_t n) noexcept {
  return !global.inf() && token_bucket_step(global, oversize_policy::reject, tat, t, n).never;
}

// The global bucket (state tat) cannot accrue `need` tokens by deadline_ns, from effective time t.
[[nodiscard]] inline bool admission_impossible_by(const token_bucket_config& global, std::int64_t tat,
                                                  std::int64_t need, std::int64_t t,
                                                  std::int64_t deadline_ns) noexcept {
  if (global.inf()) return false;
  const std::int64_t at = global.zero() ? global.frozen : t;
  const std::int64_t ready = sat_add(std::max(tat, sat_sub(at, global.tol)), token_bucket_cost(global, need));
  if (ready <= at) return false;
  return global.zero() || ready > deadline_ns;
}

// How long from effective time t until time alone could change the decision for a head of n: its tokens in the
// global bucket (state tat), or a whole token in its class's assured bucket (state assured_tat). ns_max: never
// (time alone cannot help: the infinite rate, or the tokens are there now and something else holds it back).
[[nodiscard]] inline std::int64_t admission_head_wait(const token_bucket_config& global, std::int64_t tat,
                                                      const token_bucket_config& assured, std::int64_t assured_tat,
                                                      std::int64_t t, std::int64_t n) noexcept {
  if (global.inf()) return ns_max;
  std::int64_t wait = ns_max;
  const auto g = token_bucket_step(global, oversize_policy::reject, tat, t, n);
  if (!g.never && g.wait > 0) wait = g.wait;
  const std::int64_t a = assured_wait(assured, assured_tat, t);
  if (a > 0) wait = std::min(wait, a);
  return wait;
}

// What is free now: permits (unless unlimited) and the global bucket at effective time t.
struct admission_free {
  bool limited = false;
  std::int64_t permits = 0;  // max_in_flight − held
  const token_bucket_config* global = nullptr;
  std::int64_t tat = 0;
  std::int64_t t = 0;

  [[nodiscard]] bool has_permits(std::int64_t n) const noexcept { return !limited || n <= permits; }
  [[nodiscard]] bool has_tokens(std::int64_t n) const noexcept {
    if (global->inf()) return true;
    const auto r = token_bucket_step(*global, oversize_policy::reject, tat, t, n);
    return !r.never && r.wait == 0;
  }
};

// A class's head request and its standing.
struct admission_head {
  bool present = false;  // the class has a waiting request
  std::int64_t n = 0;
  std::uint64_t arrival = 0;    // arrival order over all classes
  bool permit_entitled = true;  // no concurrency limit, or the class holds fewer than its g_c permits
  bool token_entitled = true;   // infinite rate, or the class's assured bucket holds a whole token
  bool permits_free = true;     // n permits are free (claims aside)
  bool tokens_free = true;      // the global bucket holds n tokens (claims aside)
  // The permits the class's waiters can take within its guarantee (n counts when larger): what it keeps from a
  // borrower, so that a borrower never takes a permit the class's second waiter is entitled to.
  std::int64_t permit_claim = 0;
};

// Whether head o's claim on permits (else tokens) counts against head c: c must leave o's n of it free. It does when
// o is entitled to the resource and could use it now (its other resource is free for it), and o arrived before c or
// c would borrow the resource — except in a conflict, where c arrived earlier, is entitled to the other resource and
// could use it, and o would leave c short of that: the earlier arrival prevails.
[[nodiscard]] inline bool admission_claims(const admission_head& o, const admission_head& c, bool on_permits,
                                           const admission_free& free) noexcept {
  if (on_permits ? !o.permit_entitled || !o.tokens_free : !o.token_entitled || !o.permits_free) return false;
  if (o.arrival < c.arrival) return true;
  if (on_permits ? c.permit_entitled : c.token_entitled) return false;
  const std::int64_t both = sat_add(o.n, c.n);
  const bool conflict = on_permits ? c.token_entitled && c.permits_free && !free.has_tokens(both)
                                   : c.permit_entitled && c.tokens_free && !free.has_permits(both);
  return !conflict;
}

// The head to admit next: the earliest-arrived one whose n is free, on each resource, beyond the n of every head
// whose claim counts against it (against a borrower of permits, a class's whole permit_claim counts: the borrower
// takes only what the entitled classes' waiters cannot use). heads.size() when none can be admitted.
[[nodiscard]] inline std::size_t admission_pick(const std::vector<admission_head>& heads,
                                                const admission_free& free) noexcept {
  std::size_t next = heads.size();
  for (std::size_t c = 0; c < heads.size(); ++c) {
    const admission_head& h = heads[c];
    if (!h.present || (next != heads.size() && heads[next].arrival < h.arrival)) continue;
    std::int64_t permits = h.n;
    std::int64_t tokens = h.n;
    for (std::size_t o = 0; o < heads.size(); ++o) {
      if (o == c || !heads[o].present) continue;
      if (admission_claims(heads[o], h, true, free)) {
        permits = sat_add(permits, h.permit_entitled ? heads[o].n : std::max(heads[o].n, heads[o].permit_claim));
      }
      if (admission_claims(heads[o], h, false, free)) tokens = sat_add(tokens, heads[o].n);
    }
    if (free.has_permits(permits) && free.has_tokens(tokens)) next = c;
  }
  return next;
}

}  // namespace admit::detail
