// serve/http/http_server.hpp — `admit serve`'s HTTP/1.1 port (Boost.Beast): the JSON form of Envoy's rate-limit call
// (as envoyproxy/ratelimit's /json), lease release, health, metrics and the loaded rules.
//
//   POST /json         body: a RateLimitRequest in protobuf's JSON mapping, e.g.
//                      {"domain":"rl","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}
//                      → 200 (OK) or 429 (OVER_LIMIT) with the RateLimitResponse in protobuf's JSON mapping;
//                      400 with the problem in words for a body that is not such a request, or is beyond
//                      request_limits, or that the service refuses.
//   POST /release      body: {"lease":"<id>"} (the lease id a concurrency rule's answer carries in its response
//                      headers) → 200 {"released":true}, or 404 {"released":false} when no such lease is held,
//                      or 503 {"released":false,"error":...} when the backend could not be asked (Redis
//                      unreachable): the lease may still be held.
//   GET /healthcheck   200 "OK" while serving; 500 while starting or draining (as envoyproxy/ratelimit).
//   GET /metrics       the service's metrics, Prometheus text format 0.0.4.
//   GET /rules         the loaded configuration as JSON.
// A body above max_body_bytes is answered 413; other paths 404, other methods 405.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "serve/engine/service.hpp"
#include "serve/grpc/rls_convert.hpp"

namespace admit::serve {

struct http_server_options {
  std::string host = "0.0.0.0";
  int port = 8080;                       // 0: the system picks a free port
  std::size_t max_body_bytes = 1 << 20;  // request bodies above this are answered 413
  request_limits limits;
  int threads = 2;  // threads running the server's I/O
  // Connections open at once (>= 1); one accepted beyond it is closed at once, so that idle or slow clients cannot
  // take every file descriptor of the process (the gRPC port's included).
  std::size_t max_connections = 1000;
  // SO_REUSEPORT: let other processes listen on the same port (see rls_server_options::reuse_port). Off by default.
  bool reuse_port = false;
  // How long past shutdown's deadline a request still waiting for its decision keeps its connection: admit serve
  // answers what waits at the deadline by the failure policy, and that answer is then written (>= 0).
  std::chrono::milliseconds answer_grace{200};
};

class http_server {
 public:
  // Starts listening and serving (health not serving until set_serving(true)). Throws std::runtime_error naming the
  // address when it cannot listen. `svc` must outlive the server.
  http_server(service& svc, const http_server_options& opts);
  ~http_server();  // shutdown(now) when still running
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  [[nodiscard]] int port() const noexcept;
  // What GET /healthcheck answers. Thread-safe.
  void set_serving(bool serving) noexcept;
  // Health 500; while requests are in flight (until `deadline`), the port stays open and answers, so that a prober's
  // GET /healthcheck gets 500 rather than a refused connection; then it stops accepting, closes idle connections,
  // lets the requests in flight be answered until `deadline` (and answer_grace past it), and closes every connection
  // left; returns once no request is still waiting for its decision (which the backend's own timeout bounds) and the
  // threads are joined. Idempotent.
  void shutdown(std::chrono::system_clock::time_point deadline);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace admit::serve
