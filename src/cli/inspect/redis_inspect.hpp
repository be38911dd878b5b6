// cli/inspect/redis_inspect.hpp — `admit inspect`: the live state of a distributed semaphore (admit::redis::semaphore)
// as Redis holds it — capacity, permits available, the holders with their lease's time left and fencing token, the
// queue in order:
//
//   admit inspect --redis redis://10.0.0.5:6379 db-queries
//   admit inspect --redis redis://10.0.0.5:6379 --json --most 1000 db-queries
//
// Built only with the admit::redis target. Looking creates nothing: a name with no semaphore is an error. Holders that
// are `admit run`s show their host, pid, command line and run time (cli/run/redis_source.hpp).
#pragma once

#include <iosfwd>
#include <string>

#include "cli/inspect/inspect_options.hpp"

namespace admit::cli {

// Runs `admit inspect`. Returns 0 (the state went to `out`), 2 bad input (a bad URL included), 1 no such semaphore,
// 75 a Redis failure that may pass by waiting, 69 one that will not (see cli/common/redis_failure.hpp); the message
// goes to `err`, prefixed "admit inspect: ".
int run_inspect(const inspect_options& options, std::ostream& out, std::ostream& err);

}  // namespace admit::cli
