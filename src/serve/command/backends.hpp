// serve/command/backends.hpp — which backend `admit serve` counts in: in this process (no --redis) or Redis.
#pragma once

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
  std::string description;  // for the "listening" log line, e.g. "in-process"
};

// Throws backend_unavailable (redis_required and Redis unreachable), cli::usage_error (a bad URL).
[[nodiscard]] backend_choice make_backend(const std::optional<std::string>& redis_url, bool redis_required,
                                          const configuration& initial);

}  // namespace admit::serve
