// admit/detail/keyed_policy.hpp — what admit::keyed asks of an algorithm ("a keyed policy"), and the policy of GCRA.
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
//   };
//
// A decision that leaves the state unchanged (a refusal, n == 0, an infinite rate) is never stored, so a new key that
// is refused takes no memory.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/gcra_math.hpp"
#include "admit/gcra.hpp"
#include "admit/rate.hpp"

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

// The keyed policy of a limiter type: keyed<basic_gcra<C>> uses keyed_gcra_policy<C>; a type that is itself a keyed
// policy is used as is.
template <class Limiter>
struct keyed_policy_for {
  using type = Limiter;
};
template <steady_clock_like Clock>
struct keyed_policy_for<basic_gcra<Clock>> {
  using type = keyed_gcra_policy<Clock>;
};

}  // namespace admit
