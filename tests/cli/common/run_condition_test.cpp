// What both forms of `admit inspect` say of a run beside its entry (src/cli/inspect/run_condition.hpp): dead with why
// (and the local form's words appended), else stopped with why, never both; the same four JSON keys and the same
// words in text; where --most cut a list. Real processes: a child reaped (its pid gone) and one stopped by SIGSTOP.
#include "cli/inspect/run_condition.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>

namespace {

using admit::cli::add_condition;
using admit::cli::condition_of;
using admit::cli::list_cut;
using admit::cli::print_condition;
using admit::cli::run_condition;
using admit::cli::run_entry;

run_entry on_this_host(pid_t pid) {
  run_entry e;
  e.info = {admit::cli::run::host_name(), pid, "sleep 60", 1'700'000'000'000};
  return e;
}

std::string printed(const run_condition& c) {
  std::ostringstream out;
  print_condition(out, c);
  return out.str();
}

TEST(RunCondition, AGoneRunIsDeadWithTheWordsGivenAndNotStopped) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const run_condition c = condition_of(on_this_host(child), std::nullopt, "; and more");
  const std::string why = "pid " + std::to_string(child) + " is gone; and more";
  EXPECT_EQ(c.dead_because, why);
  EXPECT_FALSE(c.stopped_because);
  nlohmann::ordered_json j;
  add_condition(j, c);
  EXPECT_EQ(j.dump(), R"({"dead":true,"dead_because":")" + why + R"(","stopped":false})");
  EXPECT_EQ(printed(c), "  DEAD: " + why);
}

TEST(RunCondition, AStoppedRunIsStoppedUntilContinued) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, WUNTRACED), child);  // returns once the child is stopped
  ASSERT_TRUE(WIFSTOPPED(status));
  const run_condition stopped = condition_of(on_this_host(child), std::nullopt, "; unused");
  EXPECT_FALSE(stopped.dead_because);
  ASSERT_TRUE(stopped.stopped_because);
  EXPECT_EQ(stopped.stopped_because->rfind("pid " + std::to_string(child) + " is stopped", 0), 0u);
  nlohmann::ordered_json j;
  add_condition(j, stopped);
  EXPECT_EQ(j["dead"], false);
  EXPECT_EQ(j["stopped"], true);
  EXPECT_EQ(j["stopped_because"], *stopped.stopped_because);
  EXPECT_FALSE(j.contains("dead_because"));
  EXPECT_EQ(printed(stopped), "  STOPPED: " + *stopped.stopped_because);

  ASSERT_EQ(::kill(child, SIGCONT), 0);
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // continued, it exits; reaped, its pid is gone
  const run_condition gone = condition_of(on_this_host(child), std::nullopt);
  EXPECT_TRUE(gone.dead_because);
  EXPECT_FALSE(gone.stopped_because) << "a dead run is not also said to be stopped";
}

TEST(RunCondition, ARunningRunIsNeither) {
  const run_condition c = condition_of(on_this_host(::getpid()), std::nullopt);
  EXPECT_FALSE(c.dead_because);
  EXPECT_FALSE(c.stopped_because);
  nlohmann::ordered_json j;
  add_condition(j, c);
  EXPECT_EQ(j.dump(), R"({"dead":false,"stopped":false})");
  EXPECT_EQ(printed(c), "");
}

TEST(RunCondition, ACutListSaysWhere) {
  EXPECT_EQ(list_cut(1, 2), "the first 1 of 2");
  EXPECT_EQ(list_cut(2, 2), "");
  EXPECT_EQ(list_cut(0, 0), "");
}

}  // namespace
