// cli/run/redis_source.hpp — `admit run --redis`: the permit from admit::redis::semaphore (--concurrency) and the
// start from admit::redis::gcra (--rate), so that every host shares the limit. With both, the command first takes its
// place (FIFO) and its permit, then its start from the rate: it may hold the permit while the rate makes it wait, but
// no token is taken by a command that then cannot start.
//
// What `admit inspect` shows of a holder (host, pid, command line, start) is the JSON of cli/common/local_limit.hpp's
// entry_info under run_holder_key(name, lease id) (cli/common/run_holder.hpp), written at the start and refreshed while
// the command runs; it expires by itself three lease TTLs after the last refresh.
#pragma once

#include <memory>
#include <string>

#include "cli/run/run.hpp"

namespace admit::cli {

std::unique_ptr<run::permit_source> make_redis_run_source(const run::run_settings& settings,
                                                          const run::entry_info& info);

}  // namespace admit::cli
