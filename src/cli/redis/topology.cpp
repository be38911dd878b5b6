// cli/redis/topology.cpp — see topology.hpp.
#include "cli/redis/topology.hpp"

#include <string>
#include <vector>

namespace admit::cli {

std::unique_ptr<redis::cluster> cluster_if_clustered(redis::connection& conn, std::chrono::nanoseconds timeout) {
  const redis::result r = conn.execute_for(timeout, "INFO", "cluster");
  if (!r.ok() || r.value.str().find("cluster_enabled:1") == std::string::npos) return nullptr;
  return std::make_unique<redis::cluster>(conn.get_executor(), std::vector<redis::connection_options>{conn.options()});
}

}  // namespace admit::cli
