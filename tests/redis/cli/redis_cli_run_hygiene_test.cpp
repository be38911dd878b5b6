// `admit run` as a process among others: what its caller leaves it (an ignored SIGCHLD, nohup's ignored SIGHUP, a
// closed stderr), what the command gets of it (its own "--", no Redis connection), and a Redis semaphore whose
// capacity another run set. Each test failed before the fix it names.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>  // (std::thread: built in the ThreadSanitizer preset, whose admit binary these tests run)

#include "admit_run_testing.hpp"
#include "child_process.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::redis_server;
using admit::redis::testing::run_result;

#ifdef ADMIT_CLI

class AdmitRunHygiene : public ::testing::Test {
 protected:
  args local(const std::string& name, const args& more) const {
    return args{ADMIT_CLI, "run", "--lock-dir", dir_ / "locks", "--name", name} + more;
  }
  // `sh -c 'SETUP; exec admit run ARGS...'`: admit run started the way SETUP leaves a process (its arguments passed
  // as the shell's positional parameters, never through the shell's parser).
  static args under_shell(const std::string& setup, const args& admit_args) {
    return args{"/bin/sh", "-c", setup + "; exec \"$@\"", "sh"} + admit_args;
  }

  temp_dir dir_;
};

// A caller that ignores SIGCHLD (the disposition survives exec): the kernel reaped the command by itself and admit run
// waited for it forever, holding the permit.
TEST_F(AdmitRunHygiene, IgnoredSigchldDoesNotHangIt) {
  const run_result r =
      run_to_end(under_shell("trap '' CHLD", local("chld", {"--concurrency", "1", "--", "sh", "-c", "exit 3"})), 20s);
  EXPECT_EQ(r.status, 3) << r.err;
}

// nohup: SIGHUP ignored. A SIGHUP then neither ends the wait nor reaches the command (it exited 129 while waiting).
TEST_F(AdmitRunHygiene, SignalsIgnoredAtStartStayIgnored) {
  const run_result r = run_to_end(
      under_shell("trap '' HUP",
                  local("hup", {"--concurrency", "1", "--", "sh", "-c", "kill -HUP \"$PPID\"; sleep 0.2; echo alive"})),
      20s);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "alive\n");
}

// stderr a pipe nobody reads any more: an event written then made admit run die of SIGPIPE, and the command with it
// (PR_SET_PDEATHSIG). The command makes an event come once the pipe's reader is gone: it sends admit run a SIGUSR1,
// whose forwarding --json reports (the command ignores the signal itself).
TEST_F(AdmitRunHygiene, ClosedStderrDoesNotKillIt) {
  const std::string marker = dir_ / "done";
  const std::string command = "trap '' USR1; sleep 0.3; kill -USR1 \"$PPID\"; sleep 0.3; echo ok > \"$1\"";
  const run_result r =
      run_to_end(args{"/bin/sh", "-c", "\"$@\" 2>&1 | true; exit 0", "sh"} +
                     local("pipe", {"--concurrency", "1", "--json", "--", "sh", "-c", command, "sh", marker}),
                 20s);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(read_text(marker), "ok\n") << "the command did not run to its end once stderr's reader was gone";
}

// Without admit's own "--", a "--" further on is the command's argument (it was taken as admit's and dropped).
TEST_F(AdmitRunHygiene, TheCommandsOwnDoubleDashIsKept) {
  const run_result r = run_to_end(local("dash", {"--concurrency", "1", "printf", "[%s]", "a", "--", "b"}), 20s);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "[a][--][b]");
}

class AdmitRunHygieneRedis : public AdmitRunHygiene {
 protected:
  args remote(const std::string& name, const args& more) const {
    return args{ADMIT_CLI, "run", "--redis", server_.url(), "--name", name} + more;
  }
  redis_server server_;
};

// The command inherited admit's Redis connections (the semaphore's and its wake-up BLMPOP).
TEST_F(AdmitRunHygieneRedis, TheCommandGetsNoRedisConnection) {
  const run_result r = run_to_end(
      remote("fds", {"--concurrency", "1", "--", "sh", "-c", "ls -l /proc/$$/fd | grep -c socket: || true"}), 20s);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "0\n");
}

// A semaphore made with capacity 5 kept it for a run that asked for 1: three such runs held it together. The same for
// another --rate.
TEST_F(AdmitRunHygieneRedis, AnotherCapacityIsRefusedUnlessSet) {
  ASSERT_EQ(run_to_end(remote("cap", {"--concurrency", "5", "--", "true"}), 20s).status, 0);
  const run_result refused = run_to_end(remote("cap", {"--concurrency", "1", "--", "echo", "ran"}), 20s);
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("is --concurrency 5, without --rate, not --concurrency 1, without --rate"),
            std::string::npos)
      << refused.err;
  // --rate is part of the definition too.
  const run_result rated = run_to_end(remote("cap", {"-c", "5", "--rate", "1/5s", "--", "echo", "ran"}), 20s);
  EXPECT_EQ(rated.status, 2);
  EXPECT_NE(rated.err.find("not --concurrency 5 --rate 12/min --burst 1"), std::string::npos) << rated.err;
  // --set-capacity changes the number of --classes only while no run holds or waits (each keeps its class's
  // number): refused naming both while one holds a permit (it said so even with nobody there, and refused).
  ASSERT_EQ(run_to_end(remote("cls", {"-c", "2", "--classes", "a=0.5,b=0.5", "--", "true"}), 20s).status, 0);
  const args three = {"-c", "2", "--classes", "a=0.25,b=0.25,c=0.25", "--set-capacity", "--", "echo", "ran"};
  {
    child_process holder(remote("cls", {"-c", "2", "--classes", "a=0.5,b=0.5", "--json", "--", "sleep", "60"}));
    ASSERT_TRUE(holder.wait_for_stderr("\"started\"")) << holder.err();
    const run_result classes = run_to_end(remote("cls", three), 20s);
    EXPECT_EQ(classes.status, 2) << classes.err;
    EXPECT_NE(
        classes.err.find("is --concurrency 2 --classes a=0.5,b=0.5, without --rate, not --concurrency 2 --classes "
                         "a=0.25,b=0.25,c=0.25, without --rate"),
        std::string::npos)
        << classes.err;
    // ... and says when it can, instead of advising the --set-capacity it was given.
    EXPECT_NE(classes.err.find("the number of classes of a limit changes only while no run of it holds a permit or "
                               "waits"),
              std::string::npos)
        << classes.err;
    EXPECT_EQ(classes.err.find("add --set-capacity"), std::string::npos) << classes.err;
    ::kill(holder.pid(), SIGTERM);  // passed on to its command; the run then releases its permit
    EXPECT_NE(holder.wait(), 0);
  }
  const run_result reclassed = run_to_end(remote("cls", three), 20s);
  EXPECT_EQ(reclassed.status, 0) << reclassed.err;
  EXPECT_EQ(reclassed.out, "ran\n");
  // The three classes are the limit's now, by their names; and back to one class, without names.
  EXPECT_EQ(
      run_to_end(remote("cls", {"-c", "2", "--classes", "a=0.25,b=0.25,c=0.25", "--class", "c", "--", "true"}), 20s)
          .status,
      0);
  EXPECT_EQ(run_to_end(remote("cls", {"-c", "2", "--", "true"}), 20s).status, 2);
  EXPECT_EQ(run_to_end(remote("cls", {"-c", "2", "--set-capacity", "--", "true"}), 20s).status, 0);
  EXPECT_EQ(run_to_end(remote("cls", {"-c", "2", "--", "true"}), 20s).status, 0);
  EXPECT_EQ(server_.admin({"EXISTS", "{cls}:run-classes"}), "0");
  const run_result set = run_to_end(remote("cap", {"--concurrency", "1", "--set-capacity", "--", "echo", "ran"}), 20s);
  EXPECT_EQ(set.status, 0) << set.err;
  const run_result inspected = run_to_end(args{ADMIT_CLI, "inspect", "--redis", server_.url(), "--json", "cap"}, 20s);
  EXPECT_NE(inspected.out.find("\"capacity\": 1,"), std::string::npos) << inspected.out;
}

// The classes' names are part of the limit for admit run: Redis's definition holds their shares by position, so
// "b=0.5,a=0.5" was the same limit as "a=0.5,b=0.5" there, and each host took its --class a for another class.
TEST_F(AdmitRunHygieneRedis, TheClassesNamesMustBeTheSameOnEveryHost) {
  ASSERT_EQ(
      run_to_end(remote("names", {"-c", "2", "--classes", "a=0.5,b=0.5", "--class", "a", "--", "true"}), 20s).status,
      0);
  // inspect names them as the runs do (it said "class 0" and "class 1").
  const run_result inspected = run_to_end(args{ADMIT_CLI, "inspect", "--redis", server_.url(), "names"}, 20s);
  EXPECT_NE(inspected.out.find("class a (share 0.5, 1 permit(s) guaranteed): 0 permit(s) held"), std::string::npos)
      << inspected.out;
  const run_result as_json = run_to_end(args{ADMIT_CLI, "inspect", "--redis", server_.url(), "--json", "names"}, 20s);
  EXPECT_NE(as_json.out.find("\"name\": \"b\", \"share\": 0.5, \"guaranteed_permits\": 1"), std::string::npos)
      << as_json.out;
  const run_result swapped =
      run_to_end(remote("names", {"-c", "2", "--classes", "b=0.5,a=0.5", "--class", "a", "--", "echo", "ran"}), 20s);
  EXPECT_EQ(swapped.status, 2) << swapped.err;
  EXPECT_EQ(swapped.out, "");
  EXPECT_NE(swapped.err.find("has --classes a=0.5,b=0.5, not --classes b=0.5,a=0.5"), std::string::npos) << swapped.err;
  const run_result other =
      run_to_end(remote("names", {"-c", "2", "--classes", "x=0.5,y=0.5", "--", "echo", "ran"}), 20s);
  EXPECT_EQ(other.status, 2) << other.err;
  // The same names run; --set-capacity renames them for every host.
  EXPECT_EQ(run_to_end(remote("names", {"-c", "2", "--classes", "a=0.5,b=0.5", "--", "true"}), 20s).status, 0);
  const run_result renamed =
      run_to_end(remote("names", {"-c", "2", "--classes", "b=0.5,a=0.5", "--set-capacity", "--", "echo", "ran"}), 20s);
  EXPECT_EQ(renamed.status, 0) << renamed.err;
  EXPECT_EQ(run_to_end(remote("names", {"-c", "2", "--classes", "a=0.5,b=0.5", "--", "true"}), 20s).status, 2);
  // A run refused for another definition leaves no names behind for it.
  ASSERT_EQ(run_to_end(remote("shares", {"-c", "2", "--classes", "a=0.75,b=0.25", "--", "true"}), 20s).status, 0);
  EXPECT_EQ(server_.admin({"DEL", "{shares}:run-classes"}), "1");
  EXPECT_EQ(run_to_end(remote("shares", {"-c", "2", "--classes", "x=0.5,y=0.5", "--", "true"}), 20s).status, 2);
  EXPECT_EQ(server_.admin({"EXISTS", "{shares}:run-classes"}), "0");
}

#endif  // ADMIT_CLI

}  // namespace
