// cli/inspect/inspect_command.hpp — `admit inspect`'s options on the command line (see
// cli/inspect/inspect_options.hpp). With --redis it shows a distributed semaphore (cli/inspect/redis_inspect.hpp, when
// built with admit::redis), without it an `admit run` limit on this host (cli/inspect/local_inspect.hpp).
#pragma once

#include "cli/common/command.hpp"

namespace admit::cli {

// Adds `inspect` to `app`.
[[nodiscard]] subcommand add_inspect_command(CLI::App& app);

}  // namespace admit::cli
