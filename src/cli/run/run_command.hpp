// cli/run/run_command.hpp — `admit run`'s options on the command line (see cli/run/options.hpp for what they mean and
// cli/run/run.hpp for what it does). `--redis` needs the tool built with admit::redis (cli/run/redis_source.hpp).
#pragma once

#include "cli/common/command.hpp"

namespace admit::cli {

// Adds `run` to `app`. COMMAND [ARGS...] follows the options: after "--", or from the first word that is not one.
[[nodiscard]] subcommand add_run_command(CLI::App& app);

}  // namespace admit::cli
