// cli/replay/replay_command.hpp — `admit replay`'s options on the command line (see cli/replay/options.hpp for what
// they mean and cli/common/command.hpp for how the tool runs it).
#pragma once

#include "cli/common/command.hpp"

namespace admit::cli {

// Adds `replay` to `app`.
[[nodiscard]] subcommand add_replay_command(CLI::App& app);

}  // namespace admit::cli
