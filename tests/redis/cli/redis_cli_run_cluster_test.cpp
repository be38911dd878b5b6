// `admit run --redis` on a real 3-master Redis Cluster: the URL of any node seeds a cluster client, the permit is held
// on the master of the limit's slot and a second run finds it taken; with that master killed, a run is refused with
// exit 75 and a message that names the node it cannot reach and why (not "no answer" from the node in the URL).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstddef>
#include <iostream>
#include <string>

#include "admit_run_testing.hpp"
#include "child_process.hpp"
#include "redis_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::redis_cluster;
using admit::redis::testing::run_result;

// A node other than the one that serves `key`: the seed then has to route.
std::size_t other_than(const redis_cluster& rc, const std::string& key) { return (rc.owner_of(key) + 1) % rc.size; }

TEST(AdmitRunRedisCluster, ThePermitIsHeldOnTheSlotsMasterAndASecondRunFindsItTaken) {
  redis_cluster rc;
  const std::string seed = rc.url(other_than(rc, "{jobs}"));
  child_process holder(
      args{ADMIT_CLI, "run", "--redis", seed, "--name", "jobs", "--concurrency", "1", "--json", "--", "sleep", "60"});
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  // The lease is in the master of {jobs}'s slot, reached through the seed's cluster client.
  EXPECT_EQ(rc.admin(rc.owner_of("{jobs}"), {"ZCARD", "{jobs}:holders"}), "1");

  const run_result busy = run_to_end(
      args{ADMIT_CLI, "run", "--redis", seed, "--name", "jobs", "--concurrency", "1", "--no-wait", "--", "true"});
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find("is busy"), std::string::npos) << busy.err;

  ASSERT_EQ(::kill(holder.pid(), SIGTERM), 0);  // forwarded to the command; the permit is released on its exit
  (void)finish(holder);
  EXPECT_EQ(rc.admin(rc.owner_of("{jobs}"), {"ZCARD", "{jobs}:holders"}), "0");
  const run_result next = run_to_end(
      args{ADMIT_CLI, "run", "--redis", seed, "--name", "jobs", "--concurrency", "1", "--no-wait", "--", "true"});
  EXPECT_EQ(next.status, 0) << next.err;
}

TEST(AdmitRunRedisCluster, AMasterThatCannotBeReachedIsNamed) {
  redis_cluster rc;
  const std::size_t owner = rc.owner_of("{jobs}");
  const std::size_t seed = other_than(rc, "{jobs}");
  rc.kill(owner);  // the others mark it failed only after the node timeout (5 s): until then its slots are its own
  const run_result r = run_to_end(
      args{ADMIT_CLI, "run", "--redis", rc.url(seed), "--name", "jobs", "--concurrency", "1", "--json", "--", "true"},
      30s);
  EXPECT_EQ(r.status, 75) << r.err;  // a node down may come back: transient
  EXPECT_EQ(event(r.err, "not_admitted").value("reason", ""), "redis") << r.err;
  const std::string message = event(r.err, "not_admitted").value("message", "");
  EXPECT_NE(message.find("cannot reach a node of the Redis Cluster"), std::string::npos) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(rc.port(owner)) + ": "), std::string::npos) << message;
  std::cout << "[ message  ] " << message << "\n";
}

}  // namespace
