// cli/decide/decide_command.hpp — `admit decide`'s options on the command line (see cli/decide/decide.hpp for what
// they mean). Built only with the admit::redis target.
#pragma once

#include "cli/common/command.hpp"

namespace admit::cli {

// Adds `decide` to `app`.
[[nodiscard]] subcommand add_decide_command(CLI::App& app);

}  // namespace admit::cli
