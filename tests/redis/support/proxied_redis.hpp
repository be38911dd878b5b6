// tests/redis/support/proxied_redis.hpp — a redis-server with a tcp_proxy in front of it and two connections on one io
// thread: `conn` through the proxy (what a test makes fail), `direct` around it (to look at Redis's state meanwhile).
#pragma once

#include "admit/redis/client/connection.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"

namespace admit::redis::testing {

struct proxied_redis {
  redis_server server;
  tcp_proxy proxy{server.port()};
  io_thread io;
  connection conn{io.executor(), proxy.url()};
  connection direct{io.executor(), server.url()};
};

}  // namespace admit::redis::testing
