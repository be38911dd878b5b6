// `admit run --redis` when Redis stops answering or the time left is short, against a real redis-server and real
// processes: a --timeout of 0s or of a few milliseconds still takes a free permit; a Redis that is connected and
// silent is said to be so while a run waits, and its return too; a pause of Redis longer than the semaphore's default
// waiter TTL but shorter than --lease-ttl keeps the waiters in their order; a Redis that falls silent before the wait,
// or right after refusing a definition, does not stretch --timeout, nor one silent longer than a wake-up call's
// deadline the process's end. Each test failed before its fix.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>  // (std::thread: built in the ThreadSanitizer preset, whose admit binary these tests run)
#include <vector>

#include "admit_run_testing.hpp"
#include "child_process.hpp"
#include "redis_server.hpp"
#include "self_exec.hpp"
#include "tcp_proxy.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::redis_server;
using admit::redis::testing::run_result;

ADMIT_CHILD_ROLE_TEST(AdmitRunOutageChild, run_role)

#ifdef ADMIT_CLI

class AdmitRunOutage : public ::testing::Test {
 protected:
  args run(const std::string& name, const args& more) const {
    return args{ADMIT_CLI, "run", "--redis", server_.url(), "--name", name} + more;
  }
  // `sh -c SCRIPT sh <dir>/ran`: the command records that it ran in that file.
  args records_ran() const { return {"sh", "-c", "echo ran >> \"$1\"", "sh", ran_}; }
  bool ran() const { return std::filesystem::exists(ran_); }
  // A run with --timeout 400ms refused within it (its own waited_s within 100 ms more, the process within 1.8 s) with
  // `status` and `reason`, its message holding `message`, the command not run. `what`: the case, for the failures.
  void expect_refused_in_time(const run_result& r, std::chrono::steady_clock::duration took, int status,
                              const std::string& reason, const std::string& message, const std::string& what) const {
    EXPECT_EQ(r.status, status) << what << ": " << r.err;
    const auto refused = event(r.err, "not_admitted");
    EXPECT_EQ(refused.value("reason", ""), reason) << what << ": " << r.err;
    EXPECT_LE(refused.value("waited_s", 99.0), 0.5) << what << ": " << r.err;  // --timeout and 100 ms
    EXPECT_LT(took, 1800ms) << what << ": " << r.err;  // and the process's own start and end (no teardown wait)
    EXPECT_NE(refused.value("message", "").find(message), std::string::npos) << what << ": " << r.err;
    EXPECT_FALSE(ran()) << what;
  }

  redis_server server_;
  temp_dir dir_;
  std::string ran_ = dir_ / "ran";
};

// --timeout 0s is --no-wait: one decision. It used to be a wait with no time for Redis to answer, refused whatever the
// limit's state ("no answer ... within 0s"); a --timeout of 1 ms was refused the same way ("no permit ... within
// --timeout") with every permit free. (0s first: it loads the semaphore's functions into this fresh server, which
// the 1 ms run's 50 ms need not cover.)
TEST_F(AdmitRunOutage, ATimeoutOfZeroOrAFewMillisecondsTakesAFreePermit) {
  for (const char* timeout : {"0s", "1ms"}) {
    std::filesystem::remove(ran_);
    const run_result r =
        run_to_end(run("short", args{"--concurrency", "5", "--timeout", timeout, "--"} + records_ran()));
    EXPECT_EQ(r.status, 0) << timeout << ": " << r.err;
    EXPECT_TRUE(ran()) << timeout;
  }
  // Busy: --timeout 0s says so at once, as --no-wait does.
  child_process holder(run("short1", {"--concurrency", "1", "--json", "--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  std::filesystem::remove(ran_);
  const run_result busy =
      run_to_end(run("short1", args{"--concurrency", "1", "--timeout", "0s", "--"} + records_ran()));
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find("is busy"), std::string::npos) << busy.err;
  EXPECT_FALSE(ran());
  ::kill(holder.pid(), SIGTERM);
  (void)finish(holder);
}

// A Redis that is connected but does not answer (paused): the waiting run says so — it used to say nothing, since the
// connection was up — and says when Redis answers again; then it runs once the holder is gone.
TEST_F(AdmitRunOutage, ARedisThatStopsAnsweringIsSaidAndSoIsItsReturn) {
  child_process holder(run("silent", {"--concurrency", "1", "--json", "--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  child_process waiter(run("silent", args{"--concurrency", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  server_.pause(3000ms);
  ASSERT_TRUE(wait_for_event(waiter, {"redis_unreachable"}, 10s)) << waiter.err();
  server_.unpause();
  ASSERT_TRUE(wait_for_event(waiter, {"redis_back"}, 10s)) << waiter.err();
  ::kill(holder.pid(), SIGTERM);
  (void)finish(holder);
  const run_result r = finish(waiter);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ran());
  const auto gone = event(r.err, "redis_unreachable");
  EXPECT_NE(gone.value("message", "").find("no answer from redis://127.0.0.1:" + std::to_string(server_.port())),
            std::string::npos)
      << r.err;
}

// Redis stops answering a waiting run for longer than the deadline of its wake-up call (a BLMPOP: the poll interval
// and the call timeout, 2 s): the run ends by --timeout, and so does its process. The wake-up loop's pause before its
// next call (1 s) was left running when the run gave up, and the process waited for it: it exited 0.5 to 0.8 s after
// saying it was not admitted.
TEST_F(AdmitRunOutage, TheProcessEndsWithTheWaitWhenAWakeUpCallFailed) {
  child_process holder(run("stuck", {"--concurrency", "1", "--json", "--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  admit::redis::testing::tcp_proxy proxy(server_.port());
  child_process waiter(args{ADMIT_CLI, "run", "--redis", proxy.url(), "--name", "stuck", "--concurrency", "1",
                            "--timeout", "2300ms", "--json", "--"} +
                       records_ran());
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  // The wake-up call, sent as the run joined the queue (and blocking 1 s in Redis), gets no answer: it fails 2 s after
  // it was sent, and the pause after it lasts 1 s more, past the run's end at 2.3 s (2.35 with its queue-leave's
  // 50 ms) unless the run joined the queue over 0.35 s after it started.
  proxy.black_hole(true);
  ASSERT_TRUE(wait_for_event(waiter, {"not_admitted"}, 10s)) << waiter.err();
  const auto refused = std::chrono::steady_clock::now();
  const run_result r = finish(waiter);
  const auto teardown = std::chrono::steady_clock::now() - refused;
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_EQ(event(r.err, "not_admitted").value("reason", ""), "redis") << r.err;
  EXPECT_LT(teardown, 400ms) << r.err;  // (0.65 s and more before the fix)
  EXPECT_FALSE(ran());
  ::kill(holder.pid(), SIGTERM);
  (void)finish(holder);
}

// Redis paused for 5 s while five runs wait: longer than the semaphore's default waiter TTL (3 polls and a call: 4 s),
// after which Redis took every waiter for dead and they joined again in the order they came back (three runs: W4 W3 W2
// W1 W5, W3 W5 W4 W2 W1, W5 W3 W4 W2 W1). A run's waiter lives as long as its lease (--lease-ttl, 10 s), so they keep
// their places and start in their order of arrival.
TEST_F(AdmitRunOutage, WaitersKeepTheirOrderThroughAPauseShorterThanTheLeaseTtl) {
  const std::string log = dir_ / "order.log", go = dir_ / "go";
  child_process holder(run("order", args{"--concurrency", "1", "--json", "--"} + record_command(log, "H", go)));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  std::vector<std::optional<child_process>> waiters(5);
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    waiters[i].emplace(
        run("order", args{"--concurrency", "1", "--json", "--"} + record_command(log, std::to_string(i), "0")));
    ASSERT_TRUE(wait_for_event(*waiters[i], {"waiting"})) << i << ": " << waiters[i]->err();
  }
  server_.pause(5000ms);
  for (auto& w : waiters) ASSERT_TRUE(wait_for_event(*w, {"redis_unreachable"}, 10s)) << w->err();
  (void)server_.admin({"PING"});  // answered once the pause is over
  touch(go);
  EXPECT_EQ(holder.wait(), 0) << holder.err();
  for (auto& w : waiters) EXPECT_EQ(w->wait(), 0) << w->err();
  const auto entries = read_log(log);
  std::vector<std::string> expected{"H"};
  for (const auto& l : labels(5)) expected.push_back(l);
  EXPECT_EQ(start_order(entries), expected) << read_text(log);
}

// Redis falls silent right after the run's first answer (its PING) or right after it learnt whether Redis is a
// cluster (INFO), before --set-capacity's call or the classes' names: --timeout still holds, and the message names
// Redis and the time it had. (The INFO and the set_limits call each took their own 1 s, whatever was left of
// --timeout: 2.0 and 1.0 s for a --timeout of 400ms; the names' call said "within 1s".)
TEST_F(AdmitRunOutage, TheTimeoutHoldsWhenRedisFallsSilentBeforeTheWait) {
  // The limits exist first, so that --set-capacity has something to change (and the functions are loaded).
  ASSERT_EQ(run_to_end(run("quiet", args{"--concurrency", "1", "--", "true"})).status, 0);
  const args classes{"--concurrency", "2", "--classes", "a=0.5,b=0.5"};
  ASSERT_EQ(run_to_end(run("named", classes + args{"--", "true"})).status, 0);
  struct fault {
    const char* after;  // the reply after which Redis falls silent
    const char* name;
    args options;
  };
  for (const fault& f : {fault{"PONG", "quiet", {"--concurrency", "2", "--set-capacity"}},
                         fault{"cluster_enabled", "quiet", {"--concurrency", "2", "--set-capacity"}},
                         fault{"cluster_enabled", "named", classes}}) {
    const std::string after = f.after + std::string(" ") + f.name;
    admit::redis::testing::tcp_proxy proxy(server_.port());
    proxy.black_hole_after(f.after);
    const auto start = std::chrono::steady_clock::now();
    const run_result r = run_to_end(args{ADMIT_CLI, "run", "--redis", proxy.url(), "--name", f.name} + f.options +
                                    args{"--timeout", "400ms", "--json", "--"} + records_ran());
    expect_refused_in_time(r, std::chrono::steady_clock::now() - start, 75, "redis",
                           "no answer from " + proxy.url() + " within 400ms", after);
  }
}

// A definition that Redis refuses is explained with the one it stores, read within --timeout too: when Redis falls
// silent right after its refusal, the run ends by --timeout naming no stored definition. (That read took the
// semaphore's own call timeout, 1 s, whatever was left of --timeout.)
TEST_F(AdmitRunOutage, TheTimeoutHoldsWhenRedisFallsSilentAfterRefusingADefinition) {
  ASSERT_EQ(run_to_end(run("stored", args{"--concurrency", "1", "--", "true"})).status, 0);
  admit::redis::testing::tcp_proxy proxy(server_.port());
  proxy.black_hole_after("1/0/0");  // the acquire's refusal names the stored definition
  const auto start = std::chrono::steady_clock::now();
  const run_result r = run_to_end(args{ADMIT_CLI, "run", "--redis", proxy.url(), "--name", "stored", "--concurrency",
                                       "3", "--timeout", "400ms", "--json", "--"} +
                                  records_ran());
  expect_refused_in_time(r, std::chrono::steady_clock::now() - start, 2, "definition",
                         "is defined otherwise, not --concurrency 3", "stored");
}

#endif

}  // namespace
