// Tests of the table of rate algorithms (src/cli/common/algorithms.hpp) and of replay's options checked into a
// configuration (cli/replay/options.hpp): each algorithm's defaults, the options it refuses with messages naming the
// value, and the per-window limits within the bounds of the library's limiters.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "admit/fixed_window.hpp"

#include "replay_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace algorithms_test {

namespace {

using namespace admit::cli;
using namespace admit::cli::replay_testing;

TEST(ReplayResolve, DefaultsPerAlgorithm) {
  const auto tb = settings_for(algorithm::token_bucket, "100/s");
  EXPECT_EQ(tb.burst, 1);
  EXPECT_EQ(tb.mode, replay_mode::allow);
  EXPECT_EQ(tb.describe(), "token-bucket rate=100/s burst=1 mode=allow");
  const auto p = settings_for(algorithm::pacer, "100/s");
  EXPECT_EQ(p.slack, 10);
  EXPECT_EQ(p.mode, replay_mode::reserve);
  const auto fw = settings_for(algorithm::fixed_window, "100/s",
                               [](replay_config& c) { c.window = std::chrono::milliseconds(500); });
  EXPECT_EQ(fw.window_limit, 50);
  EXPECT_EQ(fw.describe(), "fixed-window rate=100/s window=500ms limit=50 mode=allow");
  const auto w = settings_for(algorithm::warmup, "10/s");
  EXPECT_EQ(w.warmup, std::chrono::seconds(10));
  EXPECT_EQ(w.cold_factor, 3.0);
  const auto g = settings_for(algorithm::gcra, "10/s", [](replay_config& c) { c.mode = replay_mode::reserve; });
  EXPECT_EQ(g.describe(), "gcra rate=10/s burst=1 mode=reserve");
}

TEST(ReplayResolve, RefusesWithMessagesNamingTheValue) {
  EXPECT_EQ(resolve_error(config_for(algorithm::token_bucket, "10/s", [](replay_config& c) { c.burst = 0; })),
            "invalid --burst 0: must be a whole number from 1 to 1000000000");
  EXPECT_EQ(resolve_error(config_for(algorithm::token_bucket, "10/s",
                                     [](replay_config& c) { c.window = std::chrono::seconds(2); })),
            "--window 2s does not apply to token-bucket");
  EXPECT_EQ(resolve_error(config_for(algorithm::gcra, "10/s", [](replay_config& c) { c.slack = 3; })),
            "--slack 3 does not apply to gcra");
  EXPECT_EQ(resolve_error(config_for(algorithm::fixed_window, "10/s", [](replay_config& c) { c.burst = 5; })),
            "--burst 5 does not apply to fixed-window");
  EXPECT_EQ(
      resolve_error(config_for(algorithm::pacer, "10/s", [](replay_config& c) { c.warmup = std::chrono::seconds(1); })),
      "--warmup 1s does not apply to pacer");
  EXPECT_EQ(resolve_error(
                config_for(algorithm::fixed_window, "10/s", [](replay_config& c) { c.mode = replay_mode::reserve; })),
            "--mode reserve does not apply to fixed-window: it can only admit or reject (use --mode allow)");
  EXPECT_EQ(resolve_error(
                config_for(algorithm::sliding_log, "10/s", [](replay_config& c) { c.mode = replay_mode::reserve; })),
            "--mode reserve does not apply to sliding-log: it can only admit or reject (use --mode allow)");
  EXPECT_EQ(resolve_error(config_for(algorithm::fixed_window, "1/s",
                                     [](replay_config& c) { c.window = std::chrono::milliseconds(500); })),
            "--rate 1/s with --window 500ms allows less than one request per window (0.5); use --rate 2/s (1 per 500ms "
            "window), or --window 1s (1 per window)");
  // A window of one unit and a fraction is named whole in the rates it suggests (they were "100/.0000001s": its
  // leading 1 taken for the "1" of "1s", a rate that does not parse).
  EXPECT_EQ(resolve_error(config_for(algorithm::fixed_window, "100/s",
                                     [](replay_config& c) { c.window = std::chrono::nanoseconds(1'000'000'100); })),
            "--rate 100/s with --window 1.0000001s gives 100.00001 requests per window, and a window counts whole "
            "requests; use --rate 100/1.0000001s or 101/1.0000001s (100 or 101 per 1.0000001s window), or --window 1s "
            "(100 per window)");
  EXPECT_EQ(resolve_error(config_for(algorithm::sliding_log, "inf")),
            "--rate inf does not apply to sliding-log: a window needs a finite limit");
}

TEST(ReplayResolve, PerWindowLimitWithinTheLimitersBounds) {
  // sliding-window and sliding-log pack the limit in 24 bits.
  EXPECT_EQ(settings_for(algorithm::sliding_window, "16777215/s").window_limit, 16'777'215);
  EXPECT_EQ(resolve_error(config_for(algorithm::sliding_window, "16777216/s")),
            "--rate 16777216/s with --window 1s gives a per-window limit of 16777216, above sliding-window's maximum "
            "of 16777215");
  EXPECT_EQ(resolve_error(config_for(algorithm::sliding_log, "33554432/2s",
                                     [](replay_config& c) { c.window = std::chrono::seconds(2); })),
            "--rate 16777216/s with --window 2s gives a per-window limit of 33554432, above sliding-log's maximum of "
            "16777215");
  // fixed-window: the window in ns must be larger than the limit (999,999,998 for 1 s).
  EXPECT_EQ(settings_for(algorithm::fixed_window, "999999998/s").window_limit, 999'999'998);
  EXPECT_EQ(resolve_error(config_for(algorithm::fixed_window, "999999999/s")),
            "--rate 999999999/s with --window 1s gives a per-window limit of 999999999, above fixed-window's maximum "
            "of 999999998 for a 1s window (the window in nanoseconds must be larger than the limit)");
  // rate * window exactly, forgiving only floating-point noise; a fraction is refused, never rounded.
  const auto limit_of = [](const char* r, std::chrono::nanoseconds w) {
    return settings_for(algorithm::sliding_window, r, [w](replay_config& c) { c.window = w; }).window_limit;
  };
  EXPECT_EQ(limit_of("7/3s", std::chrono::seconds(3)), 7);
  EXPECT_EQ(limit_of("10/3s", std::chrono::milliseconds(300)), 1);
  EXPECT_EQ(limit_of("100/day", std::chrono::hours(24 * 7)), 700);
  EXPECT_THROW((void)limit_of("2.9999/s", std::chrono::seconds(1)), std::invalid_argument);
  EXPECT_THROW((void)limit_of("16777214.99/s", std::chrono::seconds(1)), std::invalid_argument);
  EXPECT_EQ(max_window_limit(algorithm::fixed_window, std::chrono::nanoseconds(1)), 0);
  EXPECT_EQ(max_window_limit(algorithm::sliding_log, std::chrono::hours(1)), 16'777'215);
  EXPECT_EQ(max_window_limit(algorithm::token_bucket, std::chrono::seconds(1)), 0);
  // Every limit resolve() accepts, the limiter accepts too (sliding-log left out: 16,777,215 slots are 256 MiB).
  for (const char* r : {"16777215/s", "999999998/s"}) {
    for (auto a : {algorithm::fixed_window, algorithm::sliding_window}) {
      replay_settings settings;
      try {
        settings = settings_for(a, r);
      } catch (const std::invalid_argument&) {
        continue;
      }
      EXPECT_NO_THROW((void)make_limiter(settings)) << to_string(a) << " " << r;
    }
  }
}

TEST(ReplayResolve, FixedWindowMaximumIsExactlyTheLimitersBound) {
  const auto check = [](std::int64_t w_ns) {
    const std::chrono::nanoseconds w{w_ns};
    const std::int64_t most = max_window_limit(algorithm::fixed_window, w);
    if (most >= 1) {
      EXPECT_NO_THROW((admit::fixed_window{most, w})) << w_ns;
    }
    EXPECT_THROW((admit::fixed_window{most + 1, w}), std::invalid_argument) << w_ns;
  };
  for (std::int64_t w = 1; w <= 3000; ++w) check(w);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) check(1 + static_cast<std::int64_t>(rng() % (std::uint64_t{1} << (1 + i % 62))));
  for (std::int64_t w : {s, 60 * s, 3600 * s, std::numeric_limits<std::int64_t>::max()}) check(w);
}

TEST(ReplayOptions, CheckedIntoAConfig) {
  const auto c = to_config(options_for("gcra", "5/500ms", [](replay_options& o) { o.burst = "7"; }));
  EXPECT_EQ(c.algo, algorithm::gcra);
  EXPECT_EQ(c.limit, admit::rate::parse("10/s"));
  EXPECT_EQ(c.burst, 7);

  const auto error = [](const replay_options& bad) -> std::string {
    try {
      (void)to_config(bad);
    } catch (const usage_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error(options_for("leaky", "1/s")),
            "unknown --algorithm \"leaky\": expected one of "
            "token-bucket|gcra|pacer|fixed-window|sliding-window|sliding-log|warmup|concurrency");
  EXPECT_EQ(error(options_for("gcra", "fast")),
            "invalid --rate \"fast\": missing '/'; expected N/s, N/ms, N/min, N/h, N/day, N/500ms (N a non-negative "
            "decimal) or inf; units ns, us, ms, s, min, h, d, and second, minute, hour, day, week, month, year");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.burst = "-1"; })),
            "invalid --burst \"-1\": must be a whole number from 1 to 1000000000");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.burst = "0"; })),
            "invalid --burst \"0\": must be a whole number from 1 to 1000000000");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.burst = "1e3"; })),
            "invalid --burst \"1e3\": expected a whole number from 1 to 1000000000");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.burst = "99999999999999999999"; })),
            "invalid --burst \"99999999999999999999\": must be a whole number from 1 to 1000000000");
  EXPECT_EQ(error(options_for("pacer", "1/s", [](replay_options& o) { o.slack = "-2"; })),
            "invalid --slack \"-2\": must be a whole number from 0 to 1000000000");
  EXPECT_EQ(error(options_for("fixed-window", "1/s", [](replay_options& o) { o.window = "0ms"; })),
            "invalid --window \"0ms\": must be positive");
  EXPECT_EQ(error(options_for("fixed-window", "1/s", [](replay_options& o) { o.window = "1 s"; })),
            "invalid --window \"1 s\": expected a duration such as 500ms, 1s, 10s, 2min, without spaces (units ns, us, "
            "ms, s, min, h, d)");
  // Each problem is named as what it is (cli_values_test has the rest): a window far too long is "too large".
  EXPECT_EQ(error(options_for("fixed-window", "1/s", [](replay_options& o) { o.window = "1000000d"; })),
            "invalid --window \"1000000d\": too large (max 1000000000s, about 31 years)");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.mode = "sometimes"; })),
            "invalid --mode \"sometimes\": expected allow or reserve");
}

}  // namespace

}  // namespace algorithms_test
