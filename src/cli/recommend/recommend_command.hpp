// cli/recommend/recommend_command.hpp — `admit recommend`'s options on the command line (see cli/recommend/options.hpp
// for what they mean and cli/common/command.hpp for how the tool runs it).
#pragma once

#include "cli/common/command.hpp"

namespace admit::cli {

// Adds `recommend` to `app`.
[[nodiscard]] subcommand add_recommend_command(CLI::App& app);

}  // namespace admit::cli
