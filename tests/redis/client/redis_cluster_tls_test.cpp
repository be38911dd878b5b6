// admit::redis::cluster over TLS against a real 3-master Redis Cluster that runs TLS as managed clusters do (a TLS
// port per node, the cluster bus over TLS): from one rediss:// seed, CLUSTER SLOTS names the other masters' TLS ports
// and the client reaches every master over TLS with the seed's certificate settings (no plain connection from it on
// any node); a limiter decides exactly on each master; the semaphore's wake-up reaches its waiter; a CA that did not
// sign the nodes' certificate is refused, and the cluster says so (last_connect_error: the verify error).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/client/cluster.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_cluster.hpp"
#include "semaphore_testing.hpp"
#include "tls_certificates.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::cluster;
using admit::redis::reply;
using admit::redis::testing::eventually;
using admit::redis::testing::expect_the_release_wakes_the_waiter;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_cluster;
using admit::redis::testing::tls_certificates;

class RedisClusterTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new tls_certificates();
    rc_ = new redis_cluster(redis_cluster::tls_files{certs_->server_cert(), certs_->server_key(), certs_->client_cert(),
                                                     certs_->client_key(), certs_->ca()});
  }
  static void TearDownTestSuite() {
    delete rc_;
    rc_ = nullptr;
    delete certs_;
    certs_ = nullptr;
  }
  // The seed: node i's TLS port, the test CA (the paths hold only characters a URL query takes as they are).
  static std::string seed(std::size_t i, const std::string& ca) { return rc_->tls_url(i, "ca_file=" + ca); }

  // The clients connected to node i through its `port` (CLIENT LIST's laddr), other than the one asking.
  static int clients_on(std::size_t i, std::uint16_t port) {
    std::istringstream list(rc_->admin(i, {"CLIENT", "LIST"}));
    const std::string laddr = "laddr=127.0.0.1:" + std::to_string(port) + " ";
    int n = 0;
    for (std::string line; std::getline(list, line);) {
      if (line.find(laddr) != std::string::npos && line.find("cmd=client|list") == std::string::npos) ++n;
    }
    return n;
  }
  // A name whose hash slot each master serves, in node order.
  static std::vector<std::string> names_on_every_master(const std::string& prefix) {
    std::vector<std::string> names(redis_cluster::size);
    for (int i = 0; std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); }); ++i) {
      const std::string name = prefix + std::to_string(i);
      auto& slot = names[rc_->owner_of("{" + name + "}")];
      if (slot.empty()) slot = name;
    }
    return names;
  }

  static tls_certificates* certs_;
  static redis_cluster* rc_;
};
tls_certificates* RedisClusterTls::certs_ = nullptr;
redis_cluster* RedisClusterTls::rc_ = nullptr;

TEST_F(RedisClusterTls, ReachesEveryMasterOverTlsFromOneSeed) {
  io_thread io(2);
  cluster c(io.executor(), seed(1, certs_->ca()));
  const std::vector<std::string> keys = names_on_every_master("tls-key-");
  for (const auto& key : keys) {
    const auto r = c.execute("SET", "{" + key + "}", key);
    ASSERT_TRUE(r.ok()) << key << ": " << r.error.message() << " " << r.value;
  }
  for (std::size_t i = 0; i < redis_cluster::size; ++i) {
    EXPECT_EQ(rc_->admin(i, {"GET", "{" + keys[i] + "}"}), keys[i]) << "node " << i;
  }
  EXPECT_EQ(c.statistics().nodes, 3u);
  // Every master was reached on its TLS port, none on its plain one.
  for (std::size_t i = 0; i < redis_cluster::size; ++i) {
    EXPECT_GE(clients_on(i, rc_->tls_port(i)), 1) << "node " << i;
    EXPECT_EQ(clients_on(i, rc_->port(i)), 0) << "node " << i;
  }
}

TEST_F(RedisClusterTls, GcraOnEveryMasterAdmitsExactlyTheBurst) {
  io_thread io(2);
  cluster c(io.executor(), seed(0, certs_->ca()));
  constexpr std::int64_t burst = 10;
  for (const auto& name : names_on_every_master("tls-lim-")) {
    admit::redis::gcra limiter(c, name, admit::rate::per(1, std::chrono::hours(1)), burst, patient());
    std::vector<std::future<admit::redis::limiter_result>> futures;
    for (int i = 0; i < 25; ++i) futures.push_back(limiter.async_decide_detailed("k", 1, boost::asio::use_future));
    std::int64_t admitted = 0;
    for (auto& f : futures) {
      const auto r = f.get();
      ASSERT_TRUE(r.consulted) << name << ": " << r.error.message() << " " << r.message;
      admitted += r.decision.admitted ? 1 : 0;
    }
    EXPECT_EQ(admitted, burst) << name;
  }
}

TEST_F(RedisClusterTls, TheSemaphoresWakeUpReachesItsWaiter) {
  io_thread io;
  cluster c(io.executor(), seed(2, certs_->ca()));
  expect_the_release_wakes_the_waiter(c, "tls-jobs");  // BLMPOP on the slot's master, over TLS
}

TEST_F(RedisClusterTls, ACaThatDidNotSignTheNodesIsRefused) {
  io_thread io;
  cluster c(io.executor(), seed(0, certs_->other_ca()));
  EXPECT_FALSE(c.last_connect_error());  // nothing tried yet
  // The call waits for a connection that cannot be made, and times out without being sent; the cluster says why.
  const auto r = c.execute_command(std::chrono::steady_clock::now() + 1s, {"GET", "anything"});
  EXPECT_EQ(r.error, errc::timeout) << r.error.message() << " " << r.value;
  // The attempt failed long before the deadline; waited for all the same, not to depend on the machine's speed.
  EXPECT_TRUE(eventually([&] { return c.last_connect_error() == errc::tls_verify_failed; }))
      << c.last_connect_error().message();
  EXPECT_NE(c.last_error().find("server certificate not accepted: "), std::string::npos) << c.last_error();
  EXPECT_NE(c.last_error().find(std::to_string(rc_->tls_port(0))), std::string::npos) << c.last_error();

  // With the right CA every node connects, and nothing is down any more.
  cluster good(io.executor(), seed(0, certs_->ca()));
  ASSERT_TRUE(good.execute("PING").ok());
  EXPECT_FALSE(good.last_connect_error());
  EXPECT_EQ(good.last_error(), "");
}

}  // namespace
