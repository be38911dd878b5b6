// serve/engine/in_process_backend.hpp — `admit serve`'s counters in this process (the default backend, one server
// with no Redis), on admit's keyed limiters with their key cap.
//
//   auto store = std::make_unique<in_process_backend>(in_process_options{.max_keys = 100'000});
//   store->configure(*config);
//   std::vector<hit_outcome> out = store->decide_at(hits, std::chrono::system_clock::now());
//
// Per rule, by its algorithm:
// - fixed_window (the default): envoyproxy/ratelimit's Redis fixed window, decided exactly as there — windows of the
//   rule's unit aligned to Unix time (a minute window starts at each whole minute), every hit added to the window's
//   counter even when it is over the limit (as INCRBY adds it: a large refused hit still counts), over the limit iff
//   the count after the hit exceeds the limit, remaining = limit − count when not over (0 when over), and the reset
//   in whole seconds: unit − (now_s mod unit), now_s the Unix time in whole seconds, as envoyproxy/ratelimit reports
//   duration_until_reset. The counters live in admit::keyed<upstream_fixed_window> (window_policies.hpp). Under
//   over_limit_hits: drop a hit that would take the count over the limit is refused and not counted.
// - sliding_window, gcra, token_bucket: admit's algorithms with the rule's rate (requests_per_unit per unit) and, for
//   gcra and token_bucket, its burst (default requests_per_unit); admit's semantics: a refused hit counts nothing —
//   unless over_limit_hits: count, under which gcra and token_bucket charge it all the same and go into debt
//   (charging_policies.hpp), refusing every hit, 0 hits too, until it is repaid.
//   reset_after, rounded up to whole seconds: when admitted, until the key's limiter is full again; when refused, until
//   that hit could pass (refused_reset_after in backend.hpp: the debt repaid under count; one unit if it never can).
// - concurrency: at most `concurrency` permits per key held at once, counted by the library's
//   admit::keyed_concurrency_limiter (one per rule; never waiting); an admitted hit's permit is held in the lease
//   table (lease_table.hpp) under a lease id, released by release() or expired after lease_ttl; reset_after is
//   lease_ttl (in whole seconds) when admitted or refused, or a check finds permits held — the longest until the
//   permits in use are free again — and 0 for a check when none is, as on Redis.
// - A caller's override of the limit (RateLimitDescriptor.limit) is decided as envoyproxy/ratelimit decides it — a
//   fixed window of the override's unit and limit — in the rule's fixed-window counters when the rule is a fixed
//   window (so it shares the rule's counter, as it shares the Redis key there), else in counters of overrides alone.
//   Concurrency rules ignore overrides.
//
// Memory is bounded: each keyed store holds at most max_keys keys (one store per rule, and per unit of overrides),
// idle keys (whose window has passed, whose limiter is full again) are dropped as new keys arrive; a new key that
// finds its store full is answered state::failed ("key cap reached"), which the service turns into its failure
// policy. The lease table holds at most max_leases leases.
//
// Reload: configure(next) keeps the state of every rule whose identity is unchanged (full key, algorithm, limit,
// unit, burst, concurrency) and drops the state of the others; decisions in flight on the previous configuration
// finish on the state they found.
//
// Thread safety: every member may be called concurrently. decide() completes inline.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "serve/engine/backend.hpp"

namespace admit::serve {

struct in_process_options {
  std::size_t max_keys = 1'000'000;                               // per keyed store (per rule): >= 1
  std::chrono::nanoseconds lease_ttl = std::chrono::seconds(60);  // concurrency leases expire after this (> 0)
  std::size_t max_leases = 1'000'000;                             // leases held at once, over all rules (>= 1)
};

class in_process_backend final : public backend {
 public:
  // Throws std::invalid_argument naming the value for max_keys == 0, lease_ttl <= 0 or max_leases == 0.
  explicit in_process_backend(in_process_options opts = {});
  ~in_process_backend() override;
  in_process_backend(const in_process_backend&) = delete;
  in_process_backend& operator=(const in_process_backend&) = delete;

  void decide(std::shared_ptr<pending_decision> call) override;
  void release(std::string lease, std::function<void(release_result)> done) override;
  void configure(const configuration& next) override;

  // decide() without the callback: one outcome per hit, in order.
  [[nodiscard]] std::vector<hit_outcome> decide_at(std::span<const hit> hits,
                                                   std::chrono::system_clock::time_point now);
  // release() at an explicit time (leases expired by `now` are gone).
  bool release_at(std::string_view lease, std::chrono::system_clock::time_point now);
  // configure() from the rules alone (indexed by rate_limit_rule::index).
  void configure_rules(std::span<const rate_limit_rule> rules);

  // Keys stored over every store, and leases held (for tests and /metrics).
  [[nodiscard]] std::size_t keys() const;
  [[nodiscard]] std::size_t leases() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace admit::serve
