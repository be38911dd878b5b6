// cli/common/run_holder.hpp — where `admit run --redis` keeps what `admit inspect` shows of a holder: the JSON of
// entry_info (cli/common/local_limit.hpp: host, pid, command line, start) under run_holder_key(name, lease id), in the
// same hash slot as the semaphore's keys. Written by cli/run/redis_source.cpp, read by cli/inspect/redis_inspect.cpp.
#pragma once

#include <string>

namespace admit::cli {

// "{name}:run:<lease id>".
[[nodiscard]] inline std::string run_holder_key(const std::string& name, const std::string& lease_id) {
  return "{" + name + "}:run:" + lease_id;
}

}  // namespace admit::cli
