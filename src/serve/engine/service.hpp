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
};

// Why a request was not decided at all (the transports answer gRPC INVALID_ARGUMENT / HTTP 400).
struct rls_failure {
  std::string message;
};

struct rls_result {
  std::optional<rls_failure> failure;
  rls_response response;
};

class service {
 public:
  using completion = std::function<void(rls_result)>;
  service(std::unique_ptr<backend> store, std::shared_ptr<const configuration> initial, service_options opts);
  ~service();

  // Decides `request` on the configuration current at the call, and calls `done` exactly once (inline for the
  // in-process backend). Thread safety: called concurrently from many threads.
  void should_rate_limit(rls_request request, completion done);
  // Ends a concurrency lease (see backend::release).
  void release(std::string lease, std::function<void(bool)> done);

  // Installs a new configuration atomically: decisions that started keep the old one until they finish.
  void reload(std::shared_ptr<const configuration> next);
  [[nodiscard]] std::shared_ptr<const configuration> current() const;

  // The service's metrics in the Prometheus text format (decisions by domain and rule: total, over limit, near limit,
  // shadow-mode overrides; decision latency histogram; backend errors; configuration reloads and failures).
  [[nodiscard]] std::string metrics_text() const;
  // Counts a refused reload (the file kept out), for the metrics.
  void record_reload_failure();
};

}  // namespace admit::serve
