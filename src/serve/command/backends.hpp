// serve/command/backends.hpp — which backend `admit serve` counts in: in this process (no --redis) or Redis.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "serve/config/configuration.hpp"
#include "serve/engine/backend.hpp"

namespace admit::serve {

// A required Redis that cannot be reached at start (exit 69).
class backend_unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct backend_choice {
  std::unique_ptr<backend> store;
  // For the log: "in-process", or the Redis URL without its password ("redis://:***@10.0.0.5:6379").
  std::string description;
  // Refuses (std::invalid_argument naming the rule) a configuration this backend cannot decide; empty: every one.
  std::function<void(const configuration&)> check;
};

// No URL: in this process. A URL: Redis, pinged at once (2 s at most); unreachable is fatal with redis_required
// (backend_unavailable), else logged. Throws cli::usage_error for a bad URL or a rule Redis cannot decide.
// redis_timeout: how long a decision waits for Redis (Redis only); lease_ttl: how long an unreleased concurrency
// lease lives (both backends). The defaults of --redis-timeout and --lease-ttl:
inline constexpr std::chrono::milliseconds default_redis_timeout{100};
inline constexpr std::chrono::milliseconds default_lease_ttl{60'000};
[[nodiscard]] backend_choice make_backend(const std::optional<std::string>& redis_url, const std::string& redis_from,
                                          bool redis_required, const configuration& initial,
                                          std::chrono::milliseconds redis_timeout, std::chrono::milliseconds lease_ttl);

}  // namespace admit::serve
