// serve/command/serve_command.hpp — `admit serve`: the rate-limit service as a process.
//
//   admit serve --config DIR [--grpc-port N] [--http-port M] [--redis URL] ...
//
// Loads every *.yaml and *.yml in DIR (envoyproxy/ratelimit's format), listens for Envoy's RLS v3 over gRPC and for
// HTTP/JSON, logs one JSON object per line on stderr (the first info line, "listening", gives both ports, which
// matters with port 0), reloads the directory on SIGHUP and whenever a file in it changes, and drains on SIGTERM or
// SIGINT.
// Exit status: 0 after a drain, 2 for bad options or a configuration refused at start (the message names the file
// and line), 69 when a required Redis is unreachable, 1 for anything unexpected (a port that cannot be bound).
#pragma once

#include <optional>
#include <ostream>
#include <string>

namespace admit::serve {

// What the command line gave; what it did not give is taken from the environment (see apply_environment), then from
// the defaults.
struct serve_options {
  std::optional<std::string> config_dir;
  std::optional<std::string> host;  // both ports' address (default 0.0.0.0)
  std::optional<std::string> grpc_port;
  std::optional<std::string> http_port;
  std::optional<std::string> redis;
  bool redis_required = false;
  std::optional<std::string> log_level;         // debug, info (default), warn, error
  std::optional<std::string> response_headers;  // none (default), ietf, envoy
  bool shadow_mode = false;
  std::optional<bool> fail_open;             // --fail-open / --fail-closed (default: open)
  std::optional<std::string> drain_timeout;  // default 10s
  std::optional<std::string> redis_timeout;  // default 100ms
  std::optional<std::string> lease_ttl;      // default 60s
  bool reuse_port = false;                   // SO_REUSEPORT on both ports (rls_server_options::reuse_port)
};

inline constexpr const char* serve_description =
    "Run a rate-limit decision service: Envoy's rate-limit service (RLS v3) over gRPC and the same decisions over "
    "HTTP/JSON, on envoyproxy/ratelimit's YAML configuration.\n"
    "DIR holds the YAML files (one domain each); a change to a file there, or SIGHUP, reloads them (a bad file is "
    "logged and the old configuration stays). HTTP: POST /json, POST /release, GET /healthcheck, GET /metrics, "
    "GET /rules. SIGTERM or SIGINT drains: health turns NOT_SERVING (GET /healthcheck answers 500), gRPC accepts no "
    "new call, calls in flight finish (up to --drain-timeout) and admit serve exits 0. A busy port is an error (exit "
    "1) unless --reuse-port.\n"
    "Environment (used when the option is not given): ADMIT_SERVE_CONFIG (else RUNTIME_ROOT, "
    "RUNTIME_SUBDIRECTORY and RUNTIME_APPDIRECTORY joined as envoyproxy/ratelimit does), ADMIT_SERVE_GRPC_PORT or "
    "GRPC_PORT, "
    "ADMIT_SERVE_HTTP_PORT or PORT, ADMIT_SERVE_HOST or HOST, ADMIT_SERVE_REDIS (else envoyproxy/ratelimit's "
    "REDIS_URL with REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_AUTH and REDIS_TLS*), ADMIT_SERVE_LOG_LEVEL or LOG_LEVEL, "
    "ADMIT_SERVE_RESPONSE_HEADERS (or LIMIT_RESPONSE_HEADERS_ENABLED=true for ietf), ADMIT_SERVE_SHADOW_MODE or "
    "SHADOW_MODE, ADMIT_SERVE_DRAIN_TIMEOUT, ADMIT_SERVE_REDIS_TIMEOUT, ADMIT_SERVE_LEASE_TTL, ADMIT_SERVE_REUSE_PORT, "
    "ADMIT_SERVE_REDIS_REQUIRED, ADMIT_SERVE_FAIL_CLOSED (true: --fail-closed; false: --fail-open).\n"
    "Exit status: 0 after a drain; 2 a bad option, environment value or configuration (named); 69 (EX_UNAVAILABLE) "
    "Redis unreachable at start with --redis-required; 1 anything else (a port that cannot be bound).";

// Runs the service until SIGTERM or SIGINT; returns the exit status. Messages that precede the log (bad options) go
// to `err` as "admit serve: ...". Must be called before the process starts any other thread (it blocks the signals
// it handles in every thread).
int run_serve(serve_options opts, std::ostream& err);

}  // namespace admit::serve
