// Tests of the replay engine of `admit replay` (src/cli/replay.hpp) and of the command's option checks
// (cli/options.hpp): exact counts on small hand-written traces.
#include "cli/replay.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "admit/fixed_window.hpp"
#include "admit/token_bucket.hpp"
#include "cli/options.hpp"
#include "cli/report.hpp"
#include "cli/trace.hpp"

namespace {

using namespace admit::cli;
constexpr std::int64_t ms = 1'000'000;
constexpr std::int64_t s = 1'000'000'000;

std::vector<arrival> trace_of(std::string_view text) { return read_trace(text); }

// Designated initializers would read better, but g++ 12 warns (-Wmissing-field-initializers) on every omitted field.
using config_edit = std::function<void(replay_config&)>;
using options_edit = std::function<void(replay_options&)>;

replay_config config_for(algorithm a, const char* r, const config_edit& edit = {}) {
  replay_config c;
  c.algo = a;
  c.limit = admit::rate::parse(r);
  if (edit) edit(c);
  return c;
}

replay_settings settings_for(algorithm a, const char* r, const config_edit& edit = {}) {
  return resolve(config_for(a, r, edit));
}

replay_options options_for(const char* algo, const char* r, const options_edit& edit = {}) {
  replay_options o;
  o.algorithm = algo;
  o.rate = r;
  if (edit) edit(o);
  return o;
}

std::string resolve_error(replay_config c) {
  try {
    (void)resolve(c);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A limiter with a known answer: admits arrivals of even n after a delay of n ms, rejects odd n.
class even_limiter final : public replay_limiter {
 public:
  outcome offer(std::int64_t, std::int64_t n) override { return {n % 2 == 0, n % 2 == 0 ? n * ms : 0}; }
};

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
            "invalid --burst \"-1\": must be at least 1");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.burst = "0"; })),
            "invalid --burst \"0\": must be a whole number from 1 to 1000000000");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.burst = "1e3"; })),
            "invalid --burst \"1e3\": expected a whole number from 1 to 1000000000");
  EXPECT_EQ(error(options_for("gcra", "1/s", [](replay_options& o) { o.burst = "99999999999999999999"; })),
            "invalid --burst \"99999999999999999999\": must be a whole number from 1 to 1000000000");
  EXPECT_EQ(error(options_for("pacer", "1/s", [](replay_options& o) { o.slack = "-2"; })),
            "invalid --slack \"-2\": must not be negative");
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

// --- Through the real limiters ---------------------------------------------------------------------------------------

const char* const small_trace = "0\n0\n0\n1\n1\n1.5\n2\n";

TEST(ReplayTokenBucket, AllowModeExactCounts) {
  const auto r = replay(settings_for(algorithm::token_bucket, "1/s", [](replay_config& c) { c.burst = 2; }),
                        trace_of(small_trace));
  EXPECT_EQ(r.admitted, 4);  // t=0: 2 of 3; t=1: 1 of 2; t=1.5: none (half a token); t=2: 1
  EXPECT_EQ(r.rejected, 3);
  EXPECT_EQ(r.delayed, 0);
  std::vector<bool> verdicts;
  for (const auto& e : r.events) verdicts.push_back(e.admitted);
  EXPECT_EQ(verdicts, (std::vector<bool>{true, true, false, true, false, false, true}));
}

TEST(ReplayTokenBucket, ReserveModeDelaysInsteadOfRejecting) {
  const auto r = replay(settings_for(algorithm::token_bucket, "1/s",
                                     [](replay_config& c) {
                                       c.burst = 2;
                                       c.mode = replay_mode::reserve;
                                     }),
                        trace_of(small_trace));
  EXPECT_EQ(r.admitted, 7);
  EXPECT_EQ(r.rejected, 0);
  EXPECT_EQ(r.delayed, 5);
  std::vector<std::int64_t> delays;
  for (const auto& e : r.events) delays.push_back(e.delay_ns);
  // Ready at 0, 0, 1, 2, 3, 4, 5 s.
  EXPECT_EQ(delays, (std::vector<std::int64_t>{0, 0, 1 * s, 1 * s, 2 * s, 2500 * ms, 3 * s}));
  EXPECT_EQ(r.delay.p50, 1 * s);
  EXPECT_EQ(r.delay.p90, 3 * s);
  EXPECT_EQ(r.delay.max, 3 * s);
  EXPECT_EQ(r.last_admission_ns, 5 * s);
  const auto b = bucketize(r, s);
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[0].admitted, 2);
  for (std::size_t i = 1; i < 6; ++i) EXPECT_EQ(b[i].admitted, 1) << i;
}

TEST(ReplayTokenBucket, RequestLargerThanBurstIsRejectedEvenWhenReserving) {
  const auto r = replay(settings_for(algorithm::token_bucket, "1/s",
                                     [](replay_config& c) {
                                       c.burst = 2;
                                       c.mode = replay_mode::reserve;
                                     }),
                        trace_of("0 3\n0 2\n"));
  EXPECT_FALSE(r.events[0].admitted);
  EXPECT_TRUE(r.events[1].admitted);
  EXPECT_EQ(r.rejected_tokens, 3);
}

TEST(ReplayTokenBucket, NeverAdmitsMoreThanRateTimesSpanPlusBurst) {
  std::mt19937_64 rng(42);
  std::string text;
  std::int64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += static_cast<std::int64_t>(rng() % (20 * ms));
    text += format_seconds(t) + " " + std::to_string(1 + rng() % 3) + "\n";
  }
  const auto trace = trace_of(text);
  const auto r = replay(settings_for(algorithm::token_bucket, "100/s", [](replay_config& c) { c.burst = 10; }), trace);
  // Over every window [a, b] of arrivals: admitted tokens <= 100/s * (b - a) + 10.
  std::vector<std::pair<std::int64_t, std::int64_t>> admitted;
  for (const auto& e : r.events) {
    if (e.admitted) admitted.emplace_back(e.t_ns, e.n);
  }
  for (std::size_t i = 0; i < admitted.size(); i += 37) {
    std::int64_t sum = 0;
    for (std::size_t j = i; j < admitted.size(); ++j) {
      sum += admitted[j].second;
      const double bound = 100.0 * static_cast<double>(admitted[j].first - admitted[i].first) / 1e9 + 10;
      ASSERT_LE(static_cast<double>(sum), bound + 1e-9) << i << ".." << j;
    }
  }
  EXPECT_GT(r.rejected, 0);
  EXPECT_GT(r.admitted, 0);
}

TEST(ReplayWindows, FixedWindowsStartWithTheTrace) {
  // Limit 2 per 1 s window, windows [0,1), [1,2): 2 of 4 in the first, 2 of 3 in the second.
  const auto r =
      replay(settings_for(algorithm::fixed_window, "2/s", [](replay_config& c) { c.window = std::chrono::seconds(1); }),
             trace_of("0\n0.1\n0.2\n0.999999999\n1\n1.1\n1.2\n"));
  std::vector<bool> verdicts;
  for (const auto& e : r.events) verdicts.push_back(e.admitted);
  EXPECT_EQ(verdicts, (std::vector<bool>{true, true, false, false, true, true, false}));
}

TEST(ReplayWindows, SlidingLogIsExact) {
  // Limit 2 per any 1 s: 0 and 0.5 admitted; 0.9 rejected; 1.0 admitted (0 has left the window: (0, 1]);
  // 1.2 rejected (0.5 and 1.0 inside); 1.5 admitted.
  const auto r =
      replay(settings_for(algorithm::sliding_log, "2/s", [](replay_config& c) { c.window = std::chrono::seconds(1); }),
             trace_of("0\n0.5\n0.9\n1\n1.2\n1.5\n"));
  EXPECT_EQ(r.admitted, 4);
  EXPECT_EQ(r.rejected, 2);
}

TEST(ReplayPacer, SpacesRequestsEvenlyWithoutSlack) {
  const auto r =
      replay(settings_for(algorithm::pacer, "10/s", [](replay_config& c) { c.slack = 0; }), trace_of("0\n0\n0\n0 2\n"));
  std::vector<std::int64_t> delays;
  for (const auto& e : r.events) delays.push_back(e.delay_ns);
  // 100 ms apart; a request for 2 tokens takes two slots and starts at the second.
  EXPECT_EQ(delays, (std::vector<std::int64_t>{0, 100 * ms, 200 * ms, 400 * ms}));
  EXPECT_EQ(r.rejected, 0);
}

// --- gcra in reserve mode: a decision at the time the request fits, exactly a reservation --------------------------

// The reference: a GCRA that reserves (x/time/rate's ReserveN on a token bucket, in TAT form). s = TAT - burst*T
// starts "long ago" (full); n goes at max(s, t - burst*T) + n*T, which becomes the new s.
std::vector<std::int64_t> gcra_reservation_delays(std::int64_t interval, std::int64_t burst,
                                                  const std::vector<arrival>& trace) {
  std::vector<std::int64_t> delays;
  std::int64_t state = std::numeric_limits<std::int64_t>::min() / 2;
  for (const arrival& a : trace) {
    if (a.n > burst) {
      delays.push_back(-1);  // never
      continue;
    }
    const std::int64_t go = std::max(state, a.t_ns - burst * interval) + a.n * interval;
    delays.push_back(std::max<std::int64_t>(0, go - a.t_ns));
    state = go;
  }
  return delays;
}

std::vector<std::int64_t> delays_of(const replay_result& r) {
  std::vector<std::int64_t> out;
  for (const auto& e : r.events) out.push_back(e.admitted ? e.delay_ns : -1);
  return out;
}

TEST(ReplayGcra, ReserveModeDelaysInsteadOfRejecting) {
  const auto r = replay(settings_for(algorithm::gcra, "1/s",
                                     [](replay_config& c) {
                                       c.burst = 2;
                                       c.mode = replay_mode::reserve;
                                     }),
                        trace_of("0\n0\n0\n0.5 3\n1\n1\n1.5\n2\n"));
  // As the token bucket: ready at 0, 0, 1 (the 3 exceeds the burst: never), 2, 3, 4, 5 s.
  EXPECT_EQ(delays_of(r), (std::vector<std::int64_t>{0, 0, 1 * s, -1, 1 * s, 2 * s, 2500 * ms, 3 * s}));
  EXPECT_EQ(r.rejected, 1);
  EXPECT_EQ(r.delayed, 5);
}

TEST(ReplayGcra, ReserveModeMatchesAReservingGcraAndTheTokenBucket) {
  std::mt19937_64 rng(7);
  std::string text;
  std::int64_t t = 0;
  for (int i = 0; i < 4000; ++i) {
    // Bursts and lulls: mostly close together, sometimes a long gap that lets the limiter refill.
    t += static_cast<std::int64_t>(rng() % 8 == 0 ? rng() % (3 * s) : rng() % (40 * ms));
    text += format_seconds(t) + " " + std::to_string(1 + rng() % 6) + "\n";
  }
  const auto trace = trace_of(text);
  for (const std::int64_t burst : {1, 5, 20}) {
    const auto edit = [burst](replay_config& c) {
      c.burst = burst;
      c.mode = replay_mode::reserve;
    };
    // 7/s: T = 142857142.86 ns, rounded up to 142857143 by both limiters.
    const auto g = replay(settings_for(algorithm::gcra, "7/s", edit), trace);
    EXPECT_EQ(delays_of(g), gcra_reservation_delays(142'857'143, burst, trace)) << "burst " << burst;
    const auto tb = replay(settings_for(algorithm::token_bucket, "7/s", edit), trace);
    EXPECT_EQ(delays_of(g), delays_of(tb)) << "burst " << burst;
    EXPECT_GT(g.delayed, 0);
  }
}

TEST(ReplayGcra, ReserveModeEdgeRates) {
  const auto reserve = [](int burst) {
    return [burst](replay_config& c) {
      c.burst = burst;
      c.mode = replay_mode::reserve;
    };
  };
  // inf admits everything at once; zero spends the burst and then never serves.
  EXPECT_EQ(delays_of(replay(settings_for(algorithm::gcra, "inf", reserve(1)), trace_of("0 5\n0\n"))),
            (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(delays_of(replay(settings_for(algorithm::gcra, "0/s", reserve(2)), trace_of("0\n1\n2\n"))),
            (std::vector<std::int64_t>{0, 0, -1}));
  // A wait beyond the end of the clock (one request a century, a burst of 4 already spent) is refused, not wrapped.
  const auto slow = replay(settings_for(algorithm::gcra, "1/876000h", reserve(2)), trace_of("0 2\n0 2\n0 2\n0 2\n"));
  EXPECT_EQ(slow.admitted, 2);
}

TEST(ReplayAllAlgorithms, EveryAlgorithmRunsTheSampleShapeDeterministically) {
  std::mt19937_64 rng(3);
  std::string text;
  std::int64_t t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<std::int64_t>(rng() % (10 * ms));
    text += format_seconds(t) + "\n";
  }
  const auto trace = trace_of(text);
  for (auto a : {algorithm::token_bucket, algorithm::gcra, algorithm::pacer, algorithm::fixed_window,
                 algorithm::sliding_window, algorithm::sliding_log, algorithm::warmup}) {
    const auto settings = settings_for(a, "100/s");
    const auto r1 = replay(settings, trace);
    const auto r2 = replay(settings, trace);
    EXPECT_EQ(r1.admitted, r2.admitted) << to_string(a);
    EXPECT_EQ(r1.delay.max, r2.delay.max) << to_string(a);
    EXPECT_EQ(r1.admitted + r1.rejected, 3000) << to_string(a);
    EXPECT_GT(r1.admitted, 0) << to_string(a);
    // ~200/s offered against 100/s: over ~15 s at most ~1500 + burst admitted at once in allow mode.
    if (settings.mode == replay_mode::allow) {
      EXPECT_LT(r1.admitted, 2500) << to_string(a);
    }
  }
}

}  // namespace
