// Tests of the concurrency replay of `admit replay --algorithm concurrency` (src/cli/replay/concurrency_replay.hpp):
// the trace parser, the discrete-event simulation over the real semaphore engine (exact outcomes on hand-made traces:
// FIFO, head-of-line blocking, hand-off, grant vs deadline at the same instant, max-waiters), the option checks.
#include "cli/replay/concurrency_replay.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <iterator>
#include <random>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli/replay/options.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace replay_concurrency_test {

namespace {

using namespace admit::cli;
using ::testing::HasSubstr;
constexpr std::int64_t ms = 1'000'000;
constexpr std::int64_t s = 1'000'000'000;

concurrency_settings settings(std::int64_t limit, std::optional<std::int64_t> max_waiters = std::nullopt,
                              std::optional<std::chrono::nanoseconds> timeout = std::nullopt) {
  concurrency_settings c;
  c.limit = limit;
  c.max_waiters = max_waiters;
  c.timeout = timeout;
  return c;
}

concurrency_result run(const concurrency_settings& c, std::string_view trace) {
  const auto requests = read_requests(trace);
  return replay_concurrency(c, requests);
}

std::string events_of(const concurrency_result& r) {
  std::ostringstream out;
  write_concurrency_events(out, r);
  return out.str();
}

std::string trace_error_of(std::string_view text) {
  try {
    (void)read_requests(text);
  } catch (const trace_error& e) {
    return e.what();
  }
  return "";
}

TEST(ConcurrencyTrace, ParsesArrivalDurationAndCountExactly) {
  const auto r = read_requests("# comment\n\n0.1 0.000000001\n0.1 2 3  # batch\r\n1\t0.5\n");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], (request{100 * ms, 1, 1, 3}));
  EXPECT_EQ(r[1], (request{100 * ms, 2 * s, 3, 4}));
  EXPECT_EQ(r[2], (request{1 * s, 500 * ms, 1, 5}));
}

TEST(ConcurrencyTrace, BadLinesNameTheLineAndTheText) {
  EXPECT_EQ(trace_error_of("0 1\n2\n"),
            "line 2: missing duration after \"2\": expected `<arrival seconds> "
            "<duration seconds> [n]`");
  EXPECT_THAT(trace_error_of("x 1\n"), HasSubstr("line 1: invalid arrival time \"x\""));
  EXPECT_THAT(trace_error_of("1 -1\n"), HasSubstr("line 1: invalid duration \"-1\""));
  EXPECT_THAT(trace_error_of("1 1 0\n"), HasSubstr("line 1: invalid count \"0\""));
  EXPECT_THAT(trace_error_of("1 1 99999999999\n"), HasSubstr("invalid count \"99999999999\""));
  EXPECT_THAT(trace_error_of("1 1 1 extra\n"), HasSubstr("line 1: unexpected text \"extra\""));
  EXPECT_THAT(trace_error_of("2 1\n1 1\n"), HasSubstr("line 2: arrival time \"1\" goes back in time (line 1 is at 2)"));
  EXPECT_THAT(trace_error_of("1 1000000001\n"), HasSubstr("duration \"1000000001\" is beyond the largest"));
}

// The hand-made trace of the command line tests (tools/admit/testdata/concurrency_small.txt), outcome by outcome.
constexpr std::string_view small = R"(0 2
0 3
0.5 1
1 1
1.6 0.5
2.5 1
3 1 3
3.2 1
)";

TEST(ConcurrencyReplay, BoundedQueueAndTimeoutExactly) {
  const auto r = run(settings(2, 1, std::chrono::seconds(1)), small);
  EXPECT_EQ(events_of(r),
            "0 2 1 admit\n0 3 1 admit\n0.5 1 1 timeout 1\n1 1 1 queue-full\n1.6 0.5 1 admit 0.4\n2.5 1 1 admit\n"
            "3 1 3 exceeds-capacity\n3.2 1 1 admit\n");
  EXPECT_EQ(r.requests, 8);
  EXPECT_EQ(r.permits, 10);
  EXPECT_EQ(r.admitted, 5);
  EXPECT_EQ(r.admitted_at_once, 4);
  EXPECT_EQ(r.admitted_after_wait, 1);
  EXPECT_EQ(r.queue_full, 1);
  EXPECT_EQ(r.timed_out, 1);
  EXPECT_EQ(r.exceeds_capacity, 1);
  EXPECT_EQ(r.wait.p50, 0);
  EXPECT_EQ(r.wait.p90, 400 * ms);
  EXPECT_EQ(r.wait.max, 400 * ms);
  EXPECT_DOUBLE_EQ(r.wait.mean, 80.0 * ms);
  EXPECT_EQ(r.peak_in_flight, 2);
  EXPECT_EQ(r.peak_waiting, 1);
  EXPECT_EQ(r.end_ns, 4200 * ms);
}

TEST(ConcurrencyReplay, UnboundedQueueServesInArrivalOrder) {
  const auto r = run(settings(2), small);
  // C, D, E, F, H are granted at 2, 3, 3, 3.5, 4: each in its arrival order, never a later one first.
  EXPECT_EQ(events_of(r),
            "0 2 1 admit\n0 3 1 admit\n0.5 1 1 admit 1.5\n1 1 1 admit 2\n1.6 0.5 1 admit 1.4\n2.5 1 1 admit 1\n"
            "3 1 3 exceeds-capacity\n3.2 1 1 admit 0.8\n");
  EXPECT_EQ(r.wait.p50, 1 * s);
  EXPECT_EQ(r.wait.p90, 2 * s);
  EXPECT_EQ(r.peak_waiting, 3);
  EXPECT_EQ(r.end_ns, 5 * s);
}

// A request for 3 at the head holds back the requests for 1 behind it, though a permit is free for them.
TEST(ConcurrencyReplay, LargeRequestAtTheHeadBlocksSmallerOnes) {
  const auto r = run(settings(3), "0 1\n0 2\n0.1 1 3\n0.2 0.1\n");
  // At 1 one permit frees: it is the 3-request's (not the 1-request's); at 2 it has all three.
  EXPECT_EQ(events_of(r), "0 1 1 admit\n0 2 1 admit\n0.1 1 3 admit 1.9\n0.2 0.1 1 admit 2.8\n");
  EXPECT_EQ(r.peak_in_flight, 3);
}

// A deadline at the very instant of a release: the grant wins (releases are processed first).
TEST(ConcurrencyReplay, GrantWinsOverADeadlineAtTheSameInstant) {
  const auto r = run(settings(1, std::nullopt, std::chrono::seconds(1)), "0 1.5\n0.5 1\n");
  EXPECT_EQ(events_of(r), "0 1.5 1 admit\n0.5 1 1 admit 1\n");
  const auto late = run(settings(1, std::nullopt, std::chrono::seconds(1)), "0 1.500000001\n0.5 1\n");
  EXPECT_EQ(events_of(late), "0 1.500000001 1 admit\n0.5 1 1 timeout 1\n");
}

// A timed-out waiter's partial grant goes to the waiters behind it (exactly once: no permit lost or doubled).
TEST(ConcurrencyReplay, TimedOutWaiterGivesItsPartialGrantBack) {
  // Limit 2. A holds 1 until 10; B holds 1 until 1. C (needs 2) waits; at 1 it is assigned B's permit but still needs
  // A's; its deadline at 2 returns that permit, which D (needs 1, waiting behind C) gets at once.
  const auto r = run(settings(2, std::nullopt, std::chrono::seconds(2)), "0 10\n0 1\n0 1 2\n0.5 1\n");
  EXPECT_EQ(events_of(r), "0 10 1 admit\n0 1 1 admit\n0 1 2 timeout 2\n0.5 1 1 admit 1.5\n");
  EXPECT_EQ(r.end_ns, 10 * s);
}

TEST(ConcurrencyReplay, ZeroTimeoutNeverQueues) {
  const auto r = run(settings(1, 0, std::chrono::nanoseconds(0)), "0 1\n0 1\n1 1\n");
  EXPECT_EQ(events_of(r), "0 1 1 admit\n0 1 1 timeout\n1 1 1 admit\n");
  EXPECT_EQ(r.peak_waiting, 0);
}

TEST(ConcurrencyReplay, AnEndPastTheEndOfTheClockStopsTheReplayNamingItsLine) {
  // Twelve requests of 10^9 s (the longest a trace line may give) through one permit: the tenth would end 10^10 s
  // after the start, past the 9.22 * 10^9 s of nanoseconds an int64 holds. It had ended at the clock's end, a wrong
  // maximum and mean with no word said; a timeout that far only saturates (a deadline there never comes).
  std::string trace;
  for (int i = 0; i < 12; ++i) trace += "0 1000000000\n";
  try {
    (void)run(settings(1), trace);
    ADD_FAILURE() << "no error";
  } catch (const clock_range_error& e) {
    EXPECT_EQ(e.line(), 10U);
    EXPECT_NE(std::string(e.what()).find("waited 9000000000 s"), std::string::npos) << e.what();
  }
  const auto r = run(settings(1, std::nullopt, std::chrono::nanoseconds::max()), "0 1000000000\n0 1\n");
  EXPECT_EQ(r.admitted_after_wait, 1);
}

TEST(ConcurrencyReplay, ZeroMaxWaitersRejectsInsteadOfQueueing) {
  const auto r = run(settings(1, 0), "0 1\n0.5 1\n1 1\n");
  EXPECT_EQ(events_of(r), "0 1 1 admit\n0.5 1 1 queue-full\n1 1 1 admit\n");
}

TEST(ConcurrencyReplay, TimelineSamplesInFlightAndWaiting) {
  const auto r = run(settings(1), "0 1\n0.5 1\n");
  using level = concurrency_timeline::level;
  using pair = std::pair<std::int64_t, std::int64_t>;
  const auto peak = [&](std::int64_t from, std::int64_t to) {
    const level l = r.timeline.peak(from, to);
    return pair(l.in_flight, l.waiting);
  };
  ASSERT_LT(r.timeline.bucket_ns(), 1 * ms);  // the checks below are a bucket away from each change
  EXPECT_EQ(peak(0, 499 * ms), pair(1, 0));
  EXPECT_EQ(peak(501 * ms, 999 * ms), pair(1, 1));
  EXPECT_EQ(peak(1001 * ms, 1999 * ms), pair(1, 0));  // hand-off: none waiting
  EXPECT_EQ(peak(2001 * ms, 5 * s), pair(0, 0));
  EXPECT_EQ(peak(0, 5 * s), pair(1, 1));
  EXPECT_EQ(r.end_ns, 2 * s);
}

// The streaming replay hands each event out as soon as it and every earlier one are decided: a request waiting at
// the head holds back the later ones, already decided, until its own outcome is known.
TEST(ConcurrencyReplay, EventsLeaveInArrivalOrderAsSoonAsDecided) {
  std::vector<std::string> seen;
  concurrency_replayer queued(settings(1, std::nullopt, std::chrono::seconds(1)),
                              [&](const request_event& e) { seen.push_back(format_concurrency_event(e)); });
  queued.add({0, 2 * s, 1, 1});         // admitted
  queued.add({100 * ms, 1 * s, 1, 2});  // waits; times out at 1.1 s
  queued.add({200 * ms, 1 * s, 2, 3});  // exceeds capacity at once, but behind the waiter
  EXPECT_EQ(seen, std::vector<std::string>{"0 2 1 admit\n"});
  EXPECT_EQ(queued.memory().pending, 2u);
  queued.add({1200 * ms, 1 * s, 1, 4});  // the deadline at 1.1 s comes first
  EXPECT_EQ(seen, (std::vector<std::string>{"0 2 1 admit\n", "0.1 1 1 timeout 1\n", "0.2 1 2 exceeds-capacity\n"}));
  const auto result = queued.finish();
  EXPECT_EQ(seen.back(), "1.2 1 1 admit 0.8\n");  // granted when the first completes, at 2 s
  EXPECT_EQ(result.requests, 4);
  EXPECT_EQ(queued.memory().pending, 0u);
  EXPECT_EQ(queued.memory().nodes, 2u);  // the waiters' nodes are reused: two for four requests
}

// --json --events from a spool gives the same document as from the events in memory.
TEST(ConcurrencyReplay, JsonWithStreamedEventsMatchesTheInMemoryDocument) {
  const auto c = settings(2, 1, std::chrono::seconds(1));
  const auto r = run(c, "0 2\n0 3\n0.5 1\n1 1\n1.6 0.5\n3 1 3\n");
  std::ostringstream whole;
  write_concurrency_json(whole, c, "t.txt", r, true);
  std::ostringstream streamed;
  write_concurrency_json(streamed, c, "t.txt", r, [&](std::ostream& out) {
    for (std::size_t i = 0; i < r.events.size(); ++i) {
      if (i > 0) out << ",\n";
      out << format_concurrency_event_json(r.events[i]);
    }
  });
  EXPECT_EQ(streamed.str(), whole.str());
  EXPECT_THAT(whole.str(), HasSubstr("\"exceeds-capacity\""));
}

// The JSON says whether the wait percentiles are exact, as the text does ("percentiles within 0.4%") and as the rate
// algorithms' delay_seconds.exact does (it did not: a reader could not tell).
TEST(ConcurrencyReplay, JsonSaysWhetherTheWaitPercentilesAreExact) {
  const auto c = settings(1, 1, std::chrono::seconds(1));
  auto r = run(c, "0 2\n0.5 1\n");
  for (const bool exact : {true, false}) {
    r.wait_exact = exact;
    std::ostringstream out;
    write_concurrency_json(out, c, "t.txt", r, false);
    EXPECT_EQ(nlohmann::json::parse(out.str()).at("wait_seconds").at("exact"), exact) << out.str();
  }
}

// The replay from a stream gives what the replay of the parsed trace gives.
TEST(ConcurrencyReplay, StreamedReplayMatchesTheReplayOfTheWholeTrace) {
  const std::string text = "0 2\n0 3\n0.5 1\n1 1\n1.6 0.5\n2.5 1\n3 1 3\n3.2 1\n";
  const auto c = settings(2, 1, std::chrono::seconds(1));
  const auto whole = run(c, text);
  std::istringstream in(text);
  std::string events;
  const auto streamed =
      replay_concurrency(c, in, [&](const request_event& e) { events += format_concurrency_event(e); });
  EXPECT_EQ(events, events_of(whole));
  std::ostringstream a, b;
  write_concurrency_summary(a, c, "t", whole);
  write_concurrency_summary(b, c, "t", streamed);
  EXPECT_EQ(a.str(), b.str());
  EXPECT_THAT(a.str(), HasSubstr("wait:             p50 0s, p90 400ms, p99 400ms, max 400ms, mean 80ms"));
}

// Random traces: the engine never exceeds the limit (replay_concurrency throws if it did), every request has one
// outcome, waits respect the timeout, and FIFO holds among requests of one size: a later arrival is never granted
// before an earlier one that was still waiting.
TEST(ConcurrencyReplay, RandomTracesKeepTheInvariants) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 50; ++round) {
    std::string text;
    std::int64_t t = 0;
    for (int i = 0; i < 300; ++i) {
      t += static_cast<std::int64_t>(rng() % (50 * ms));
      text += format_seconds(t) + " " + format_seconds(static_cast<std::int64_t>(rng() % (400 * ms))) + "\n";
    }
    const auto limit = static_cast<std::int64_t>(rng() % 5 + 1);
    const auto c = settings(limit, static_cast<std::int64_t>(rng() % 10), std::chrono::milliseconds(rng() % 300));
    const auto r = run(c, text);
    EXPECT_EQ(r.admitted + r.queue_full + r.timed_out + r.exceeds_capacity, r.requests);
    EXPECT_LE(r.peak_in_flight, limit);
    EXPECT_LE(r.peak_waiting, *c.max_waiters);
    std::int64_t last_grant = 0;
    for (const auto& e : r.events) {
      if (e.outcome == request_outcome::timeout) {
        EXPECT_EQ(e.wait_ns, c.timeout->count());
      }
      if (e.outcome != request_outcome::admitted) continue;
      EXPECT_LE(e.wait_ns, c.timeout->count());
      EXPECT_GE(e.t_ns + e.wait_ns, last_grant);  // grants in arrival order
      last_grant = e.t_ns + e.wait_ns;
    }
  }
}

TEST(ConcurrencyOptions, ChecksEachOptionNamingTheValue) {
  const auto error = [](const replay_options& o) {
    try {
      (void)to_concurrency_settings(o);
    } catch (const usage_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  replay_options o;
  o.algorithm = "concurrency";
  EXPECT_EQ(error(o), "--limit is required for concurrency");
  o.limit = "4";
  o.max_waiters = "0";
  o.timeout = "1.5s";
  const auto c = to_concurrency_settings(o);
  EXPECT_EQ(c.limit, 4);
  EXPECT_EQ(c.max_waiters, 0);
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.describe(), "concurrency limit=4 max-waiters=0 timeout=1500ms");
  o.rate = "5/s";
  EXPECT_THAT(error(o), HasSubstr("--rate \"5/s\" does not apply to concurrency"));
  o.rate.reset();
  o.timeout = "-1s";
  EXPECT_EQ(error(o), "invalid --timeout \"-1s\": must not be negative");
  o.timeout = "1 s";
  EXPECT_THAT(error(o), HasSubstr("invalid --timeout \"1 s\": expected a duration"));
  o.timeout.reset();
  o.limit = "0";
  EXPECT_THAT(error(o), HasSubstr("invalid --limit \"0\""));
  o.limit = "2";
  o.max_waiters = "1e3";
  EXPECT_THAT(error(o), HasSubstr("invalid --max-waiters \"1e3\": expected a whole number"));
}

TEST(ConcurrencyOptions, RunReplayReportsAndFailsWithStatusTwo) {
  replay_options o;
  o.algorithm = "concurrency";
  o.limit = "2";
  o.max_waiters = "1";
  o.timeout = "1s";
  std::istringstream in{std::string(small)};
  std::ostringstream out, err;
  EXPECT_EQ(run_replay(o, in, out, err), exit_ok);
  EXPECT_THAT(out.str(), HasSubstr("admitted:         5   62.5%  (4 at once, 1 after waiting)\n"));
  EXPECT_EQ(err.str(), "");
  std::istringstream bad{"0 1\n1\n"};
  std::ostringstream out2, err2;
  EXPECT_EQ(run_replay(o, bad, out2, err2), exit_bad_input);
  EXPECT_EQ(err2.str(),
            "admit replay: stdin: line 2: missing duration after \"1\": expected `<arrival seconds> <duration "
            "seconds> [n]`\n");
}

// The replay streams, so --events lines before a bad line are already out when it is found; the exit status is
// still 2. A --plot file is checked before the replay but written only after it: a bad trace leaves no new file
// behind, and an existing one untouched.
TEST(ConcurrencyOptions, BadLineAfterStreamedEventsLeavesNoPlot) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("admit replay plot test " + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::filesystem::create_directories(dir);
  replay_options o;
  o.algorithm = "concurrency";
  o.limit = "1";
  o.events = true;
  o.plot = (dir / "new chart.svg").string();
  std::istringstream bad{"0 1\n0.5 soon\n"};
  std::ostringstream out, err;
  EXPECT_EQ(run_replay(o, bad, out, err), exit_bad_input);
  EXPECT_EQ(out.str(), "0 1 1 admit\n");
  EXPECT_THAT(err.str(), HasSubstr("line 2: invalid duration \"soon\""));
  EXPECT_FALSE(std::filesystem::exists(*o.plot));

  o.plot = (dir / "old chart.svg").string();
  std::ofstream(*o.plot) << "kept";
  std::istringstream bad_again{"0 1\n0.5 soon\n"};
  std::ostringstream out2, err2;
  EXPECT_EQ(run_replay(o, bad_again, out2, err2), exit_bad_input);
  std::ifstream kept(*o.plot);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "kept");

  std::istringstream good{"0 1\n0.5 1\n"};
  std::ostringstream out3, err3;
  EXPECT_EQ(run_replay(o, good, out3, err3), exit_ok);
  EXPECT_EQ(out3.str().substr(0, out3.str().find('#')), "0 1 1 admit\n0.5 1 1 admit 0.5\n");
  std::ifstream chart(*o.plot);
  EXPECT_THAT(std::string(std::istreambuf_iterator<char>(chart), {}), HasSubstr("permits in flight"));
  std::filesystem::remove_all(dir);
}

}  // namespace

}  // namespace replay_concurrency_test
