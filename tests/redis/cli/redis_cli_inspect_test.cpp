// `admit inspect --redis` of the runs of `admit run --redis`, against a real redis-server and real processes: a
// holder and a waiter each show their host, pid and command; a holder whose `admit run` was SIGKILLed is shown dead
// at once (its pid is gone on this host) while its lease still runs; a run that stops waiting takes its entry with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
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

class AdmitInspectRuns : public ::testing::Test {
 protected:
  args run(const std::string& name, const args& more) const {
    return args{ADMIT_CLI, "run", "--redis", server_.url(), "--name", name, "--concurrency", "1", "--json"} + more;
  }
  nlohmann::json inspect_json(const std::string& name) const {
    const run_result r = run_to_end({ADMIT_CLI, "inspect", "--redis", server_.url(), "--json", name}, 10s);
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  std::string inspect_text(const std::string& name) const {
    const run_result r = run_to_end({ADMIT_CLI, "inspect", "--redis", server_.url(), name}, 10s);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
  }
  // The number of `name`'s `admit run` entries in Redis (KEYS, over the test server's own connection).
  int run_entries(const std::string& name) const {
    const std::string keys = server_.admin({"KEYS", "{" + name + "}:run:*"});
    if (keys.empty()) return 0;
    int n = 1;
    for (const char c : keys) n += c == '\n' ? 1 : 0;
    return n;
  }
  // Whether inspect comes to show `pid` as the one holder of `name`: a run writes its entry as it starts, without
  // waiting for Redis's answer, so an inspect made at once may come before it.
  bool shows_holder(const std::string& name, std::int64_t pid) const {
    return eventually([&] {
      const auto j = inspect_json(name);
      return j.is_object() && j["holders"].is_array() && j["holders"].size() == 1 &&
             j["holders"][0].value("pid", std::int64_t{-1}) == pid;
    });
  }

  redis_server server_;
  temp_dir dir_;
};

TEST_F(AdmitInspectRuns, AHolderShowsItsHostPidAndCommand) {
  child_process holder(run("shown", {"--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  ASSERT_TRUE(shows_holder("shown", holder.pid()));
  const run_result r = run_to_end({ADMIT_CLI, "inspect", "--redis", server_.url(), "--json", "shown"}, 10s);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_inspected_holder(r.out, holder.pid(), "sleep 60");
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j["holders"].is_array() && !j["holders"].empty()) << r.out;
  const auto& h = j["holders"][0];
  const auto started = event(holder.err(), "started");
  ASSERT_TRUE(started.is_object()) << holder.err();
  EXPECT_EQ(h.value("id", ""), started.value("lease_id", "-")) << r.out;
  EXPECT_EQ(h.value("dead", true), false) << r.out;

  const std::string text = inspect_text("shown");
  EXPECT_NE(text.find(std::to_string(holder.pid())), std::string::npos) << text;
  EXPECT_NE(text.find("sleep 60"), std::string::npos) << text;
  EXPECT_NE(text.find(this_host()), std::string::npos) << text;
  EXPECT_EQ(text.find("DEAD"), std::string::npos) << text;
}

TEST_F(AdmitInspectRuns, AWaiterShowsItsHostPidAndCommand) {
  child_process holder(run("queue", {"--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  child_process waiter(run("queue", {"--", "echo", "waited"}));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  const auto j = inspect_json("queue");
  ASSERT_TRUE(j.is_object() && j["queue"].is_array() && j["queue"].size() == 1) << j.dump();
  const auto& w = j["queue"][0];
  EXPECT_EQ(w.value("pid", std::int64_t{-1}), waiter.pid()) << j.dump();
  EXPECT_EQ(w.value("command", ""), "echo waited") << j.dump();
  EXPECT_EQ(w.value("host", ""), this_host()) << j.dump();
  EXPECT_TRUE(w.contains("waiting_s") && w["waiting_s"].is_number()) << j.dump();
  EXPECT_EQ(w.value("dead", true), false) << j.dump();
  const std::string text = inspect_text("queue");
  EXPECT_NE(text.find("pid " + std::to_string(waiter.pid()) + " waiting"), std::string::npos) << text;
  EXPECT_NE(text.find(": echo waited\n"), std::string::npos) << text;  // the shell line as it is, unquoted
}

// A waiter stopped by SIGSTOP on this host is named as stopped (it holds its place until its waiter TTL, as it no
// longer polls), and no longer once it is continued.
TEST_F(AdmitInspectRuns, AStoppedWaiterIsNamed) {
  child_process holder(run("halt", {"--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  child_process waiter(run("halt", {"--", "true"}));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  ASSERT_EQ(::kill(waiter.pid(), SIGSTOP), 0);
  const std::string named = "STOPPED: pid " + std::to_string(waiter.pid());
  ASSERT_TRUE(eventually([&] { return inspect_text("halt").find(named) != std::string::npos; }))
      << inspect_text("halt");
  const auto j = inspect_json("halt");
  ASSERT_TRUE(j.is_object() && j["queue"].size() == 1) << j.dump();
  EXPECT_EQ(j["queue"][0].value("stopped", false), true) << j.dump();
  EXPECT_EQ(j["holders"][0].value("stopped", true), false) << j.dump();
  ASSERT_EQ(::kill(waiter.pid(), SIGCONT), 0);
  EXPECT_TRUE(eventually([&] { return inspect_text("halt").find("STOPPED") == std::string::npos; }));
}

// --most N cuts the lists Redis answers with, and the text says where: "the first N of M".
TEST_F(AdmitInspectRuns, MostSaysWhereItCutTheQueue) {
  child_process holder(run("cut", {"--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  child_process first(run("cut", {"--", "true"})), second(run("cut", {"--", "true"}));
  ASSERT_TRUE(wait_for_event(first, {"waiting"})) << first.err();
  ASSERT_TRUE(wait_for_event(second, {"waiting"})) << second.err();
  const run_result r = run_to_end({ADMIT_CLI, "inspect", "--redis", server_.url(), "--most", "1", "cut"}, 10s);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("queue (in order, the first 1 of 2):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("holders (soonest expiry first):"), std::string::npos) << r.out;  // 1 of 1: not cut
  EXPECT_EQ(inspect_text("cut").find("the first"), std::string::npos);
}

// The `admit run` of a holder is SIGKILLed: its lease lives on in Redis until --lease-ttl (60 s), but inspect says at
// once that the run is dead, and why. (Its command, which outlives it, is ended by the test.)
TEST_F(AdmitInspectRuns, AHolderWhoseRunWasKilledIsShownDead) {
  const std::string pid_file = dir_ / "command.pid";
  child_process holder(
      run("killed", {"--lease-ttl", "60s", "--", "sh", "-c", "echo $$ > \"$1\"; exec sleep 60", "sh", pid_file}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  ASSERT_TRUE(eventually([&] { return !read_text(pid_file).empty(); })) << holder.err();
  const pid_t run_pid = holder.pid();
  ASSERT_TRUE(shows_holder("killed", run_pid));
  ::kill(run_pid, SIGKILL);
  (void)finish(holder, 10s);
  const auto j = inspect_json("killed");
  ::kill(static_cast<pid_t>(std::stoll(read_text(pid_file))), SIGKILL);
  ASSERT_TRUE(j.is_object() && j["holders"].is_array() && j["holders"].size() == 1) << j.dump();
  const auto& h = j["holders"][0];
  EXPECT_EQ(h.value("pid", std::int64_t{-1}), run_pid) << j.dump();
  EXPECT_EQ(h.value("dead", false), true) << j.dump();
  EXPECT_EQ(h.value("dead_because", ""), "pid " + std::to_string(run_pid) + " is gone") << j.dump();
  EXPECT_GT(h.value("lease_left_s", 0.0), 30.0) << "the lease itself runs on: " << j.dump();
}

// A run that waits leaves an entry for inspect; when it stops waiting (--timeout), the entry goes with it, and an
// admitted waiter keeps one entry, its holder's.
TEST_F(AdmitInspectRuns, ARunThatStopsWaitingTakesItsEntryWithIt) {
  child_process holder(run("leaving", {"--", "sleep", "60"}));
  ASSERT_TRUE(wait_for_event(holder, {"started"})) << holder.err();
  child_process waiter(run("leaving", {"--timeout", "60s", "--", "true"}));
  ASSERT_TRUE(wait_for_event(waiter, {"waiting"})) << waiter.err();
  child_process quitter(run("leaving", {"--timeout", "300ms", "--", "true"}));
  EXPECT_EQ(finish(quitter, 10s).status, 75) << quitter.err();
  EXPECT_EQ(run_entries("leaving"), 2);  // the holder's and the remaining waiter's
  ::kill(holder.pid(), SIGTERM);
  (void)finish(holder, 10s);
  EXPECT_EQ(finish(waiter, 10s).status, 0) << waiter.err();
  EXPECT_TRUE(eventually([&] { return run_entries("leaving") == 0; }, 10s));
}

#endif

}  // namespace
