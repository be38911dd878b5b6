// admit/keyed_policy.hpp — what admit::keyed asks of an algorithm (a "keyed policy"), and the policies of GCRA and
// of the token bucket. Write one to key an algorithm of your own: admit::keyed<my_policy> then holds its state per key.
//
//   static_assert(admit::keyed_policy<my_policy>);
//   admit::keyed<my_policy> per_client{my_policy::config_type{...}};   // one state_type per key
//
// A keyed policy splits a limiter into the configuration every key shares (held once by the keyed object) and the
// state each key keeps (a small value the keyed store holds per key, under its shard's lock), with pure functions:
//
//   struct my_policy {
//     using clock_type = ...;    // a steady_clock_like clock
//     using config_type = ...;   // shared by every key
//     using state_type = ...;    // per key: trivially copyable, equality comparable, small
//     // Decide n at now_ns (the clock's nanoseconds) against s, committing an admission into s.
//     static decision decide(const config_type&, state_type& s, std::int64_t now_ns, std::int64_t n) noexcept;
//     // The earliest clock time (ns) from which s carries no information: dropping it then and starting over from
//     // full_since(c, t) loses nothing. ns_min: always; ns_max: never.
//     static std::int64_t full_at(const config_type&, const state_type& s) noexcept;
//     // The state of a limiter that has been full since clock time `at` (ns_min: a new, full limiter). It must be
//     // full at every now >= at, and for an earlier now hold no more capacity than any state s with full_at(s) <= at:
//     // this is what makes eviction lossless for later calls and conservative for calls with an earlier now.
//     static state_type full_since(const config_type&, std::int64_t at) noexcept;
//     // Optional: the keyed(rate, burst[, oversize_policy]) constructors call make_config(r, burst[, policy]).
//   };
//
// Thread safety: keyed calls decide / full_at / full_since under the key's shard lock, so they need none of their
// own; they must not throw (they are noexcept) and should be O(1): they run while other keys of the shard wait. A
// decision that leaves the state unchanged (a refusal, n == 0, an infinite rate) is never stored, so a new key that is
// refused takes no memory. docs/keyed.md shows a complete policy.
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/gcra_math.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/gcra.hpp"
#include "admit/rate.hpp"
#include "admit/token_bucket.hpp"

namespace admit {

template <class P>
concept keyed_policy = steady_clock_like<typename P::clock_type> && std::equality_comparable<typename P::state_type> &&
    std::is_trivially_copyable_v<typename P::state_type> &&
    requires(const typename P::config_type& c, typename P::state_type& s, std::int64_t t) {
  { P::decide(c, s, t, t) } -> std::same_as<decision>;
  { P::full_at(c, s) } -> std::same_as<std::int64_t>;
  { P::full_since(c, t) } -> std::same_as<typename P::state_type>;
};

// GCRA per key: the state is one int64, TAT − τ (8 bytes a key); the configuration (rate, burst, oversize policy) is
// shared. Decisions are exactly those of admit::basic_gcra<Clock> (same arithmetic, detail/gcra_math.hpp).
template <steady_clock_like Clock = std::chrono::steady_clock>
struct keyed_gcra_policy {
  using clock_type = Clock;
  using config_type = detail::gcra_config;
  using state_type = std::int64_t;

  // As basic_gcra's constructor: throws std::invalid_argument naming the value when burst < 1 or burst·T overflows.
  static config_type make_config(rate r, std::int64_t burst, oversize_policy policy = oversize_policy::reject) {
    return detail::gcra_config::make(r, burst, policy, "admit::keyed<gcra>");
  }
  static std::int64_t limit(const config_type& c) noexcept { return c.burst; }
  static decision decide(const config_type& c, state_type& s, std::int64_t now_ns, std::int64_t n) noexcept {
    return detail::gcra_decide(c, s, now_ns, n);
  }
  static std::int64_t full_at(const config_type& c, const state_type& s) noexcept { return detail::gcra_full_at(c, s); }
  static state_type full_since(const config_type& c, std::int64_t at) noexcept {
    return detail::gcra_full_since(c, at);
  }
};

// The token bucket per key (x/time/rate semantics, as admit::basic_token_bucket<Clock>): decisions are exactly those
// of a standalone basic_token_bucket<Clock> used only through decide_at / try_acquire_at (same arithmetic,
// detail/token_bucket_math.hpp). The state is 16 bytes a key: the TAT and the latest `now` of an admission, which a
// stale `now` is raised to (so it never refills twice). The second word cannot be dropped without changing decisions:
// after an admission at t from a bucket with tokens to spare, the TAT lies well before t, and a later call with a stale
// now < t must be answered at t. No reservations, cancellation or reconfiguration per key.
//
// With the zero rate, time stands still at 0 (a standalone bucket stops it at its construction): all its arithmetic is
// relative to that instant, so the decisions are the same.
template <steady_clock_like Clock = std::chrono::steady_clock>
struct keyed_token_bucket_policy {
  using clock_type = Clock;
  struct config_type {
    detail::token_bucket_config bucket;
    oversize_policy policy = oversize_policy::reject;
    rate r;  // as configured
  };
  struct state_type {
    std::int64_t tat = detail::ns_min;       // ns_min: a full bucket
    std::int64_t last_now = detail::ns_min;  // the latest effective now of an admission (ns_min: none)
    friend bool operator==(const state_type&, const state_type&) = default;
  };

  // As basic_token_bucket's constructor (throws std::invalid_argument naming the value when the burst's refill
  // exceeds 2^62 ns), and also when burst < 1: a keyed decision's limit (the burst) must differ from the key cap's
  // refusals (limit 0, is_key_limit_refusal).
  static config_type make_config(rate r, std::int64_t burst, oversize_policy policy = oversize_policy::reject) {
    if (burst < 1) {
      throw std::invalid_argument("admit::keyed<token_bucket>: burst must be at least 1, got " + std::to_string(burst));
    }
    return {detail::make_token_bucket_config(r, burst, 0, "admit::keyed<token_bucket>"), policy, r};
  }
  static std::int64_t limit(const config_type& c) noexcept { return c.bucket.burst; }
  static decision decide(const config_type& c, state_type& s, std::int64_t now_ns, std::int64_t n) noexcept {
    return detail::token_bucket_decide(c.bucket, c.policy, s.tat, s.last_now, now_ns, n);
  }
  // Full (tokens == burst, and no stale now raised above the clock) from TAT + τ on; the zero rate never refills.
  static std::int64_t full_at(const config_type& c, const state_type& s) noexcept {
    const detail::token_bucket_config& b = c.bucket;
    if (b.inf()) return detail::ns_min;
    if (b.zero()) return s.tat <= detail::sat_sub(b.frozen, b.tol) ? detail::ns_min : detail::ns_max;
    return std::max(detail::sat_add(s.tat, b.tol), s.last_now);
  }
  // Full from `at` on; for an earlier now it holds (at − now)/interval tokens fewer than the burst, with no latest now:
  // no more than any state whose full_at <= at (such a state's TAT is <= at − τ and its effective now >= now).
  static state_type full_since(const config_type& c, std::int64_t at) noexcept {
    if (c.bucket.zero() || c.bucket.inf() || at == detail::ns_min) return {};
    return {detail::sat_sub(at, c.bucket.tol), detail::ns_min};
  }
};

// The keyed policy of a limiter type: keyed<basic_gcra<C>> uses keyed_gcra_policy<C>, keyed<basic_token_bucket<C>>
// keyed_token_bucket_policy<C>; a type that is itself a keyed policy is used as is.
template <class Limiter>
struct keyed_policy_for {
  using type = Limiter;
};
template <steady_clock_like Clock>
struct keyed_policy_for<basic_gcra<Clock>> {
  using type = keyed_gcra_policy<Clock>;
};
template <steady_clock_like Clock>
struct keyed_policy_for<basic_token_bucket<Clock>> {
  using type = keyed_token_bucket_policy<Clock>;
};

}  // namespace admit
