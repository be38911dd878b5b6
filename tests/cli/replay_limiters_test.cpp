// `admit replay` through the real limiters (src/cli/replay/replay.cpp's adapters): exact counts on small hand-written
// traces, reserve mode against a reference reservation, the windows aligned with the trace, and every algorithm run
// deterministically.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "admit/token_bucket.hpp"
#include "cli/replay/report.hpp"

#include "replay_testing.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace replay_limiters_test {

namespace {

using namespace admit::cli;
using namespace admit::cli::replay_testing;

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
}

TEST(ReplayAllAlgorithms, AStartPastTheEndOfTheClockStopsTheReplayNamingItsLine) {
  // One token every 50 years, two at a time: the token bucket and GCRA (a burst of 2) start the requests 0, 100, 200
  // and would start the fourth 300 years on; the pacer (one slot every 50 years) gives the fourth's first token 300
  // years on too — past the 292 years of nanoseconds an int64 holds. The replay stops there, naming that request's
  // line, where the token bucket and the pacer had capped the delay at the clock's end and GCRA had refused it.
  for (const auto& [a, line] :
       {std::pair{algorithm::token_bucket, 4U}, std::pair{algorithm::gcra, 4U}, std::pair{algorithm::pacer, 4U}}) {
    const auto settings = settings_for(a, "1/438000h", [a = a](replay_config& c) {
      if (a == algorithm::pacer) {
        c.slack = 0;  // (no slack: 11 slots of 50 years is more than a pacer's interval can take)
      } else {
        c.burst = 2;
      }
      c.mode = replay_mode::reserve;
    });
    try {
      (void)replay(settings, trace_of("0 2\n0 2\n0 2\n0 2\n"));
      ADD_FAILURE() << "no error for algorithm " << static_cast<int>(a);
    } catch (const clock_range_error& e) {
      EXPECT_EQ(e.line(), line) << static_cast<int>(a);
      EXPECT_NE(std::string(e.what()).find("past the end of the replay's clock"), std::string::npos) << e.what();
    }
  }
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

}  // namespace replay_limiters_test
