// admit/detail/admission_rule.hpp — the share rule of admit::admission on plain values: which class head to admit
// next, and the arithmetic of the classes' assured token buckets. admission.hpp applies the rule stated here. Pure
// functions: no state, no clock, no lock (the caller holds the admission's mutex).
//
// The share rule. Class c has a share s_c (shares sum to at most 1). Its guarantee is
// - g_c permits: the shares of max_in_flight apportioned by largest remainder (floor(s_c·M) or ceil(s_c·M); the g_c
//   sum to min(M, floor(Σs·M)); ties go to the lower index; where shares summing to a hair above 1 would floor to
//   more than M together, the largest g_c gives up the excess), and
// - an assured token bucket of its own: rate s_c·rate, burst max(1, ceil(s_c·burst)), starting full (none when
//   s_c == 0).
// Each resource is judged on its own. The head request of class c (n permits, n tokens) is
// - *entitled to permits* while the class holds fewer than g_c permits (always, without a concurrency limit), and
// - *entitled to tokens* while its assured bucket holds at least one whole token (always, with the infinite rate).
// Admitting it takes n global tokens and n permits; if it was entitled to tokens it also charges n to its assured
// bucket (into debt when n exceeds what is there, which the class then waits out before it is entitled again), so a
// class's entitled admissions never exceed s_c·rate (plus its assured burst). Whenever something changes (an arrival,
// a release, a cancel or timeout, time reaching a head's token time), the heads are served, one admission at a time,
// until none can be:
//   - on each resource, the heads entitled to it rank first, among themselves by arrival; then the heads that would
//     borrow it;
//   - a head is admissible when, on each resource, its n is free beyond the n of every head ranking before it that
//     could use it now (whose n of the other resource is free) — against a borrower of permits, a class entitled to
//     them claims all its waiters may take within g_c, not only its head's n — so that a borrower takes only the
//     surplus over what the entitled classes can use, and an entitled head is never made to wait by one that arrived
//     after it (a head short of both resources claims neither: what it cannot use yet is not kept idle for it). One
//     conflict is settled by arrival: of two heads that each would borrow what the other is entitled to, where either
//     would leave the other short, the earlier one goes first;
//   - the earliest-arrived admissible head is admitted (admission_pick).
// So a class never waits behind another class for a resource while its own share of it is unused: a head entitled to
// a resource is only ever behind entitled heads that arrived before it, whose guarantees fit together with its own (Σ
// g_c ≤ M; the assured rates add up to at most the rate). Under saturation (every class always has requests waiting)
// each class holds about g_c permits or more when permits are scarce, and is admitted at s_c·rate or more over time
// when tokens are scarce. What the shares leave unreserved (1 − Σs) and what a class does not use is borrowed by the
// others, in arrival order (among borrowers a head that does not fit does not hold back another). A class of share 0,
// or whose g_c rounds to 0, has no guarantee of that resource: it only borrows it. Within a class, requests are served
// strictly FIFO (a large head holds back the smaller requests behind it).
//
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

// What is free now: permits (with a concurrency limit; without, the room left under a ceiling) and the global bucket
// at effective time t.
struct admission_free {
  // Without a concurrency limit, admit::admission keeps the permits held in all at most the largest max_in_flight
  // (2^59), so that no count of them can overflow (the classes' engines keep what was released, and not yet
  // collected, in 61 bits): a request beyond it waits as for a limit (never reached in practice).
  static constexpr std::int64_t unlimited_held = std::int64_t{1} << 59;  // (checked in admission_core.hpp)
  bool limited = false;
  std::int64_t permits = 0;  // max_in_flight − held (with a concurrency limit)
  const token_bucket_config* global = nullptr;
  std::int64_t tat = 0;
  std::int64_t t = 0;
  // Without a concurrency limit: the permits that may still be taken (unlimited_held − held; no ceiling by default).
  std::int64_t room = INT64_MAX;

  [[nodiscard]] bool has_permits(std::int64_t n) const noexcept { return limited ? n <= permits : n <= room; }
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

// A class as the share rule weighs it: its guarantee and what it holds.
struct admission_class_state {
  std::int64_t guaranteed = 0;  // g_c: the permits it is guaranteed
  std::int64_t held = 0;        // the permits it holds now
  // Its assured bucket and that bucket's state; nullptr for a sole class with the whole share, whose assured bucket is
  // the global bucket (it is entitled to every token there is).
  const token_bucket_config* assured = nullptr;
  std::int64_t assured_tat = ns_min;
};

// Sets h's entitlements for class k at free.t: to permits while it holds fewer than its guarantee (always without a
// concurrency limit), to tokens while its assured bucket holds a whole token (always with the infinite rate).
inline void admission_entitle(const admission_class_state& k, const admission_free& free, admission_head& h) noexcept {
  if (free.limited) h.permit_entitled = k.held < k.guaranteed;
  if (!free.global->inf() && k.assured != nullptr)
    h.token_entitled = assured_wait(*k.assured, k.assured_tat, free.t) == 0;
}

// The standing of class k's head request of n (arrival order `arrival`), its class's waiters asking for queued_n
// permits in all (the head's included).
[[nodiscard]] inline admission_head admission_stand(const admission_class_state& k, std::int64_t n,
                                                    std::uint64_t arrival, std::int64_t queued_n,
                                                    const admission_free& free) noexcept {
  admission_head h;
  h.present = true;
  h.n = n;
  h.arrival = arrival;
  admission_entitle(k, free, h);
  if (h.permit_entitled) h.permit_claim = std::min(queued_n, k.guaranteed - k.held);
  h.permits_free = free.has_permits(n);
  h.tokens_free = free.has_tokens(n);
  return h;
}

// The state of a class's assured bucket (`assured`, state `tat`; nullptr for a sole class) once its head, standing
// as h, is admitted with n tokens at effective time t: charged when it was entitled to tokens (into debt if need be),
// unchanged when it borrowed them or the class is sole.
[[nodiscard]] inline std::int64_t admission_assured_after(const token_bucket_config* assured, std::int64_t tat,
                                                          const admission_head& h, std::int64_t t,
                                                          std::int64_t n) noexcept {
  if (!h.token_entitled || assured == nullptr || assured->inf()) return tat;
  return assured_charge(*assured, tat, t, n);
}

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
