// What `admit serve` says about its backend (serve/engine/backend_health.hpp), with explicit times: one event when it
// starts failing, one when it counts again, a summary per interval while it fails, and never one per call — also when
// it flaps.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <stdexcept>

#include "serve/engine/backend_health.hpp"

namespace backend_health_test {
namespace {

using admit::serve::backend_event;
using admit::serve::backend_health;
using namespace std::chrono_literals;

const backend_health::clock::time_point t0 = backend_health::clock::time_point{} + 1000h;

TEST(BackendHealth, AnOutageIsOneLineAtItsStartOneAMinuteAndOneAtItsEnd) {
  backend_health h;
  EXPECT_FALSE(h.answered(t0));  // healthy: nothing to say
  const auto first = h.failed("Redis at 127.0.0.1:6379 did not answer", true, t0);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->what, backend_event::kind::failing);
  EXPECT_EQ(first->error, "Redis at 127.0.0.1:6379 did not answer");
  EXPECT_TRUE(h.failing());
  for (int i = 1; i <= 1000; ++i) {
    EXPECT_FALSE(h.failed("connection refused", i % 4 != 0, t0 + i * 10ms));  // never one per call
  }
  EXPECT_FALSE(h.summary_due(t0 + 59s));
  const auto summary = h.summary_due(t0 + 60s);
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->what, backend_event::kind::summary);
  EXPECT_EQ(summary->error, "connection refused");  // the latest
  EXPECT_EQ(summary->decided_open, 751);            // the first call's, and 750 of the 1000
  EXPECT_EQ(summary->decided_closed, 250);
  EXPECT_EQ(summary->failing_for, 60s);
  EXPECT_FALSE(h.summary_due(t0 + 61s));  // one a minute
  (void)h.failed("connection refused", true, t0 + 70s);
  const auto back = h.answered(t0 + 75s);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->what, backend_event::kind::counting);
  EXPECT_EQ(back->failing_for, 75s);
  EXPECT_EQ(back->decided_open, 1);  // since the summary
  EXPECT_FALSE(h.failing());
  EXPECT_FALSE(h.answered(t0 + 76s));
  EXPECT_FALSE(h.summary_due(t0 + 200s));  // healthy: no summary
}

TEST(BackendHealth, AFlappingBackendSaysSoAtMostOnceAnInterval) {
  backend_health h(1min);
  ASSERT_TRUE(h.failed("key cap reached", true, t0));
  ASSERT_TRUE(h.answered(t0 + 1s));
  int lines = 2;
  for (int i = 2; i < 120; ++i) {  // fails and counts alternately, every second, for two minutes
    const auto at = t0 + std::chrono::seconds(i);
    if (i % 2 == 0) {
      lines += h.failed("key cap reached", true, at) ? 1 : 0;
    } else {
      lines += h.answered(at) ? 1 : 0;
    }
    lines += h.summary_due(at) ? 1 : 0;
  }
  EXPECT_LE(lines, 2 + 2 * 2);  // the first outage, then at most a summary and its end per minute
  EXPECT_GE(lines, 3);          // but said: the summary reports the silent outages
}

// An outage that begins within an interval of the last line and ends before a summary is told once the interval has
// passed (it was never told: the metrics showed it, the log did not).
TEST(BackendHealth, AnOutageTooSoonAfterTheLastLineIsToldOnceTheIntervalHasPassed) {
  backend_health h(1min);
  ASSERT_TRUE(h.failed("connection refused", true, t0));
  ASSERT_TRUE(h.answered(t0 + 4s));
  EXPECT_FALSE(h.failed("timed out", true, t0 + 10s));  // silent: within a minute of the last line
  EXPECT_FALSE(h.failed("timed out", false, t0 + 11s));
  EXPECT_FALSE(h.answered(t0 + 12s));
  EXPECT_FALSE(h.failed("timed out", true, t0 + 20s));  // another
  EXPECT_FALSE(h.answered(t0 + 23s));
  EXPECT_FALSE(h.summary_due(t0 + 30s));
  const auto told = h.summary_due(t0 + 64s);
  ASSERT_TRUE(told);
  EXPECT_EQ(told->what, backend_event::kind::failed_meanwhile);
  EXPECT_EQ(told->error, "timed out");
  EXPECT_EQ(told->decided_open, 2);
  EXPECT_EQ(told->decided_closed, 1);
  EXPECT_EQ(told->failing_for, 5s);
  EXPECT_FALSE(h.summary_due(t0 + 200s));  // told once
  // An outage that starts once the interval has passed is told as ever, its own decisions alone.
  ASSERT_TRUE(h.failed("refused", true, t0 + 300s));
  const auto back = h.answered(t0 + 302s);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->what, backend_event::kind::counting);
  EXPECT_EQ(back->decided_open, 1);
}

TEST(BackendHealth, TheIntervalMustBePositive) { EXPECT_THROW(backend_health(0s), std::invalid_argument); }

}  // namespace
}  // namespace backend_health_test
