// cli/run/redis_source.hpp — `admit run --redis`: the permit and the start from one admit::redis::admission (the
// --concurrency limit, the --rate and the --classes decided together in Redis, with one FIFO queue per class), so that
// every host shares the limit. A run that waits holds nothing: neither a permit nor a token until it is admitted.
//
// What `admit inspect` shows of a holder or a waiter (host, pid, command line, start) is the JSON of
// cli/common/local_limit.hpp's entry_info under run_holder_key(name, lease or waiter id) (cli/common/run_holder.hpp),
// written when it joins the queue or starts and refreshed meanwhile; it expires by itself three lease TTLs after the
// last refresh.
#pragma once

#include <memory>
#include <string>

#include "cli/run/run.hpp"

namespace admit::cli {

std::unique_ptr<run::permit_source> make_redis_run_source(const run::run_settings& settings,
                                                          const run::entry_info& info);

}  // namespace admit::cli
