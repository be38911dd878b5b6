// `admit run --redis` as the command ends: the release, when Redis is silent (paused: it drops what a client that has
// gone sent), stopped (its socket keeps it, and it runs it once it runs again), gone (refused), or has lost the lease
// (restarted without its data; slow to answer the renewal that asks).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include "admit_run_redis.hpp"
#include "admit_run_testing.hpp"
#include "child_process.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::run_result;

#ifdef ADMIT_CLI

class AdmitRunRedisRelease : public AdmitRunRedis {
 protected:
  // A run holding `name`'s only permit (`more`: its options), started, whose command ends once the file `go` exists.
  std::unique_ptr<child_process> holder_until(const std::string& name, const args& more, const std::string& go) {
    auto c = std::make_unique<child_process>(
        run(name, args{"--concurrency", "1"} + more +
                      args{"--json", "--", "sh", "-c", "while [ ! -e \"$1\" ]; do sleep 0.05; done", "sh", go}));
    EXPECT_TRUE(wait_for_event(*c, {"started"})) << c->err();
    return c;
  }
  // A run of `name` that waits up to 20 s is admitted (and its command runs).
  void admitted_within_20s(const std::string& name) {
    const run_result next =
        admit(run(name, args{"--concurrency", "1", "--timeout", "20s", "--json", "--"} + records_ran()), 30s);
    EXPECT_EQ(next.status, 0) << next.err;
    EXPECT_TRUE(ran());
  }
};

// Redis silent as the command ends (CLIENT PAUSE): the renewal that asks whether the lease was still held gets no
// answer within a call's timeout (1 s); the release is sent all the same (it would follow that renewal, should Redis
// run it later) and gets none either, and the run ends then, after two call timeouts. The permit is not lost: a
// paused Redis drops what a client that has gone sent, so the lease holds it until its expiry, then it is free.
TEST_F(AdmitRunRedisRelease, ARedisSilentAtTheEndCostsTwoCallTimeouts) {
  const std::string go = dir_ / "go";
  const auto holder = holder_until("silent", {"--lease-ttl", "10s"}, go);
  // Long enough for the run's two call timeouts with room to spare, and over well within the lease's 10 s (an unpause
  // is itself held until the pause ends).
  server_.pause(5000ms);
  const auto start = std::chrono::steady_clock::now();
  touch(go);
  const run_result r = finish(*holder, 30s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, 0) << r.err;  // the command's own status
  EXPECT_NE(r.err.find("could not release the lease"), std::string::npos) << r.err;
  EXPECT_LT(took, 3500ms) << r.err;  // two call timeouts of 1 s, and the command's own end
  server_.unpause();
  // The lease left behind still holds the permit (renewed at most a third of its 10 s TTL before Redis paused, about
  // 5 s before this; it expires within 10 s) ...
  const run_result busy = admit(run("silent", args{"--concurrency", "1", "--no-wait", "--json", "--"} + records_ran()));
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_EQ(event(busy.err, "not_admitted").value("reason", ""), "busy") << busy.err;
  // ... and gives it back by itself at its expiry: a run that waits is admitted then.
  admitted_within_20s("silent");
}

// Redis stopped (SIGSTOP) as the command ends: what the run sends waits in the socket until Redis runs again, and
// Redis runs it then, though the run has ended — the renewal that asked whether the lease was still held included,
// which extends the lease by a whole --lease-ttl (it did, and the permit stayed taken that long after Redis came
// back). The release follows it, so the permit is free as soon as Redis runs again.
TEST_F(AdmitRunRedisRelease, ARedisStoppedAtTheEndGivesThePermitBackOnceItRuns) {
  const std::string go = dir_ / "go";
  const auto holder = holder_until("stopped", {"--lease-ttl", "60s"}, go);
  server_.freeze();
  touch(go);
  const run_result r = finish(*holder, 30s);
  server_.thaw();
  EXPECT_EQ(r.status, 0) << r.err;  // the command's own status
  EXPECT_NE(r.err.find("could not release the lease"), std::string::npos) << r.err;
  admitted_within_20s("stopped");  // the lease, renewed when Redis ran again, would hold the permit for 60 s
}

// Redis gone by the time the command ends: the lease cannot be given back, and the message says why as every other
// call's does (refused, naming the URL; or, when the command ends before the run's connection has seen Redis go, the
// connection lost during the call), not that the release timed out.
TEST_F(AdmitRunRedisRelease, AReleaseRedisRefusesSaysSo) {
  const std::string go = dir_ / "go";
  const auto holder = holder_until("gone", {}, go);
  server_.kill();
  touch(go);
  const run_result r = finish(*holder, 30s);
  EXPECT_EQ(r.status, 0) << r.err;  // the command's own status
  EXPECT_NE(r.err.find("could not release the lease"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("cannot connect to " + where() + ": connection refused") != std::string::npos ||
              r.err.find("lost the connection to " + where() + " during the call") != std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("timed out"), std::string::npos) << r.err;
}

// Redis restarted without its data while a run holds its lease, and the command ends before the next renewal: the
// release finds the lease gone, which is said as a lost lease (exit 124, the lease_lost event with action "none").
// It exited 0 in silence: a command shorter than a third of --lease-ttl ran unprotected and reported success.
TEST_F(AdmitRunRedisRelease, ALeaseFoundGoneAtTheReleaseIsSaidLost) {
  const std::string script =
      "echo ready >> \"$1\"\n"
      "while [ ! -e \"$1.go\" ]; do sleep 0.05; done\n";
  child_process c(run("gone", args{"--concurrency", "1", "--lease-ttl", "30s", "--json", "--"} + records_ran(script)));
  ASSERT_TRUE(eventually([&] { return read_text(ran_) == "ready\n"; })) << c.err();
  server_.restart();  // empty: no persistence; the next renewal would come 10 s later
  // The run's connection and its wake-up connection back (and this one): its last calls need not wait for a reconnect.
  ASSERT_TRUE(eventually([&] {
    const std::string clients = server_.admin({"CLIENT", "LIST"});
    return std::count(clients.begin(), clients.end(), '\n') >= 3;
  }));
  std::ofstream(ran_ + ".go") << "go\n";
  const run_result r = finish(c, 15s);
  EXPECT_EQ(r.status, 124) << r.err;
  const auto lost = event(r.err, "lease_lost");
  EXPECT_EQ(lost.value("action", ""), "none") << r.err;
  EXPECT_NE(lost.value("message", "").find("found as the command ended"), std::string::npos) << r.err;
  EXPECT_EQ(event(r.err, "exited")["admit_exit_status"], 124) << r.err;
}

// The same when Redis is slow as the command ends: the renewal that asks whether the lease is still held gets no
// answer within a call's timeout, and the release sent behind it is answered that there is no such lease — lost, said
// so (it ended the run without a word about it, exit 0, when that renewal went unanswered).
TEST_F(AdmitRunRedisRelease, ALeaseFoundGoneByTheReleaseAfterAnUnansweredRenewalIsSaidLost) {
  const std::string go = dir_ / "go";
  const auto holder = holder_until("slow", {"--lease-ttl", "30s"}, go);
  (void)server_.admin({"FLUSHALL"});  // the lease gone, as Redis restarted without its data would have it
  server_.pause(1500ms);              // past the renewal's 1 s timeout, within the release's
  touch(go);
  const run_result r = finish(*holder, 15s);
  EXPECT_EQ(r.status, 124) << r.err;
  EXPECT_EQ(event(r.err, "lease_lost").value("action", ""), "none") << r.err;
}

#endif  // ADMIT_CLI

}  // namespace
