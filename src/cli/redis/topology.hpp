// cli/redis/topology.hpp — whether the server a command is pointed at (--redis URL) is a Redis Cluster node. Every key
// of one limit is "{name}:...", in one hash slot; on a cluster that slot may be served by another node, so the limit
// goes through a cluster client seeded with the URL's server, which routes to it and follows redirections.
#pragma once

#include <chrono>
#include <memory>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"

namespace admit::cli {

// A cluster client seeded with conn's server (its options: user, password, TLS, timeouts) when INFO cluster says
// cluster_enabled:1, on conn's executor; null for a single server, and for a server that does not answer INFO within
// `timeout` or refuses it to this user (an ACL user without INFO is taken as a single server). Blocking; not on the
// connection's executor.
std::unique_ptr<redis::cluster> cluster_if_clustered(redis::connection& conn, std::chrono::nanoseconds timeout);

}  // namespace admit::cli
