// serve/engine/service.hpp — one rate-limit decision of `admit serve`, independent of the transport: validate the
// request, match each descriptor to its rule in the current configuration (envoyproxy/ratelimit's rules: replaces,
// unlimited, shadow mode, whitelisted descriptors), count the hits in the backend, and build Envoy's response with its
// optional rate-limit headers; record the decision in the service's metrics.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "serve/config/configuration.hpp"
#include "serve/engine/backend.hpp"
#include "serve/engine/backend_health.hpp"
#include "serve/engine/rls.hpp"

namespace admit::serve {

struct service_options {
  // Headers added to response_headers_to_add (envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED): none, the IETF
  // draft's RateLimit-Limit / RateLimit-Remaining / RateLimit-Reset, or Envoy's x-ratelimit-limit / -remaining /
  // -reset.
  enum class header_style { none, ietf, envoy };
  header_style headers = header_style::none;
  double near_limit_ratio = 0.8;  // a hit above this share of the limit counts as near limit
  bool shadow_mode = false;       // every over-limit answer becomes OK (counted as a shadow-mode override)
  // What a backend failure answers (the descriptor's status and the overall code): OK (fail open) or OVER_LIMIT
  // (fail closed).
  bool fail_open = true;
  // Told when the backend starts failing, while it fails (a summary each minute, see report_backend_health) and when
  // it counts again (serve/engine/backend_health.hpp): never once per call. Called on the thread that completes a
  // decision, or the one calling report_backend_health; must not throw.
  std::function<void(const backend_event&)> on_backend_event = {};
  // Told each decision made (not a request refused as malformed), before its answer goes: for a debug log. Empty: no
  // cost. Called on the thread that completes the decision; must not throw.
  std::function<void(const rls_request&, const rls_response&)> on_decision = {};
};

// Why a request was not decided at all (the transports answer gRPC INVALID_ARGUMENT / HTTP 400).
struct rls_failure {
  std::string message;
};

struct rls_result {
  std::optional<rls_failure> failure;
  rls_response response;
};

// The answer, descriptor by descriptor, as envoyproxy/ratelimit's service assembles it (src/service/ratelimit.go):
// - Refused as a whole (rls_failure) when the domain is empty ("rate limit domain must not be empty"), the descriptor
//   list is empty ("rate limit descriptor list must not be empty"), or a descriptor's limit override has no known unit.
// - Each descriptor's hits: its own hits_addend when it has one (0 then checks without counting), else the request's,
//   0 meaning 1.
// - A descriptor of an unknown domain, or that matches no rule ("whitelisted"): OK, no current_limit, nothing counted.
// - A descriptor with a limit override (RateLimitDescriptor.limit), in a known domain, whether or not a rule matches:
//   decided on the override alone, a fixed window of its limit and unit, with no name, no replaces, no shadow mode
//   (as envoyproxy/ratelimit makes a new limit of it); concurrency rules ignore overrides.
// - `unlimited`: OK with limit_remaining 4294967295 and no current_limit, nothing counted.
// - `replaces`: a rule whose name a matched rule (of any descriptor of the request) replaces is not applied: that
//   descriptor is OK with no current_limit.
// - A rule in shadow mode answers OK where it is over the limit (counted, and counted as a shadow-mode override).
// - overall_code is OVER_LIMIT when any descriptor's code is; with the global shadow mode (service_options) the overall
//   code is then OK (the descriptors keep their codes, as there), counted apart.
// - A backend failure for a descriptor (a Redis error, a full key store): its code is OK under fail_open, OVER_LIMIT
//   otherwise, with its current_limit and no duration_until_reset; counted as a backend error.
// - duration_until_reset: whole seconds (for a fixed window, unit − now mod unit, as there).
// - Response headers (service_options::headers): the limit, remaining and reset (whole seconds) of the descriptor
//   closest to its limit — the last one over the limit if any is, else the one with the least limit_remaining among
//   those with a current_limit (the first of equals) — when one has a current_limit. A status decided by the failure
//   policy is none of them (the backend did not count it: no remaining or reset is known): when every status of a
//   request is, no header.
// - A concurrency rule that admits holds its permits under a lease: the response carries one header
//   `x-admit-lease: <id>` per lease (release them with release()). When the overall code is OVER_LIMIT the request
//   will not proceed, so its leases are released at once and no lease header is sent.
class service {
 public:
  // Takes the result by rvalue reference: a callable taking rls_result by value works too, at the cost of a move.
  using completion = std::function<void(rls_result&&)>;
  // Throws std::invalid_argument when `store` or `initial` is null.
  service(std::unique_ptr<backend> store, std::shared_ptr<const configuration> initial, service_options opts);
  ~service();

  // Decides `request` on the configuration current at the call, and calls `done` exactly once (inline for the
  // in-process backend) — unless it throws: then `done` has not been called and never will be (an answer a backend
  // delivers after it threw is dropped). `done` must not throw. Thread safety: called concurrently from many threads.
  void should_rate_limit(rls_request request, completion done);
  // The same at an explicit Unix time (fixed windows and the reset header follow it): tests and replays.
  void should_rate_limit_at(rls_request request, std::chrono::system_clock::time_point now, completion done);
  // Ends a concurrency lease (see backend::release). A release the backend could not be asked about counts as a
  // backend error (admit_serve_backend_errors_total).
  void release(std::string lease, std::function<void(release_result)> done);
  // The drain's deadline passed: decisions still waiting for the backend are answered now, by the failure policy
  // (backend::abandon).
  void abandon_waiting();

  // Installs a new configuration atomically: decisions that started keep the old one until they finish.
  void reload(std::shared_ptr<const configuration> next);
  [[nodiscard]] std::shared_ptr<const configuration> current() const;

  // The service's metrics in the Prometheus text format (decisions by domain and rule: total, over limit, near limit,
  // shadow-mode overrides; decision latency histogram; backend errors; configuration reloads and failures).
  [[nodiscard]] std::string metrics_text() const;
  // Counts a refused reload (the file kept out), for the metrics.
  void record_reload_failure();
  // Counts a request a transport refused before it reached the service (unparseable, beyond its bounds), `latency`
  // after it arrived, as admit_serve_requests_total{code="invalid"} counts the service's own refusals.
  void record_invalid_request(std::chrono::nanoseconds latency);
  // While the backend fails: hands on_backend_event the minute's summary when one is due. Call it every few seconds.
  void report_backend_health(std::chrono::steady_clock::time_point now);

 private:
  struct impl;
  struct request_state;  // one decision under way (service.cpp)
  void start(rls_request&& request, std::chrono::system_clock::time_point now, completion&& done);
  std::unique_ptr<impl> impl_;
};

}  // namespace admit::serve
