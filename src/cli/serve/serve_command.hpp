// cli/serve/serve_command.hpp — `admit serve`'s options on the command line; the service itself is src/serve/
// (serve/command/serve_command.hpp: run_serve). Built only with ADMIT_SERVE.
#pragma once

#include "cli/common/command.hpp"

namespace admit::cli {

// Adds `serve` to `app`.
[[nodiscard]] subcommand add_serve_command(CLI::App& app);

}  // namespace admit::cli
