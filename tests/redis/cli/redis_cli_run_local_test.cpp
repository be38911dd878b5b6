// `admit run` end to end without Redis (the host-local limit in --lock-dir, a fresh directory whose path holds a
// space): real processes queued in a known order — FIFO admission and never more than N at once, weights; the permit
// of a SIGKILLed holder free at once; signals forwarded to the command (also ^C on a terminal, once); exit statuses
// (the command's own, 128+N, 127, 126, 75, 2, also for another definition of a name in use); the environment and
// standard streams the command gets; --rate's spacing; the status line on a terminal only; the --json events.
// `admit inspect` of such a limit: redis_cli_run_local_inspect_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "admit_run_local_testing.hpp"
#include "admit_run_testing.hpp"
#include "child_process.hpp"
#include "pty_process.hpp"
#include "self_exec.hpp"

namespace {

using namespace std::chrono_literals;
using namespace admit::redis::testing::run;
using admit::redis::testing::child_process;
using admit::redis::testing::pty_process;
using admit::redis::testing::run_result;
using steady = std::chrono::steady_clock;

ADMIT_CHILD_ROLE_TEST(AdmitRunLocalChild, run_role)

#ifdef ADMIT_CLI

using AdmitRunLocal = run_local_fixture;

// 1. Twenty queued at --concurrency 3: admitted in their order of arrival, never more than 3 at once.
TEST_F(AdmitRunLocal, FifoAndAtMostThreeAtOnce) {
  fifo_one_release_at_a_time(ADMIT_CLI, {"--lock-dir", locks_}, dir_, 20);
}

TEST_F(AdmitRunLocal, AtMostThreeAtOnceFreeRunning) {
  fifo_free_running(ADMIT_CLI, {"--lock-dir", locks_}, dir_, 20, 150);
}

// 2. The holder SIGKILLed: its command gets SIGKILL too, and the next waiter starts at once (no lease to expire).
TEST_F(AdmitRunLocal, SigkillOfTheHolderFreesThePermitAtOnce) {
  const auto holder = hold("k");
  const auto started = event(holder->err(), "started");
  ASSERT_TRUE(started.is_object()) << holder->err();
  const auto command_pid = started.value("pid", std::int64_t{-1});
  ASSERT_GT(command_pid, 0) << holder->err();
  child_process waiter(run("k", args{"--concurrency", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  const auto killed = steady::now();
  ASSERT_EQ(::kill(holder->pid(), SIGKILL), 0);
  ASSERT_TRUE(wait_for_event(waiter, {"started"}, 10s)) << waiter.err();
  const auto delay = std::chrono::duration<double, std::milli>(steady::now() - killed).count();
  std::cout << "[ measured ] the next waiter started " << delay << " ms after the holder's SIGKILL\n";
  EXPECT_LT(delay, 1000.0);
  EXPECT_EQ(finish(waiter).status, 0) << waiter.err();
  EXPECT_TRUE(ran());
  EXPECT_EQ(holder->wait(), -1);  // ended by the signal
  // Its command (sleep 60) got SIGKILL as well: gone, or a zombie waiting to be reaped.
  EXPECT_TRUE(eventually([&] { return process_gone(command_pid); }, 5s))
      << "the command of a SIGKILLed admit run still runs: pid " << command_pid;
}

// 3. Signals sent to `admit run` reach the command, each once; its exit status is admit run's.
TEST_F(AdmitRunLocal, SignalsAreForwardedToTheCommand) {
  const std::string script =
      "f=$1\n"
      "for s in TERM INT HUP QUIT USR2; do trap \"echo $s >> \\\"\\$f\\\"\" $s; done\n"
      "trap 'echo USR1 >> \"$f\"; exit 7' USR1\n"
      "echo ready >> \"$f\"\n"
      "while :; do sleep 1 </dev/null >/dev/null 2>&1 & wait $!; done\n";
  child_process c(run("sig", args{"--concurrency", "1", "--json", "--"} + records_ran(script)));
  ASSERT_TRUE(eventually([&] { return read_text(ran_) == "ready\n"; })) << c.err();
  std::string expected = "ready\n";
  for (const auto& [sig, word] : {std::pair{SIGTERM, "TERM"}, std::pair{SIGINT, "INT"}, std::pair{SIGHUP, "HUP"},
                                  std::pair{SIGQUIT, "QUIT"}, std::pair{SIGUSR2, "USR2"}}) {
    ASSERT_EQ(::kill(c.pid(), sig), 0);
    expected += std::string(word) + "\n";
    EXPECT_TRUE(eventually([&] { return read_text(ran_) == expected; }, 10s)) << word << ": the command saw\n"
                                                                              << read_text(ran_) << c.err();
  }
  ASSERT_EQ(::kill(c.pid(), SIGUSR1), 0);
  const run_result r = finish(c, 10s);
  EXPECT_EQ(r.status, 7) << r.err;
  EXPECT_EQ(read_text(ran_), expected + "USR1\n");  // each signal once
  std::vector<std::string> forwarded;
  for (const auto& e : events(r.err)) {
    if (e.value("event", "") != "signal") continue;
    EXPECT_EQ(e.value("forwarded", false), true) << e.dump();
    forwarded.push_back(e.value("signal", ""));
  }
  EXPECT_EQ(forwarded, (std::vector<std::string>{"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR2", "SIGUSR1"}));
  const auto exited = event(r.err, "exited");
  ASSERT_TRUE(exited.is_object()) << r.err;
  EXPECT_EQ(exited["exit_status"], 7);
  EXPECT_EQ(exited["admit_exit_status"], 7);
  EXPECT_TRUE(exited["signal"].is_null());
}

TEST_F(AdmitRunLocal, ExitStatusesPassThrough) {
  for (const int status : {0, 1, 42}) {
    const run_result r =
        // --no-wait: each finds the permit its predecessor held given back.
        admit(run("exit",
                  {"--concurrency", "1", "--no-wait", "--", "sh", "-c", "exit \"$1\"", "sh", std::to_string(status)}));
    EXPECT_EQ(r.status, status) << r.err;
  }
  // Killed by a signal: 128 + N.
  for (const auto& [signal, name] : {std::pair{SIGKILL, "KILL"}, std::pair{SIGTERM, "TERM"}}) {
    const run_result r =
        admit(run("exit", {"--concurrency", "1", "--json", "--", "sh", "-c", "kill -" + std::string(name) + " $$"}));
    EXPECT_EQ(r.status, 128 + signal) << r.err;
    const auto exited = event(r.err, "exited");
    ASSERT_TRUE(exited.is_object()) << r.err;
    EXPECT_EQ(exited["signal"], "SIG" + std::string(name)) << r.err;
    EXPECT_EQ(exited["admit_exit_status"], 128 + signal) << r.err;
  }
}

// 127 and 126 are decided before waiting: while another holds the only permit, they end at once.
TEST_F(AdmitRunLocal, CommandsThatCannotRunAre127And126WithoutWaiting) {
  const auto holder = hold("busy");
  const std::string missing = "admit-no-such-command-" + std::to_string(::getpid());
  const run_result r = admit(run("busy", {"--concurrency", "1", "--", missing, "x"}), 10s);
  EXPECT_EQ(r.status, 127) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("command not found"), std::string::npos) << r.err;
  const std::string missing_path = dir_ / "no such program";
  const run_result by_path = admit(run("busy", {"--concurrency", "1", "--", missing_path}), 10s);
  EXPECT_EQ(by_path.status, 127) << by_path.err;
  EXPECT_NE(by_path.err.find(missing_path), std::string::npos) << by_path.err;

  const std::string plain = dir_ / "not executable";
  std::ofstream(plain) << "#!/bin/sh\necho ran >> \"$0.ran\"\n";
  ::chmod(plain.c_str(), 0644);
  const run_result not_executable = admit(run("busy", {"--concurrency", "1", "--", plain}), 10s);
  EXPECT_EQ(not_executable.status, 126) << not_executable.err;
  EXPECT_NE(not_executable.err.find(plain), std::string::npos) << not_executable.err;
  EXPECT_FALSE(std::filesystem::exists(plain + ".ran"));
  const run_result directory = admit(run("busy", {"--concurrency", "1", "--", dir_.path().string()}), 10s);
  EXPECT_EQ(directory.status, 126) << directory.err;
}

// A script whose #! names a missing interpreter exists but cannot run: 126, naming the interpreter (it said "command
// not found", 127, as for a file that does not exist).
TEST_F(AdmitRunLocal, AScriptWhoseInterpreterIsMissingIs126NamingIt) {
  const std::string script = dir_ / "bad interpreter.sh";
  std::ofstream(script) << "#!/nonexistent/interp -x\necho ran\n";
  ::chmod(script.c_str(), 0755);
  const run_result r = admit(run("free", {"--concurrency", "1", "--", script}), 10s);
  EXPECT_EQ(r.status, 126) << r.err;
  EXPECT_NE(r.err.find("its interpreter \"/nonexistent/interp\""), std::string::npos) << r.err;
}

TEST_F(AdmitRunLocal, NotAdmittedIs75AndTheCommandDoesNotRun) {
  const auto holder = hold("busy");
  const auto before = steady::now();
  const run_result timed_out =
      admit(run("busy", args{"--concurrency", "1", "--timeout", "200ms", "--json", "--"} + records_ran()), 10s);
  const auto waited = steady::now() - before;
  EXPECT_EQ(timed_out.status, 75) << timed_out.err;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(event(timed_out.err, "not_admitted").value("reason", ""), "timeout") << timed_out.err;
  EXPECT_EQ(event(timed_out.err, "not_admitted").value("message", ""),
            "not admitted: no permit of \"busy\" on this host within --timeout 200ms")
      << timed_out.err;
  rate_refusal_named(ADMIT_CLI, {"--lock-dir", locks_}, "on this host");

  const run_result busy =
      admit(run("busy", args{"--concurrency", "1", "--no-wait", "--json", "--"} + records_ran()), 10s);
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_EQ(event(busy.err, "not_admitted").value("reason", ""), "busy") << busy.err;

  // --max-waiters 1 with one already waiting: full.
  child_process waiter(run("busy", args{"--concurrency", "1", "--max-waiters", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  const run_result full =
      admit(run("busy", args{"--concurrency", "1", "--max-waiters", "1", "--json", "--"} + records_ran()), 10s);
  EXPECT_EQ(full.status, 75) << full.err;
  EXPECT_EQ(event(full.err, "not_admitted").value("reason", ""), "queue_full") << full.err;
  // How many wait is not known, only that the queue is full (it said "1 already wait" with 2 waiting).
  EXPECT_NE(event(full.err, "not_admitted").value("message", "").find("1 or more already wait"), std::string::npos)
      << full.err;
  EXPECT_FALSE(ran());
}

// A run that gives a name in use another definition is refused as bad input (2), naming both; its command never runs.
TEST_F(AdmitRunLocal, AnotherDefinitionOfANameInUseIs2) {
  const auto holder = hold("mix");
  const run_result other =
      admit(run("mix", args{"--concurrency", "5", "--no-wait", "--json", "--"} + records_ran()), 10s);
  EXPECT_EQ(other.status, 2) << other.err;
  EXPECT_NE(other.err.find("in use with --concurrency 1 (pid "), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("not --concurrency 5"), std::string::npos) << other.err;
  EXPECT_EQ(event(other.err, "not_admitted").value("reason", ""), "definition") << other.err;
  // An error, said with --quiet too (which leaves out only the limit's answers: busy, --timeout, the queue full).
  const run_result quiet =
      admit(run("mix", args{"--concurrency", "5", "--no-wait", "--quiet", "--"} + records_ran()), 10s);
  EXPECT_EQ(quiet.status, 2) << quiet.err;
  EXPECT_NE(quiet.err.find("not --concurrency 5"), std::string::npos) << quiet.err;
  const run_result busy =
      admit(run("mix", args{"--concurrency", "1", "--no-wait", "--quiet", "--"} + records_ran()), 10s);
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_EQ(busy.err, "");
  EXPECT_FALSE(ran());
}

// SIGINT, SIGTERM, SIGHUP, SIGQUIT while waiting: leaves the queue, exits 128+N, the command never runs; the one
// behind it is served next.
// Another process holding the limit's lock (a run stopped inside its critical section holds it until continued) does
// not hold a run past its --timeout, neither as it joins the queue nor while it waits: exit 75 naming the lock. The
// run blocked in flock for ever.
TEST_F(AdmitRunLocal, ALockHeldPastTheTimeoutIs75NamingIt) {
  ASSERT_EQ(admit(run("locked", {"--concurrency", "1", "--", "true"})).status, 0);
  const std::filesystem::path path = std::filesystem::path(locks_) / "locked" / "lock";
  const args timed{"--concurrency", "1", "--timeout", "1s", "--", "echo", "ran"};
  {
    const lock_holder lock(path);
    const auto start = steady::now();
    const run_result r = admit(run("locked", timed), 20s);
    EXPECT_LT(steady::now() - start, 10s);
    EXPECT_EQ(r.status, 75) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("another process held the limit's lock"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fuser -v"), std::string::npos) << r.err;
  }
  const auto holder = hold("locked");
  child_process waiter(run("locked", args{"--json"} + timed));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  const lock_holder lock(path);  // (taken once the waiter has let go of it)
  const run_result r = finish(waiter, 20s);
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find("another process held the limit's lock"), std::string::npos) << r.err;
  ::kill(holder->pid(), SIGKILL);
}

TEST_F(AdmitRunLocal, SignalWhileWaitingLeavesTheQueue) {
  const auto holder = hold("q");
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    child_process waiter(run("q", args{"--concurrency", "1", "--json", "--"} + records_ran()));
    ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
    ASSERT_EQ(::kill(waiter.pid(), sig), 0);
    const run_result r = finish(waiter, 10s);
    EXPECT_EQ(r.status, 128 + sig) << r.err;
    EXPECT_EQ(event(r.err, "not_admitted").value("reason", ""), "signal") << r.err;
  }
  child_process first(run("q", args{"--concurrency", "1", "--json", "--"} + records_ran()));
  ASSERT_TRUE(wait_for_event(first, {"waiting"})) << first.err();
  child_process second(run("q", {"--concurrency", "1", "--json", "--", "true"}));
  ASSERT_TRUE(wait_for_event(second, {"waiting"})) << second.err();
  EXPECT_EQ(event(second.err(), "waiting")["position"], 2) << second.err();
  ASSERT_EQ(::kill(first.pid(), SIGTERM), 0);
  EXPECT_EQ(finish(first, 10s).status, 128 + SIGTERM) << first.err();
  ::kill(holder->pid(), SIGKILL);
  EXPECT_EQ(finish(second, 10s).status, 0) << second.err();
  EXPECT_FALSE(ran());
}

// --weight K takes K permits, and the queue stays FIFO: a light one behind a heavy one that does not fit waits too.
TEST_F(AdmitRunLocal, WeightTakesItsPermitsInQueueOrder) {
  const std::string log = dir_ / "weight.log";
  const auto started = [&](int n) { return start_order(read_log(log)).size() >= static_cast<std::size_t>(n); };
  child_process heavy(run("w", args{"--concurrency", "3", "--weight", "2", "--json", "--"} +
                                   record_command(log, "heavy", dir_ / "release.heavy")));
  ASSERT_TRUE(wait_for_event(heavy, {"started"})) << heavy.err();
  child_process second(run("w", args{"--concurrency", "3", "--weight", "2", "--json", "--"} +
                                    record_command(log, "second", dir_ / "release.second")));
  ASSERT_TRUE(wait_for_event(second, {"waiting"})) << second.err();
  EXPECT_EQ(event(second.err(), "waiting")["held"], 2) << second.err();
  child_process light(
      run("w", args{"--concurrency", "3", "--json", "--"} + record_command(log, "light", dir_ / "release.light")));
  ASSERT_TRUE(wait_for_event(light, {"waiting", "started"})) << light.err();
  EXPECT_FALSE(event(light.err(), "started").is_object()) << "jumped the queue: " << light.err();
  ASSERT_TRUE(eventually([&] { return started(1); }));
  touch(dir_ / "release.heavy");
  ASSERT_TRUE(eventually([&] { return started(3); })) << read_text(log);  // 2 + 1 fit in 3
  touch(dir_ / "release.second");
  touch(dir_ / "release.light");
  for (auto* c : {&heavy, &second, &light}) EXPECT_EQ(c->wait(), 0) << c->err();
  // "second" and "light" were admitted together (2 + 1 fit in 3): no order between them, but both after "heavy" ended.
  const auto entries = read_log(log);
  ASSERT_EQ(entries.size(), 6U) << read_text(log);
  EXPECT_TRUE(entries[0].start && entries[0].label == "heavy" && !entries[1].start && entries[1].label == "heavy")
      << read_text(log);
  EXPECT_EQ(max_overlap(entries), 2) << read_text(log);
}

// The permit is given back when the command exits, even when a process it started in the background lives on; and
// without --lock-dir the directory is $ADMIT_LOCK_DIR's (admit inspect's too).
TEST_F(AdmitRunLocal, ReleasedWhenTheCommandExitsAndTheDefaultDirectory) {
  ::setenv("ADMIT_LOCK_DIR", locks_.c_str(), 1);
  const std::string pid_file = dir_ / "background.pid";
  const run_result r = admit({ADMIT_CLI, "run", "--name", "bg", "--concurrency", "1", "--", "sh", "-c",
                              "sleep 30 </dev/null >/dev/null 2>&1 & echo $! > \"$1\"", "sh", pid_file});
  ::unsetenv("ADMIT_LOCK_DIR");
  EXPECT_EQ(r.status, 0) << r.err;
  const run_result next = admit(run("bg", {"--concurrency", "1", "--no-wait", "--", "true"}), 10s);
  EXPECT_EQ(next.status, 0) << "the permit is still held after the command exited: " << next.err;
  const std::string background = read_text(pid_file);
  if (!background.empty()) ::kill(std::stoi(background), SIGKILL);
  EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::path(locks_) / "bg"))
      << "ADMIT_LOCK_DIR was not the default directory";
}

// A terminal: the status line while waiting, erased before the command starts (the command writes at once: five
// rounds, as an erase that comes late loses the race only sometimes); none with --quiet or --json.
TEST_F(AdmitRunLocal, StatusLineOnATerminalOnly) {
  const auto erased = [](const std::string& before) {
    return before.ends_with("\r\x1b[K") || before.ends_with("\r\x1b[2K") || before.ends_with("\x1b[2K\r");
  };
  int round = 0;
  for (const std::string mode : {"", "", "", "", "", "--quiet", "--json"}) {
    SCOPED_TRACE(mode);
    const std::string name = "tty" + std::to_string(++round);
    const auto holder = hold(name);
    args a = run(name, {"--concurrency", "1"});
    if (!mode.empty()) a.push_back(mode);
    pty_process t(a + args{"--", "sh", "-c", "echo COMMAND-STARTED"});
    if (mode.empty()) {
      ASSERT_TRUE(t.wait_for_output("\x1b[K", 10s)) << "no status line: " << testing::PrintToString(t.out());
    } else {  // waiting once `admit inspect` lists it
      ASSERT_TRUE(eventually([&] {
        return admit({ADMIT_CLI, "inspect", "--lock-dir", locks_, "--json", name}).out.find(std::to_string(t.pid())) !=
               std::string::npos;
      }));
    }
    ::kill(holder->pid(), SIGKILL);
    EXPECT_EQ(t.wait(10s), 0) << testing::PrintToString(t.out());
    const auto at = t.out().find("COMMAND-STARTED");
    ASSERT_NE(at, std::string::npos) << testing::PrintToString(t.out());
    const std::string before = t.out().substr(0, at);
    if (mode.empty()) {
      EXPECT_TRUE(erased(before)) << "the status line is not erased before the command: "
                                  << testing::PrintToString(t.out());
    } else {
      EXPECT_EQ(before.find("\x1b["), std::string::npos) << testing::PrintToString(before);
      EXPECT_EQ(before.find('\r'), std::string::npos) << testing::PrintToString(before);
    }
  }
}

// ^C on the terminal goes to the foreground process group (admit run, and the command if it shares the group): the
// command sees one SIGINT, not two.
TEST_F(AdmitRunLocal, TerminalInterruptReachesTheCommandOnce) {
  const std::string script =
      "f=$1\n"
      "trap 'echo INT >> \"$f\"' INT\n"
      "trap 'echo USR1 >> \"$f\"; exit 7' USR1\n"
      "echo ready >> \"$f\"\n"
      "while :; do sleep 1 </dev/null >/dev/null 2>&1 & wait $!; done\n";
  pty_process t(run("ctrl-c", args{"--concurrency", "1", "--"} + records_ran(script)));
  ASSERT_TRUE(eventually([&] { return read_text(ran_) == "ready\n"; })) << t.out();
  t.type("\x03");
  ASSERT_TRUE(eventually([&] { return read_text(ran_) == "ready\nINT\n"; }, 10s)) << read_text(ran_);
  // Signals are forwarded in the order they come: a second SIGINT would be forwarded before this SIGUSR1.
  ASSERT_EQ(::kill(t.pid(), SIGUSR1), 0);
  EXPECT_EQ(t.wait(10s), 7) << testing::PrintToString(t.out());
  EXPECT_EQ(read_text(ran_), "ready\nINT\nUSR1\n");
}

TEST_F(AdmitRunLocal, UsageErrorsAre2) {
  const auto refused = [&](const args& a) {
    const run_result r = admit(args{ADMIT_CLI, "run"} + a, 10s);
    EXPECT_EQ(r.status, 2) << testing::PrintToString(a) << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << testing::PrintToString(a);
  };
  const args cmd = args{"--"} + records_ran();
  refused(args{"--lock-dir", locks_, "--concurrency", "1"} + cmd);  // no --name
  refused(args{"--lock-dir", locks_, "--name", "u"} + cmd);         // no limit
  refused(args{"--lock-dir", locks_, "--name", "u", "--concurrency", "2", "--weight", "3"} + cmd);
  refused({"--lock-dir", locks_, "--name", "u", "--concurrency", "1"});  // no COMMAND
  refused({"--lock-dir", locks_, "--name", "u", "--concurrency", "1", "--"});
  refused(args{"--lock-dir", locks_, "--name", "a/b", "--concurrency", "1"} + cmd);  // not a local name
  refused(args{"--lock-dir", locks_, "--name", std::string(201, 'n'), "--concurrency", "1"} + cmd);
  refused(args{"--lock-dir", locks_, "--name", "u", "--concurrency", "1", "--on-lease-lost=later"} + cmd);
  refused(args{"--lock-dir", locks_, "--name", "u", "--concurrency", "0"} + cmd);
  refused(args{"--lock-dir", locks_, "--name", "u", "--rate", "fast"} + cmd);
  refused(args{"--lock-dir", locks_, "--name", "u", "--concurrency", "1", "--burst", "2"} + cmd);  // needs --rate
  refused(args{"--lock-dir", locks_, "--name", "u", "--concurrency", "1", "--timeout", "soon"} + cmd);
  EXPECT_FALSE(ran());
  // With --json, as the "error" event every later error is (it was a plain line).
  const run_result r =
      admit(args{ADMIT_CLI, "run", "--lock-dir", locks_, "--name", "u", "--rate", "0/s", "--json"} + cmd);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(event(r.err, "error").value("message", ""), "invalid --rate \"0/s\": a zero rate never starts anything")
      << r.err;
}

// The forms of durations and rates the rest of the tool takes; --weight takes K rate tokens too.
TEST_F(AdmitRunLocal, AcceptedFormsAndWeightedRate) {
  for (const args& a : {args{"--rate", "100/min", "--timeout", "1.5s"}, args{"--rate", "1/500ms", "--burst", "2"},
                        args{"--concurrency", "2", "--timeout", "2min"}, args{"--concurrency", "1", "--quiet"}}) {
    const run_result r = admit(run("forms", a + args{"--", "true"}), 10s);
    EXPECT_EQ(r.status, 0) << testing::PrintToString(a) << r.err;
  }
  const std::string log = dir_ / "weighted.log";
  const args weighted = {"--rate", "5/s", "--burst", "2", "--weight", "2", "--"};
  EXPECT_EQ(admit(run("weighted", weighted + record_command(log, "a", "0"))).status, 0);
  EXPECT_EQ(admit(run("weighted", weighted + record_command(log, "b", "0"))).status, 0);
  const auto entries = read_log(log);
  ASSERT_EQ(start_order(entries), (std::vector<std::string>{"a", "b"})) << read_text(log);
  EXPECT_GE(entries[2].ns - entries[0].ns, 400'000'000 - 20'000'000) << "2 tokens at 5/s take 400 ms";
}

// The command's standard streams are admit run's own, not pipes: /dev/null stays /dev/null, a terminal a terminal.
TEST_F(AdmitRunLocal, StandardStreamsAreInherited) {
  const run_result r = admit(run("io", {"--concurrency", "1", "--", "readlink", "/proc/self/fd/0"}));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "/dev/null\n");
  pty_process t(run("io", {"--concurrency", "1", "--", "sh", "-c", "test -t 0 && test -t 1 && test -t 2 && echo TTY"}));
  EXPECT_EQ(t.wait(10s), 0) << testing::PrintToString(t.out());
  EXPECT_NE(t.out().find("TTY"), std::string::npos) << testing::PrintToString(t.out());
}

// 4. The environment: ADMIT_NAME, ADMIT_LEASE_ID (local:<ticket>), ADMIT_FENCING_TOKEN strictly increasing; the
// command's standard output and error are its own.
TEST_F(AdmitRunLocal, EnvironmentAndOutputs) {
  const std::string script =
      "printf '%s|%s|%s\\n' \"$ADMIT_NAME\" \"$ADMIT_LEASE_ID\" \"$ADMIT_FENCING_TOKEN\" >> \"$1\"\n"
      "echo out; echo err >&2";
  std::int64_t last = -1;
  for (int i = 0; i < 3; ++i) {
    const run_result r = admit(run("env.test", args{"--concurrency", "2", "--"} + records_ran(script)));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "out\n");
    EXPECT_NE(r.err.find("err\n"), std::string::npos) << r.err;
  }
  std::istringstream lines(read_text(ran_));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const auto bar = line.find('|'), bar2 = line.rfind('|');
    ASSERT_NE(bar, bar2) << line;
    EXPECT_EQ(line.substr(0, bar), "env.test");
    const std::string token = line.substr(bar2 + 1);
    ASSERT_FALSE(token.empty());
    ASSERT_EQ(token.find_first_not_of("0123456789"), std::string::npos) << line;
    EXPECT_EQ(line.substr(bar + 1, bar2 - bar - 1), "local:" + token);
    EXPECT_GT(std::stoll(token), last) << line;
    last = std::stoll(token);
  }
  EXPECT_EQ(n, 3);

  // The "started" event tells the same token and lease id.
  const run_result j = admit(run("env.test", args{"--concurrency", "2", "--json", "--", "sh", "-c",
                                                  "printf '%s %s' \"$ADMIT_LEASE_ID\" \"$ADMIT_FENCING_TOKEN\""}));
  EXPECT_EQ(j.status, 0) << j.err;
  const auto started = event(j.err, "started");
  ASSERT_TRUE(started.is_object()) << j.err;
  ASSERT_TRUE(started["fencing_token"].is_number_integer()) << j.err;
  EXPECT_EQ(j.out, started.value("lease_id", "") + " " + std::to_string(started["fencing_token"].get<std::int64_t>()));
  EXPECT_GT(started["fencing_token"].get<std::int64_t>(), last);
}

// 6. --rate 5/s --burst 1 over 30 queued starts: a token bucket's spacing, 200 ms apart at least.
TEST_F(AdmitRunLocal, RateSpacesTheStarts) { rate_spacing(ADMIT_CLI, {"--lock-dir", locks_}, dir_, 30); }

// --classes on this host: the share rule of admit::admission, as with --redis.
TEST_F(AdmitRunLocal, ARunWithinItsClassShareStartsBeforeAnEarlierBorrower) {
  class_share_before_arrival(ADMIT_CLI, {"--lock-dir", locks_}, dir_);
}

// 9. --json: the events of a wait and a run, with their fields (every line is one object: events()).
TEST_F(AdmitRunLocal, JsonEvents) {
  const auto holder = hold("json");
  child_process waiter(run("json", {"--concurrency", "1", "--json", "--", "true"}));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  ::kill(holder->pid(), SIGKILL);
  const run_result r = finish(waiter, 10s);
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::string> names;
  for (const auto& e : events(r.err)) {
    names.push_back(e["event"]);
    EXPECT_EQ(e["name"], "json");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"waiting", "started", "exited"})) << r.err;
  const auto waiting = event(r.err, "waiting");
  EXPECT_EQ(waiting["position"], 1) << r.err;
  EXPECT_EQ(waiting["waiting"], 1) << r.err;
  EXPECT_EQ(waiting["held"], 1) << r.err;
  EXPECT_EQ(waiting["capacity"], 1) << r.err;
  const auto started = event(r.err, "started");
  EXPECT_TRUE(started["pid"].is_number_integer()) << r.err;
  EXPECT_TRUE(started["fencing_token"].is_number_integer()) << r.err;
  EXPECT_TRUE(started["lease_id"].is_string()) << r.err;
  EXPECT_TRUE(started["waited_s"].is_number()) << r.err;
  const auto exited = event(r.err, "exited");
  EXPECT_EQ(exited["exit_status"], 0) << r.err;
  EXPECT_TRUE(exited["signal"].is_null()) << r.err;
  EXPECT_TRUE(exited["ran_s"].is_number()) << r.err;
  EXPECT_EQ(exited["admit_exit_status"], 0) << r.err;
}

#endif

}  // namespace
