// cli/common/redis_topology.cpp — see redis_topology.hpp.
#include "cli/common/redis_topology.hpp"

#include <string>
#include <vector>

namespace admit::cli {

topology learn_topology(redis::connection& conn, std::chrono::nanoseconds timeout) {
  const redis::result r = conn.execute_for(timeout, "INFO", "cluster");
  topology t;
  t.error = r.error;  // an error reply is an answer (NOPERM: a single server as far as this user can tell)
  if (r.ok() && r.value.str().find("cluster_enabled:1") != std::string::npos) {
    t.nodes =
        std::make_unique<redis::cluster>(conn.get_executor(), std::vector<redis::connection_options>{conn.options()});
  }
  return t;
}

}  // namespace admit::cli
