// What `admit run --redis` keeps of a run for `admit inspect` (src/cli/common/run_holder.hpp): the entry read back as
// written, foreign or damaged values refused, and when a run is dead — its pid gone on this host, or its lease not
// renewed for two renewal periods wherever it runs. Explicit lease times: nothing waits.
#include "cli/common/run_holder.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace {

using namespace std::chrono_literals;
using admit::cli::parse_run_entry;
using admit::cli::run_entry;
using admit::cli::run_entry_death;

std::string this_host() { return admit::cli::run::host_name(); }

run_entry entry(std::string host, std::int64_t pid) {
  run_entry e;
  e.info = {std::move(host), pid, "sleep 60", 1'700'000'000'000};
  e.lease_ttl = 30s;
  return e;
}

TEST(RunHolder, AnEntryReadsBackAsWritten) {
  const run_entry e = entry("db-7", 4711);
  const auto back = parse_run_entry(admit::cli::to_json(e));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->info.host, "db-7");
  EXPECT_EQ(back->info.pid, 4711);
  EXPECT_EQ(back->info.command, "sleep 60");
  EXPECT_EQ(back->info.started_unix_ms, 1'700'000'000'000);
  EXPECT_EQ(back->lease_ttl, 30s);
}

TEST(RunHolder, WhatIsNotAnEntryIsRefused) {
  EXPECT_FALSE(parse_run_entry("not json"));
  EXPECT_FALSE(parse_run_entry("[1, 2]"));
  EXPECT_FALSE(parse_run_entry(R"({"host": "a"})"));                                       // no pid, no start
  EXPECT_FALSE(parse_run_entry(R"({"pid": "x", "started_unix_ms": 1})"));                  // a pid of another type
  const auto older = parse_run_entry(R"({"host": "a", "pid": 5, "started_unix_ms": 1})");  // no lease lifetime
  ASSERT_TRUE(older);
  EXPECT_EQ(older->lease_ttl, 0ms);
  EXPECT_FALSE(run_entry_death(*older, 1us)) << "without its lifetime, a lease's time left says nothing";
}

TEST(RunHolder, ARunOnThisHostIsDeadWhenItsPidIsGone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // reaped: no process has that pid now (until it is reused)
  EXPECT_EQ(run_entry_death(entry(this_host(), child), std::nullopt), "pid " + std::to_string(child) + " is gone");
  EXPECT_FALSE(run_entry_death(entry(this_host(), ::getpid()), std::nullopt));
  // The same pid on another host says nothing about that host's process.
  EXPECT_FALSE(run_entry_death(entry(this_host() + "-elsewhere", child), std::nullopt));
}

TEST(RunHolder, AHolderAnywhereIsDeadWhenItsLeaseWasNotRenewedForTwoPeriods) {
  const run_entry e = entry(this_host() + "-elsewhere", 1);  // renewed every 10 s: 20 s left right before a renewal
  EXPECT_FALSE(run_entry_death(e, 30s));
  EXPECT_FALSE(run_entry_death(e, 20s));
  EXPECT_FALSE(run_entry_death(e, 10s)) << "one renewal late: a slow call, not yet a dead run";
  EXPECT_EQ(run_entry_death(e, 9'999'999us), "its lease was not renewed for 20s");
  EXPECT_EQ(run_entry_death(e, -2s), "its lease was not renewed for 32s");  // expired, not yet swept
  EXPECT_FALSE(run_entry_death(e, std::nullopt)) << "a waiter has no lease";
}

}  // namespace
