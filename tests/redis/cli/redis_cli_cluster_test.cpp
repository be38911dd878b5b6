// `admit run`, `admit decide` and `admit inspect` with --redis on a real 3-master Redis Cluster: the URL of any node
// seeds a cluster client, so a limit whose slot another master serves is decided there (no MOVED error); the run's
// permit is held on the master of its slot, a second run finds it taken and `admit inspect` through another node
// shows its holder; the slot's master's error reply is told as that node's; with that master killed, run, decide and
// inspect fail with exit 75 and a message that names the node they cannot reach and why (not "no answer" from the
// node in the URL).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include "admit_run_testing.hpp"
#include "child_process.hpp"
#include "cli_testing.hpp"
#include "redis_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::redis_cluster;
using admit::redis::testing::run_result;

class AdmitRedisCluster : public admit::redis::testing::cli::cli_test {};

#ifdef ADMIT_CLI

// A node other than the one that serves `key`: the seed then has to route.
std::size_t other_than(const redis_cluster& rc, const std::string& key) { return (rc.owner_of(key) + 1) % rc.size; }

TEST_F(AdmitRedisCluster, ThePermitIsHeldOnTheSlotsMasterAndASecondRunFindsItTaken) {
  redis_cluster rc;
  const std::string seed = rc.url(other_than(rc, "{jobs}"));
  child_process holder(
      args{ADMIT_CLI, "run", "--redis", seed, "--name", "jobs", "--concurrency", "1", "--json", "--", "sleep", "60"});
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  // The lease is in the master of {jobs}'s slot, reached through the seed's cluster client.
  EXPECT_EQ(rc.admin(rc.owner_of("{jobs}"), {"ZCARD", "{jobs}:holders"}), "1");
  // Seen from yet another node.
  const std::string third = rc.url((rc.owner_of("{jobs}") + 2) % rc.size);
  const run_result inspected = run_to_end(args{ADMIT_CLI, "inspect", "--redis", third, "--json", "jobs"}, 10s);
  EXPECT_EQ(inspected.status, 0) << inspected.err;
  expect_inspected_holder(inspected.out, holder.pid(), "sleep 60");

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

TEST_F(AdmitRedisCluster, EachLimitIsDecidedOnItsSlotsMaster) {
  redis_cluster rc;
  // A limit name on each master, decided through node 0: two of them are served elsewhere.
  std::vector<std::string> names(rc.size);
  for (int i = 0; std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); }); ++i) {
    const std::string name = "api" + std::to_string(i);
    if (names[rc.owner_of("{" + name + "}")].empty()) names[rc.owner_of("{" + name + "}")] = name;
  }
  for (std::size_t node = 0; node < rc.size; ++node) {
    const args decide{ADMIT_CLI, "decide", "--redis", rc.url(0), "--name", names[node], "--rate", "1/h", "--json", "k"};
    const run_result first = run_to_end(decide, 10s);
    EXPECT_EQ(first.status, 0) << names[node] << ": " << first.err;
    EXPECT_NE(first.out.find("\"decided_by\": \"redis\""), std::string::npos) << first.out;
    const run_result second = run_to_end(decide, 10s);
    EXPECT_EQ(second.status, 75) << names[node] << ": " << second.err;  // refused: the burst of 1 is spent
    EXPECT_EQ(rc.admin(node, {"EXISTS", "{" + names[node] + "}:k"}), "1") << names[node];
  }
}

// An error reply comes from the master of the limit's slot, not from the seed: the message says so (it named the seed
// as the server that answered).
TEST_F(AdmitRedisCluster, AnErrorReplyIsTheSlotsMastersNotTheSeeds) {
  redis_cluster rc;
  const std::size_t owner = rc.owner_of("{jobs}");
  const std::size_t seed = other_than(rc, "{jobs}");
  // Over its memory limit, the master refuses the script's writes.
  ASSERT_EQ(rc.admin(owner, {"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
  ASSERT_EQ(rc.admin(owner, {"CONFIG", "SET", "maxmemory", "1"}), "OK");
  const run_result decided =
      run_to_end(args{ADMIT_CLI, "decide", "--redis", rc.url(seed), "--name", "jobs", "--rate", "1/h", "k"}, 30s);
  EXPECT_NE(decided.status, 0) << decided.err;
  const std::string cluster = "a node of the Redis Cluster that " + rc.url(seed) + " belongs to";
  EXPECT_NE(decided.err.find(cluster + " answered with an error: "), std::string::npos) << decided.err;
  EXPECT_NE(decided.err.find("OOM"), std::string::npos) << decided.err;
  EXPECT_EQ(decided.err.find(rc.url(seed) + " answered"), std::string::npos) << decided.err;
  std::cout << "[ message  ] exit " << decided.status << ": " << decided.err;
}

TEST_F(AdmitRedisCluster, AMasterThatCannotBeReachedIsNamed) {
  redis_cluster rc;
  const std::size_t owner = rc.owner_of("{jobs}");
  const std::size_t seed = other_than(rc, "{jobs}");
  // The others would mark it failed after the node timeout, and then answer CLUSTERDOWN: not within this test.
  for (std::size_t i = 0; i < rc.size; ++i) {
    if (i == owner) continue;
    ASSERT_EQ(rc.admin(i, {"CONFIG", "SET", "cluster-node-timeout", "600000"}), "OK");
  }
  rc.kill(owner);
  const run_result r = run_to_end(
      args{ADMIT_CLI, "run", "--redis", rc.url(seed), "--name", "jobs", "--concurrency", "1", "--json", "--", "true"},
      30s);
  EXPECT_EQ(r.status, 75) << r.err;  // a node down may come back: transient
  EXPECT_EQ(event(r.err, "not_admitted").value("reason", ""), "redis") << r.err;
  const std::string message = event(r.err, "not_admitted").value("message", "");
  EXPECT_NE(message.find("cannot reach a node of the Redis Cluster"), std::string::npos) << message;
  const std::string node = "127.0.0.1:" + std::to_string(rc.port(owner)) + ": ";
  EXPECT_NE(message.find(node), std::string::npos) << message;
  std::cout << "[ message  ] " << message << "\n";

  // admit decide and admit inspect name it too.
  const run_result decided =
      run_to_end(args{ADMIT_CLI, "decide", "--redis", rc.url(seed), "--name", "jobs", "--rate", "1/h", "k"}, 30s);
  EXPECT_EQ(decided.status, 75) << decided.err;
  EXPECT_NE(decided.err.find("cannot reach a node of the Redis Cluster"), std::string::npos) << decided.err;
  EXPECT_NE(decided.err.find(node), std::string::npos) << decided.err;
  const run_result inspected = run_to_end(args{ADMIT_CLI, "inspect", "--redis", rc.url(seed), "jobs"}, 30s);
  EXPECT_EQ(inspected.status, 75) << inspected.err;
  EXPECT_NE(inspected.err.find(node), std::string::npos) << inspected.err;
}

#endif

}  // namespace
