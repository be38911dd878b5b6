// Tests of the replay engine of `admit replay` (src/cli/replay/replay.hpp) with a limiter of known answers, and of the
// command itself (cli/replay/options.hpp): counts, delays, percentiles, buckets, exit statuses and the events' form.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/replay/report.hpp"

#include "replay_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace replay_engine_test {

namespace {

using namespace admit::cli;
using namespace admit::cli::replay_testing;

TEST(ReplayEngine, CountsTokensDelaysAndPercentiles) {
  even_limiter l;
  const auto r = replay(l, trace_of("0 2\n0.5 1\n1 4\n1 3\n2 10\n"));
  EXPECT_EQ(r.arrivals, 5);
  EXPECT_EQ(r.tokens, 20);
  EXPECT_EQ(r.admitted, 3);
  EXPECT_EQ(r.admitted_tokens, 16);
  EXPECT_EQ(r.rejected, 2);
  EXPECT_EQ(r.rejected_tokens, 4);
  EXPECT_EQ(r.delayed, 3);
  EXPECT_EQ(r.delay.p50, 4 * ms);  // nearest rank over {2, 4, 10} ms
  EXPECT_EQ(r.delay.p90, 10 * ms);
  EXPECT_EQ(r.delay.max, 10 * ms);
  EXPECT_DOUBLE_EQ(r.delay.mean, 16.0 * ms / 3);
  EXPECT_EQ(r.first_ns, 0);
  EXPECT_EQ(r.last_ns, 2 * s);
  EXPECT_EQ(r.last_admission_ns, 2 * s + 10 * ms);
  ASSERT_EQ(r.events.size(), 5u);
  EXPECT_FALSE(r.events[1].admitted);
  EXPECT_EQ(r.events[1].delay_ns, 0);
  EXPECT_EQ(r.events[2].delay_ns, 4 * ms);
}

TEST(ReplayEngine, EmptyTrace) {
  even_limiter l;
  const auto r = replay(l, {});
  EXPECT_EQ(r.arrivals, 0);
  EXPECT_EQ(r.delay.max, 0);
  std::ostringstream text, json;
  write_summary(text, {settings_for(algorithm::token_bucket, "1/s"), "empty"}, r);
  write_json(json, {settings_for(algorithm::token_bucket, "1/s"), "empty"}, r, true);
  EXPECT_NE(text.str().find("0 arrivals"), std::string::npos);
  EXPECT_NE(json.str().find("\"events\": []"), std::string::npos);
}

TEST(ReplayEngine, BucketsByArrivalAndAdmissionTime) {
  even_limiter l;
  const auto r = replay(l, trace_of("0 2\n0.5 1\n1.999 4\n"));
  const auto b = bucketize(r, s);
  ASSERT_EQ(b.size(), 3u);  // the last admission is at 2.003 s
  EXPECT_EQ(b[0].offered, 3);
  EXPECT_EQ(b[0].admitted, 2);
  EXPECT_EQ(b[0].rejected, 1);
  EXPECT_EQ(b[1].offered, 4);
  EXPECT_EQ(b[1].admitted, 0);
  EXPECT_EQ(b[2].admitted, 4);
  EXPECT_EQ(b[2].start_ns, 2 * s);
  EXPECT_THROW((void)bucketize(r, 0), std::invalid_argument);
}

TEST(ReplayEngine, BucketWidthIsNiceAndBounded) {
  EXPECT_EQ(choose_bucket_width(60 * s, 15), 5 * s);
  EXPECT_EQ(choose_bucket_width(60 * s, 120), 1 * s);  // 120 half-second buckets and the one holding 60 s
  EXPECT_EQ(choose_bucket_width(59 * s, 120), 500 * ms);
  EXPECT_EQ(choose_bucket_width(0, 10), ms);
  EXPECT_EQ(choose_bucket_width(999 * ms, 10), 100 * ms);
  const std::int64_t huge = 1'000'000'000 * s;
  const std::int64_t w = choose_bucket_width(huge, 100);
  EXPECT_LE(huge / w + 1, 100);
}

TEST(ReplayCommand, ReportsBadTraceWithExitStatus2) {
  const auto o = options_for("token-bucket", "1/s");
  std::istringstream in("0\n1\nzz\n");
  std::ostringstream out, err;
  EXPECT_EQ(run_replay(o, in, out, err), exit_bad_input);
  EXPECT_EQ(err.str(),
            "admit replay: stdin: line 3: invalid time \"zz\": expected seconds since start, a decimal with up to 9 "
            "fraction digits\n");
  EXPECT_EQ(out.str(), "");
}

TEST(ReplayCommand, EventsLinesThenCommentedSummary) {
  const auto o = options_for("token-bucket", "1/s", [](replay_options& x) {
    x.burst = "2";
    x.events = true;
  });
  std::istringstream in("0\n0\n0\n1\n");
  std::ostringstream out, err;
  ASSERT_EQ(run_replay(o, in, out, err), exit_ok) << err.str();
  EXPECT_EQ(out.str().rfind("0 1 admit\n0 1 admit\n0 1 reject\n1 1 admit\n# admit replay: token-bucket", 0), 0u)
      << out.str();
  // The whole output reads back as a trace: the summary lines are comments, the verdicts are not numbers...
  // so only check that every non-comment line starts with a time.
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(parse_seconds(line.substr(0, line.find(' '))).has_value()) << line;
  }
}

}  // namespace

}  // namespace replay_engine_test
