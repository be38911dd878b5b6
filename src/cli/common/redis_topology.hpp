// cli/common/redis_topology.hpp — whether the server a command is pointed at (--redis URL) is a Redis Cluster node.
// Every key of one limit is "{name}:...", in one hash slot; on a cluster that slot may be served by another node, so
// the limit goes through a cluster client seeded with the URL's server, which routes to it and follows redirections.
#pragma once

#include <chrono>
#include <memory>
#include <system_error>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"

namespace admit::cli {

struct topology {
  std::error_code error;                  // INFO got no answer (timeout, connection lost...): not known, ask again
  std::unique_ptr<redis::cluster> nodes;  // a cluster node's: a cluster client seeded with it; else null
};

// Asks conn's server `INFO cluster` within `timeout`. A cluster node (cluster_enabled:1) gets a cluster client seeded
// with it (conn's options: user, password, TLS, timeouts; conn's executor). A server that refuses INFO to this user
// (an ACL user without it) is taken as a single server; one that does not answer leaves the topology unknown (ask
// again). Blocking; not on the connection's executor.
topology learn_topology(redis::connection& conn, std::chrono::nanoseconds timeout);

}  // namespace admit::cli
