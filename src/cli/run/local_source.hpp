// cli/run/local_source.hpp — `admit run`'s permit on this host only (cli/common/local_limit.hpp).
#pragma once

#include <memory>

#include "cli/common/local_limit.hpp"
#include "cli/run/options.hpp"
#include "cli/run/permit_source.hpp"

namespace admit::cli::run {

// Throws std::system_error naming the directory when it cannot be made or used.
std::unique_ptr<permit_source> make_local_source(const run_settings& settings, const entry_info& info);

}  // namespace admit::cli::run
