// The concurrency replay streams (src/cli/replay/concurrency_simulation.cpp): a trace of millions of requests,
// generated line by line as it is read (no file, no whole-trace buffer), is replayed with memory bounded by the live
// requests. Its own test program, so that the process's peak resident set measured here is this test's.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <istream>
#include <streambuf>
#include <string>

#include "cli/replay/concurrency_replay.hpp"
#include "cli/replay/delay_percentiles.hpp"

#include "stream_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace replay_concurrency_stream_test {

namespace {

using namespace admit::cli;

using stream_testing::peak_rss_kb;
using stream_testing::sanitized;

#ifdef NDEBUG
constexpr std::size_t plain_requests = 3'000'000;
#else
constexpr std::size_t plain_requests = 1'000'000;  // unoptimized parsing and replay: about 5 s
#endif
// Under a sanitizer each allocation and access costs several times more (about 1.5 s at -O1 with AddressSanitizer),
// and freed memory is held in a quarantine, so the resident set says nothing about what the replay keeps: fewer
// requests, and only the structural counts are checked.
constexpr std::size_t requests = sanitized ? 500'000 : plain_requests;

// "<t> <duration>\n" for request i = 0, 1, ...: one arrival every 100 us (10,000 a second) holding its permit for
// 5 to 15 ms (mean 10 ms, so about 100 in flight, the limit: the queue fills and drains), and every 100,000th
// request a burst: a 2 s request needing all 100 permits, which makes the queue fill, overflow and time out.
class generated_trace : public std::streambuf {
 public:
  explicit generated_trace(std::size_t count) : count_(count) {}

 protected:
  int_type underflow() override {
    if (next_ == count_) return traits_type::eof();
    const std::size_t i = next_++;
    const std::int64_t t_us = static_cast<std::int64_t>(i) * 100;
    line_ = std::to_string(t_us / 1'000'000) + "." + std::to_string(1'000'000 + t_us % 1'000'000).substr(1);
    if (i % 100'000 == 99'999) {
      line_ += " 2 100\n";
    } else {
      const auto d_us = 5'000 + static_cast<std::int64_t>((i * 7919) % 1000) * 10;
      line_ += " 0." + std::to_string(1'000'000 + d_us).substr(1) + "\n";
    }
    setg(line_.data(), line_.data(), line_.data() + line_.size());
    return traits_type::to_int_type(line_[0]);
  }

 private:
  std::size_t count_;
  std::size_t next_ = 0;
  std::string line_;
};

TEST(ConcurrencyReplayStream, LongTraceReplaysInBoundedMemory) {
  const long before_kb = peak_rss_kb();
  concurrency_settings c;
  c.limit = 100;
  c.max_waiters = 1000;
  c.timeout = std::chrono::seconds(1);
  generated_trace source(requests);
  std::istream in(&source);
  std::size_t events = 0;
  concurrency_replayer replayer(c, [&](const request_event&) { ++events; });
  request_trace_parser parser;
  std::string line;
  std::size_t read = 0;
  while (std::getline(in, line)) {
    if (auto r = parser.feed(line)) {
      replayer.add(*r);
      ++read;
    }
  }
  const auto r = replayer.finish();
  const auto f = replayer.memory();
  ASSERT_EQ(r.requests, static_cast<std::int64_t>(requests));
  EXPECT_EQ(read, requests);
  EXPECT_EQ(events, requests);  // every event handed out, in order (the replayer checks the order)
  EXPECT_EQ(r.admitted + r.queue_full + r.timed_out + r.exceeds_capacity, r.requests);
  EXPECT_GT(r.queue_full, 0);  // the bursts fill the queue...
  EXPECT_GT(r.timed_out, 0);   // ...and some waiters give up
  EXPECT_GT(r.admitted_after_wait, 0);
  // Live state is bounded by the limiter and the timeout, not the trace: nodes by max-waiters (plus the request
  // being decided); timed events by the completions of the requests holding permits plus the deadlines of the
  // arrivals that queued within the last timeout (a deadline stays queued until its time even when the waiter was
  // granted: 10,000 arrivals a second); the reorder buffer by the arrivals within one timeout plus the waiters.
  EXPECT_LE(f.peak_nodes, 1'001u);
  EXPECT_LE(f.peak_timed, 100u + 10'001u);
  EXPECT_LE(f.peak_pending, 10'000u + 1'000u + 1u);
  // The waits kept exactly for the percentiles: each one up to delay_percentiles::exact_limit, none once the
  // histogram took over (the release build's trace has more).
  if (static_cast<std::size_t>(r.admitted_after_wait) <= delay_percentiles::exact_limit) {
    EXPECT_EQ(f.waits, static_cast<std::size_t>(r.admitted_after_wait));
    EXPECT_TRUE(r.wait_exact);
  } else {
    EXPECT_EQ(f.waits, 0u);
    EXPECT_FALSE(r.wait_exact);
  }
  if (!sanitized) {
    // What it keeps (the waits at 8 bytes, the structures above at some 100 bytes an entry) plus 16 MB of slack for
    // the allocator and the test's own strings. Without streaming this trace alone took about 240 bytes a request.
    const long budget_kb =
        16 * 1024 + static_cast<long>(f.waits * 8 + (f.peak_nodes + f.peak_timed + f.peak_pending) * 128) / 1024;
    const long growth_kb = peak_rss_kb() - before_kb;
    EXPECT_LT(growth_kb, budget_kb) << "waits kept: " << f.waits;
    EXPECT_LT(budget_kb * 1024, static_cast<long>(requests) * 240 / 4);  // the check would catch the old replay
  }
}

}  // namespace

}  // namespace replay_concurrency_stream_test
