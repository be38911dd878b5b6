// serve/command/envoy_redis_environment.hpp — envoyproxy/ratelimit's Redis variables, as the URL `--redis` takes, so
// that a service moved over with its environment file counts where it counted before (in Redis), not silently in
// this process.
//
//   REDIS_SOCKET_TYPE=tcp REDIS_URL=redis:6379 REDIS_AUTH=s3cret  ->  redis://:s3cret@redis:6379
//
// Read as envoyproxy/ratelimit reads them (src/settings/settings.go there): REDIS_URL is host:port for tcp, a path for
// unix (REDIS_SOCKET_TYPE, default unix); REDIS_TYPE single (default), cluster (REDIS_URL a comma-separated list of
// nodes: the first is the seed, the others are found from it) or sentinel (REDIS_URL "master,host:port,...");
// REDIS_AUTH "password" or "user:password"; REDIS_TLS with REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT and
// REDIS_TLS_CLIENT_KEY. What admit cannot do as asked is refused with cli::usage_error naming the variable
// (BACKEND_TYPE memcache, TLS through Sentinel or on a unix socket, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION), never
// dropped.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace admit::serve {

// The URL the variables name, or nullopt when none of them is set. One set without REDIS_URL is refused (envoyproxy/
// ratelimit would count in Redis at its default socket; admit would count in process).
// `getenv` reads one variable (nullptr or "": not set). Throws cli::usage_error.
std::optional<std::string> redis_url_from_envoy_environment(const std::function<const char*(const char*)>& getenv);

}  // namespace admit::serve
