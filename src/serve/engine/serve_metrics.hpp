// serve/engine/serve_metrics.hpp — `admit serve`'s Prometheus metrics: what envoyproxy/ratelimit counts per rule
// (its stats ratelimit.service.rate_limit.<key>.total_hits / over_limit / near_limit / within_limit / shadow_mode),
// plus decisions, latency, backend errors and reloads, written in the Prometheus text format (version 0.0.4).
//
//   serve_metrics m;
//   m.configure(config->rules());
//   m.record_descriptor(rule, "domain", {}, counts);   // per descriptor decided against a rule
//   std::string body = m.text(health.failing());
//
// Families (counters unless said; `domain` is the request's domain, `rule` the rule's full key, e.g.
// "domain.key_value.key2" — for a rule with detailed_metric, the request's own path "domain.key_value.key2_value2",
// as envoyproxy/ratelimit names its detailed stats; for a caller's override of the limit that matched no rule, the
// descriptor's path):
//   admit_serve_decisions_total{domain,rule}      descriptors decided against the rule
//   admit_serve_hits_total{domain,rule}           hits (hits_addend) counted against it        (total_hits)
//   admit_serve_over_limit_total{domain,rule}     hits over the limit                          (over_limit)
//   admit_serve_near_limit_total{domain,rule}     hits within the limit but above near_limit_ratio of it, and the
//                                                  hits of an over-limit call up to the limit   (near_limit)
//   admit_serve_within_limit_total{domain,rule}   hits within the limit                        (within_limit)
//   admit_serve_shadow_mode_total{domain,rule}    over-limit hits answered OK by the rule's shadow mode
//   admit_serve_requests_total{code}              requests answered: ok, over_limit, invalid (refused as malformed)
//   admit_serve_global_shadow_mode_total          over-limit answers turned OK by the global shadow mode
//   admit_serve_backend_errors_total              descriptors the backend failed to count (Redis errors, key cap):
//                                                  each was answered by the failure policy; and lease releases the
//                                                  backend could not be asked about
//   admit_serve_backend_failing                   gauge: 1 while the backend fails (from its first failed hit to the
//                                                  next hit it counts), else 0
//   admit_serve_config_reloads_total{result}      configurations installed (success) or refused (failure)
//   admit_serve_decision_seconds                  histogram of the time from a request to its answer, with the
//                                                  bucket bounds of admit::metrics::registry (1 µs … 10 s)
// Hits are split between over, near and within limit exactly as envoyproxy/ratelimit splits them (a call of n hits
// that crosses the limit counts the part above it as over limit and the part between the near-limit threshold,
// floor(limit · 0.8), and the limit as near limit).
//
// Series exist from a rule's first decision on (its domain is known then). Per-rule counters keep their totals across
// reloads (a rule is known by its full key); series of detailed metrics and of overrides without a rule are bounded
// by max_extra_series and by the bytes of their names, max_extra_bytes (a request's values make these names: 10,000
// series of 4 KiB values would otherwise hold, and print six times per /metrics, hundreds of megabytes): beyond
// either, a detailed metric counts in its rule's series and an override in rule="_other".
// Label values are escaped as the format requires, and a byte of an invalid UTF-8 sequence (a request's value in a
// detailed series) is written as U+FFFD, so the exposition always parses.
//
// Thread safety: every member may be called concurrently. A decision's recording is a few relaxed atomic additions
// (and, for a rule's first decision or a detailed metric, one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "serve/config/rule.hpp"
#include "serve/engine/rls.hpp"

namespace admit::serve {

// What one descriptor's decision adds to its rule's counters.
struct descriptor_counts {
  std::uint64_t hits = 0;  // the descriptor's hits (hits_addend)
  std::uint64_t over_limit = 0;
  std::uint64_t near_limit = 0;
  std::uint64_t within_limit = 0;
  std::uint64_t shadow_mode = 0;
};

// envoyproxy/ratelimit's split of n hits whose counter went from count_after − n to count_after against `limit`
// (near threshold: floor(limit · near_limit_ratio), computed in float as there); `shadow`: the rule is in shadow mode.
[[nodiscard]] descriptor_counts split_hits(std::uint64_t limit, std::uint64_t count_after, std::uint64_t n,
                                           double near_limit_ratio, bool shadow) noexcept;

class serve_metrics {
 public:
  static constexpr std::size_t default_max_extra_series = 10'000;
  static constexpr std::size_t default_max_extra_bytes = std::size_t{4} << 20;  // 4 MiB of extra series' names
  explicit serve_metrics(std::size_t max_extra_series = default_max_extra_series,
                         std::size_t max_extra_bytes = default_max_extra_bytes);
  ~serve_metrics();
  serve_metrics(const serve_metrics&) = delete;
  serve_metrics& operator=(const serve_metrics&) = delete;

  // The rules of the configuration now installed (indexed by rate_limit_rule::index): the fast path of record_*.
  void configure(std::span<const rate_limit_rule> rules);

  // One descriptor decided against `rule` in `domain`. `series` names the series when it is not the rule's full key
  // (a detailed metric, or an override that matched no rule): empty for the rule's own.
  void record_descriptor(const rate_limit_rule& rule, std::string_view domain, std::string_view series,
                         const descriptor_counts& counts);
  // One request answered (or refused as invalid: failure true), in `latency`.
  void record_request(rls_code overall, bool failure, std::chrono::nanoseconds latency);
  void record_backend_error(std::uint64_t n = 1);
  void record_global_shadow_mode();
  void record_reload(bool success);

  // The exposition (Content-Type: admit::metrics::registry::content_type). `backend_failing` is the gauge
  // admit_serve_backend_failing: the service's own view of its backend (backend_health::failing()).
  [[nodiscard]] std::string text(bool backend_failing) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace admit::serve
