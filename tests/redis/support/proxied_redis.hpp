// tests/redis/support/proxied_redis.hpp — a redis-server with a tcp_proxy in front of it and two connections on one io
// thread: `conn` through the proxy (what a test makes fail), `direct` around it (to look at Redis's state meanwhile).
#pragma once

#include <chrono>

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

  // Takes the link through every fault in turn, `rounds` times — replies delayed by 50 ms, a black hole, a reset in
  // the middle of a reply, each healed after — calling watch(duration) to look at Redis for that long in each phase
  // (300 ms per fault, 200 ms healed).
  template <class Watch>
  void cycle_faults(int rounds, Watch watch) {
    using std::chrono::milliseconds;
    for (int round = 0; round < rounds; ++round) {
      proxy.delay_replies(milliseconds(50));
      watch(milliseconds(300));
      proxy.heal();
      proxy.black_hole(true);
      watch(milliseconds(300));
      proxy.heal();
      proxy.reset_mid_reply();
      watch(milliseconds(300));
      proxy.heal();
      watch(milliseconds(200));
    }
  }
};

}  // namespace admit::redis::testing
