// `admit inspect` of a limit of `admit run` without Redis (--lock-dir, a fresh directory whose path holds a space),
// with real runs holding and waiting: each holder and waiter with its host, pid and command, in queue order; a run that
// is gone while a process it started holds its lock on, marked dead; a stopped waiter, marked stopped; --most's cut
// named; a limit whose files cannot be read, exit 66.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "admit_run_local_testing.hpp"
#include "admit_run_testing.hpp"
#include "child_process.hpp"

namespace {

#ifdef ADMIT_CLI

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::run_result;
using AdmitInspectLocal = run_local_fixture;

// A limit whose files cannot be read is neither shown nor "no such limit" (1): exit 66, EX_NOINPUT, naming the path
// and the reason. A file where the limit's directory belongs (as root too); without root, a directory of another mode.
TEST_F(AdmitInspectLocal, ALimitThatCannotBeReadIs66) {
  std::filesystem::create_directories(locks_);
  { std::ofstream(std::filesystem::path(locks_) / "blocked") << "not a directory"; }
  run_result r = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "blocked"});
  EXPECT_EQ(r.status, 66) << r.err;
  EXPECT_NE(r.err.find("blocked"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "--json", "blocked"}).status, 66);
  EXPECT_EQ(admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "absent"}).status, 1);
  if (::geteuid() != 0) {
    ASSERT_EQ(admit(run("closed", {"--concurrency", "1", "--", "true"})).status, 0);
    std::filesystem::permissions(std::filesystem::path(locks_) / "closed", std::filesystem::perms::none);
    r = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "closed"});
    std::filesystem::permissions(std::filesystem::path(locks_) / "closed", std::filesystem::perms::owner_all);
    EXPECT_EQ(r.status, 66) << r.err;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  }
}

// --most N cuts the lists, and the text says where: "the first N of M" (the header's counts are the whole's).
TEST_F(AdmitInspectLocal, SaysWhereMostCutTheLists) {
  const args holder{"--concurrency", "2", "--json", "--", "sleep", "60"};
  child_process a(run("most", holder)), b(run("most", holder));
  ASSERT_TRUE(wait_for_event(a, {"started"})) << a.err();
  ASSERT_TRUE(wait_for_event(b, {"started"})) << b.err();
  child_process c(run("most", holder)), d(run("most", holder));
  ASSERT_TRUE(wait_for_event(c, {"waiting"})) << c.err();
  ASSERT_TRUE(wait_for_event(d, {"waiting"})) << d.err();
  const run_result one = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "--most", "1", "most"});
  EXPECT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.out.find("2 holder(s), 2 waiting"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("holders (the first 1 of 2):"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("queue (in order of arrival, the first 1 of 2):"), std::string::npos) << one.out;
  const run_result all = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "--most", "2", "most"});
  EXPECT_EQ(all.out.find("the first"), std::string::npos) << all.out;
  for (child_process* p : {&a, &b, &c, &d}) ::kill(p->pid(), SIGKILL);
}

// A waiter stopped by SIGSTOP keeps its place and holds back everyone behind it: inspect says so, and stops saying
// so once it is continued.
TEST_F(AdmitInspectLocal, NamesAStoppedWaiter) {
  const auto holder = hold("stop");
  child_process waiter(run("stop", {"--concurrency", "1", "--json", "--", "true"}));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  const auto inspect = [&](bool json) {
    args a{ADMIT_CLI, "inspect", "--lock-dir", locks_, "stop"};
    if (json) a = a + args{"--json"};
    return admit(a, 10s);
  };
  {
    // Stopped outside the limit's short critical section (as a stop from a terminal mostly finds it): the lock held
    // here meanwhile. A run stopped inside it holds the lock until continued (see below); the "waiting" event may come
    // before the waiter lets go of it.
    const lock_holder lock(std::filesystem::path(locks_) / "stop" / "lock");
    ASSERT_EQ(::kill(waiter.pid(), SIGSTOP), 0);
  }
  // (The kernel marks it stopped once the signal is delivered: asked again until then.)
  ASSERT_TRUE(eventually([&] {
    return inspect(false).out.find("STOPPED: pid " + std::to_string(waiter.pid())) != std::string::npos;
  })) << inspect(false).out;
  const auto j = nlohmann::json::parse(inspect(true).out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j["queue"].size() == 1 && j["holders"].size() == 1) << j.dump();
  EXPECT_EQ(j["queue"][0].value("stopped", false), true) << j.dump();
  EXPECT_NE(j["queue"][0].value("stopped_because", "").find("until continued (kill -CONT"), std::string::npos)
      << j.dump();
  EXPECT_EQ(j["holders"][0].value("stopped", true), false) << j.dump();
  ASSERT_EQ(::kill(waiter.pid(), SIGCONT), 0);
  EXPECT_TRUE(eventually([&] { return inspect(false).out.find("STOPPED") == std::string::npos; }))
      << inspect(false).out;
  ::kill(holder->pid(), SIGKILL);
  EXPECT_EQ(finish(waiter, 10s).status, 0) << waiter.err();
}

// `admit inspect --lock-dir D NAME`: the holder (host, pid of admit run, command, running time) and the waiter.
TEST_F(AdmitInspectLocal, ShowsHolderAndWaiter) {
  const auto holder = hold("shown");
  child_process first(run("shown", args{"--concurrency", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(first, {"waiting"})) << first.err();
  child_process second(run("shown", args{"--concurrency", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(second, {"waiting"})) << second.err();
  const run_result r = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "--json", "shown"}, 10s);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_inspected_holder(r.out, holder->pid(), "sleep 60");
  // The waiters, in queue order (their pids are in the output, the first's before the second's).
  const auto at_first = r.out.find(std::to_string(first.pid())), at_second = r.out.find(std::to_string(second.pid()));
  EXPECT_NE(at_first, std::string::npos) << "a waiter is not listed: " << r.out;
  EXPECT_NE(at_second, std::string::npos) << "a waiter is not listed: " << r.out;
  EXPECT_LT(at_first, at_second) << r.out;

  const run_result text = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "shown"}, 10s);
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find(std::to_string(holder->pid())), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("sleep 60"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(this_host()), std::string::npos) << text.out;
}

// A run killed while a process its command started (left in the background) holds the lock on: the permit stays held,
// as documented, and inspect marks the holder dead (it showed it running).
TEST_F(AdmitInspectLocal, MarksAHolderWhoseRunIsGoneAsDead) {
  const std::string up = dir_ / "background started";
  child_process holder(run("orphan", {"--concurrency", "1", "--json", "--", "sh", "-c",
                                      "sleep 5 >/dev/null 2>&1 & echo > \"$0\"; wait", up}));
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(up); })) << holder.err();
  const pid_t run_pid = holder.pid();
  ::kill(run_pid, SIGKILL);
  (void)holder.wait(10s);  // reaped: a zombie's pid would still be there
  const run_result r = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "--json", "orphan"}, 10s);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"dead\": true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is gone; a process it started still holds its lock"), std::string::npos) << r.out;
  const run_result text = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "orphan"}, 10s);
  EXPECT_NE(text.out.find("DEAD: pid " + std::to_string(run_pid) + " is gone"), std::string::npos) << text.out;
}

// A process that holds the limit's lock (a run stopped inside its short critical section holds it until continued):
// inspect gives up after its patience, exit 75 naming the lock and how to find its holder; it waited for ever.
TEST_F(AdmitInspectLocal, ALockHeldByAnotherProcessIs75NotAHang) {
  ASSERT_EQ(admit(run("held", {"--concurrency", "1", "--", "true"})).status, 0);
  const std::filesystem::path path = std::filesystem::path(locks_) / "held" / "lock";
  const lock_holder lock(path);
  const auto start = std::chrono::steady_clock::now();
  const run_result r = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "held"}, 20s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("the lock of local limit \"held\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has been held for over 2s by another process"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fuser -v"), std::string::npos) << r.err;
}

// Each class's guaranteed permits beside its share: the split admit::admission makes, a tie broken as it breaks it
// (five permits of two halves: three and two; it showed only the shares).
TEST_F(AdmitInspectLocal, ShowsEachClasssGuaranteedPermits) {
  child_process holder(run("split", {"-c", "5", "--classes", "a=0.5,b=0.5", "--json", "--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  const run_result text = admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "split"}, 10s);
  EXPECT_NE(text.out.find("class a (share 0.5, 3 permit(s) guaranteed): 1 permit(s) held"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("class b (share 0.5, 2 permit(s) guaranteed): 0 permit(s) held"), std::string::npos)
      << text.out;
  const auto j = nlohmann::json::parse(admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "--json", "split"}, 10s).out,
                                       nullptr, false);
  ASSERT_TRUE(j.is_object() && j["classes"].size() == 2) << j.dump();
  EXPECT_EQ(j["classes"][0]["guaranteed_permits"], 3) << j.dump();
  EXPECT_EQ(j["classes"][1]["guaranteed_permits"], 2) << j.dump();
  ::kill(holder.pid(), SIGKILL);
}

#endif

}  // namespace
