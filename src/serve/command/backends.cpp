#include "serve/command/backends.hpp"

#include <chrono>

#include "admit/redis/client/options.hpp"
#include "cli/common/message.hpp"
#include "serve/command/log.hpp"
#include "serve/engine/in_process_backend.hpp"
#include "serve/engine/redis_backend.hpp"

namespace admit::serve {

backend_choice make_backend(const std::optional<std::string>& redis_url, const std::string& redis_from,
                            bool redis_required, const configuration& initial, std::chrono::milliseconds redis_timeout,
                            std::chrono::milliseconds lease_ttl) {
  if (!redis_url) {
    in_process_options local;
    local.lease_ttl = lease_ttl;
    backend_choice c{std::make_unique<in_process_backend>(local), "in-process", {}};
    c.store->configure(initial);
    return c;
  }
  redis_backend_options opts;
  opts.url = *redis_url;
  opts.timeout = redis_timeout;
  opts.lease_ttl = lease_ttl;
  std::unique_ptr<redis_backend> store;
  try {
    redis_backend::check(initial);
    store = std::make_unique<redis_backend>(opts);
  } catch (const std::invalid_argument& e) {
    throw cli::usage_error(redis_from + ": " + e.what());
  }
  if (auto why = store->ping(std::chrono::seconds(2))) {
    if (redis_required) throw backend_unavailable(*why + " (--redis-required)");
    log::warn("Redis cannot be used yet (see error); decisions answer by the failure policy until it can",
              {{"backend", redis::redacted_url(*redis_url)}, {"error", *why}});
  }
  store->configure(initial);
  return {std::move(store), redis::redacted_url(*redis_url),
          [](const configuration& next) { redis_backend::check(next); }};
}

}  // namespace admit::serve
