#include "serve/command/backends.hpp"

#include "cli/message.hpp"
#include "serve/stand_in/backend.hpp"

namespace admit::serve {

// The in-process and Redis backends (engine/in_process_backend.hpp, engine/redis_backend.hpp) plug in here.
backend_choice make_backend(const std::optional<std::string>& redis_url, bool redis_required,
                            const configuration& initial) {
  static_cast<void>(redis_required);
  if (redis_url) {
    throw cli::usage_error("--redis " + cli::quote(*redis_url) + ": this admit serve has no Redis backend yet");
  }
  backend_choice c{stand_in::make_fixed_window_backend(), "in-process"};
  c.store->configure(initial);
  return c;
}

}  // namespace admit::serve
