// serve/grpc/rls_server.hpp — Envoy's rate-limit service (envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit) over gRPC, on gRPC's callback API, deciding through admit::serve::service; with the standard
// grpc.health.v1.Health service (grpc++'s own).
//
//   rls_server server(svc, {.host = "0.0.0.0", .port = 0});   // 0: an ephemeral port, see port()
//   ...
//   server.shutdown(std::chrono::system_clock::now() + 10s);  // drain
//
// Answers (the gRPC status of a call):
// - OK with the RateLimitResponse (overall_code OK or OVER_LIMIT; a backend failure answers as the service's
//   fail-open / fail-closed option says, still OK at the gRPC level).
// - INVALID_ARGUMENT with a message when the request is refused: not a parseable RateLimitRequest (truncated, or a
//   `string` field that is not UTF-8, named), beyond request_limits (named), or refused by the service (rls_failure).
// - RESOURCE_EXHAUSTED (gRPC's own) for a message above max_receive_bytes.
// - INTERNAL only for an exception thrown by the service (logged).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "serve/engine/service.hpp"
#include "serve/grpc/rls_convert.hpp"

namespace admit::serve {

struct rls_server_options {
  std::string host = "0.0.0.0";  // an IPv4 or IPv6 address, or a name
  int port = 8081;               // 0: the system picks a free port
  // Largest request message accepted, in bytes (gRPC's default is also 4 MiB).
  int max_receive_bytes = 4 * 1024 * 1024;
  // Calls one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; a client queues the rest).
  int max_concurrent_streams = 1024;
  // Memory gRPC may use for connections and calls, in bytes: beyond it, gRPC refuses new calls with
  // RESOURCE_EXHAUSTED and stops reading from connections until memory is freed.
  std::size_t max_memory_bytes = std::size_t{1} << 30;
  request_limits limits;
  // SO_REUSEPORT: let other processes listen on the same port, the kernel splitting new connections between them.
  // Off by default, so that a second instance on a busy port fails instead of silently taking half of the calls (and
  // with in-process counters, half of every limit).
  bool reuse_port = false;
  // How long past shutdown's deadline a call still waiting for its decision is waited for before it is cancelled:
  // admit serve answers what waits at the deadline by the failure policy, and that answer is then sent (>= 0).
  std::chrono::milliseconds answer_grace{200};
};

class rls_server {
 public:
  // Starts listening and serving, with health SERVING. Throws std::runtime_error naming the address and the reason
  // when it cannot listen ("Address already in use"). `svc` must outlive the server.
  rls_server(service& svc, const rls_server_options& opts);
  ~rls_server();  // shutdown(now) when still running
  rls_server(const rls_server&) = delete;
  rls_server& operator=(const rls_server&) = delete;

  // The port it listens on (the one chosen when the options said 0).
  [[nodiscard]] int port() const noexcept;
  // Sets the health of the whole server and of the services "ratelimit" and
  // "envoy.service.ratelimit.v3.RateLimitService". Thread-safe.
  void set_serving(bool serving);
  // Health NOT_SERVING, stops accepting calls, lets calls in flight finish until `deadline` (and answer_grace past
  // it), then cancels those left, and returns once every call has ended. Idempotent. Not to be called from a call's
  // completion.
  void shutdown(std::chrono::system_clock::time_point deadline);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace admit::serve
