// `admit recommend`'s promise, checked against the replay engine on generated bursty traces: replaying the
// recommended limit meets the target, and a limit 1% tighter (one less per window, one permit less) does not. The
// check replays the arrivals from memory (replay() over a span, concurrency_replayer), not through the recorded trace
// the search used, and computes the target itself. Several seeds, every algorithm, both directions.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/common/algorithms.hpp"
#include "cli/recommend/recommend.hpp"
#include "cli/recommend/recorded_trace.hpp"
#include "cli/replay/concurrency_replay.hpp"
#include "cli/replay/replay.hpp"

namespace recommend_exactness_test {
namespace {

using namespace admit::cli;

constexpr std::int64_t ms = 1'000'000;

// A small deterministic generator (the same numbers on every standard library).
class lcg {
 public:
  explicit lcg(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ULL + 1) {}
  std::uint64_t next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return state_ >> 33;
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

struct keyed_request {
  std::int64_t t_ns, duration_ns, n;
  std::string key;
};

// About 30 s of traffic: a steady 40 requests/s with bursts of 20 to 100 requests within 50 ms every 1 to 4 s; one
// request in five asks for 2 or 3 tokens; 12 clients, the first three much busier; durations from 1 to 200 ms, a few
// of 1 s.
std::vector<keyed_request> bursty_trace(std::uint64_t seed) {
  lcg rng(seed);
  std::vector<keyed_request> out;
  std::int64_t t = 0, next_burst = 1'000 * ms;
  const std::int64_t end = 30'000 * ms;
  while (t < end) {
    t += 1 + rng.below(50 * ms);
    std::int64_t count = 1;
    if (t >= next_burst) {
      count = 20 + rng.below(81);
      next_burst = t + 1'000 * ms + rng.below(3'000 * ms);
    }
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t at = count == 1 ? t : t + i * (50 * ms / count);
      const std::int64_t n = rng.below(5) == 0 ? 2 + rng.below(2) : 1;
      const std::int64_t duration = rng.below(50) == 0 ? 1'000 * ms : 1 * ms + rng.below(200 * ms);
      const std::int64_t k = rng.below(4) == 0 ? rng.below(3) : rng.below(12);
      out.push_back({at, duration, n, "client-" + std::to_string(k)});
    }
    t = out.back().t_ns;
  }
  // An access log's first record is time zero: so is this trace's, for the replays from memory to see the same times.
  const std::int64_t origin = out.front().t_ns;
  for (auto& r : out) r.t_ns -= origin;
  return out;
}

std::string seconds(std::int64_t ns) {
  return std::to_string(ns / 1'000'000'000) + "." + [&] {
    std::string f = std::to_string(ns % 1'000'000'000);
    return std::string(9 - f.size(), '0') + f;
  }();
}

// The trace as csv (time, client, cost, duration), which the recorder reads with keys and durations.
recorded_trace record(const std::vector<keyed_request>& trace, bool keys, bool durations) {
  std::ostringstream csv;
  csv << "time,client,cost,duration\n";
  for (const auto& r : trace)
    csv << seconds(r.t_ns) << "," << r.key << "," << r.n << "," << seconds(r.duration_ns) << "\n";
  std::istringstream in(csv.str());
  log_request reading;
  reading.format = log_format::csv;
  reading.fields.cost = "cost";
  if (keys) reading.per_key = "client";
  reading.needs_duration = durations;
  return recorded_trace::read(in, reading);
}

// A plain `<seconds> [n]` trace, recorded.
recorded_trace record_plain(const char* text) {
  std::istringstream in(text);
  log_request reading;
  reading.format = log_format::plain;
  return recorded_trace::read(in, reading);
}

struct rate_case {
  const char* name;
  algorithm algo;
  replay_mode mode;
  std::int64_t burst;  // 0: a window algorithm
  const char* window;
  std::int64_t window_ns;
  std::int64_t max_rejected_percent;
  std::int64_t max_delay_p99_ns;  // 0: none
  bool per_key;
};

// The target, computed here: rejected / requests <= P%, and the p99 delay within its bound.
bool meets(const rate_case& c, const replay_result& r) {
  if (r.rejected * 100 > c.max_rejected_percent * r.arrivals) return false;
  return c.max_delay_p99_ns == 0 || r.delay.p99 <= c.max_delay_p99_ns;
}

// A replay from memory, independent of the recorded trace: one limiter, or one per key.
replay_result replay_from_memory(const std::vector<keyed_request>& trace, const replay_settings& s, bool per_key) {
  rate_replay_options options;
  options.per_key = per_key;
  rate_replayer replayer(s, options);
  for (const auto& r : trace) replayer.add(arrival{r.t_ns, r.n, 0}, per_key ? r.key : std::string());
  return replayer.finish();
}

replay_settings settings(const rate_case& c, admit::rate rate, std::int64_t burst, std::int64_t window_limit) {
  replay_config config;
  config.algo = c.algo;
  config.mode = c.mode;
  if (window_limit > 0) {
    config.window = std::chrono::nanoseconds(c.window_ns);
    config.limit = admit::rate::per(static_cast<double>(window_limit), *config.window);
  } else {
    config.limit = admit::rate::per_second(rate.per_second());
    config.burst = burst;
  }
  return resolve(config);
}

class RecommendExactness : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(RecommendExactness, RatesMeetTheTargetAndOnePercentTighterDoesNot) {
  const auto trace = bursty_trace(GetParam());
  const recorded_trace plain = record(trace, false, false);
  const recorded_trace keyed = record(trace, true, false);
  const rate_case cases[] = {
      {"token-bucket burst 10, 1%", algorithm::token_bucket, replay_mode::allow, 10, "", 0, 1, 0, false},
      {"gcra burst 4, 5%", algorithm::gcra, replay_mode::allow, 4, "", 0, 5, 0, false},
      {"token-bucket reserve burst 5, p99 200ms", algorithm::token_bucket, replay_mode::reserve, 5, "", 0, 0, 200 * ms,
       false},
      {"gcra reserve burst 20, p99 50ms", algorithm::gcra, replay_mode::reserve, 20, "", 0, 0, 50 * ms, false},
      {"fixed-window 1s, 2%", algorithm::fixed_window, replay_mode::allow, 0, "1s", 1000 * ms, 2, 0, false},
      {"sliding-window 250ms, 1%", algorithm::sliding_window, replay_mode::allow, 0, "250ms", 250 * ms, 1, 0, false},
      {"token-bucket per key burst 5, 1%", algorithm::token_bucket, replay_mode::allow, 5, "", 0, 1, 0, true},
      {"fixed-window per key 1s, 3%", algorithm::fixed_window, replay_mode::allow, 0, "1s", 1000 * ms, 3, 0, true},
  };
  for (const rate_case& c : cases) {
    SCOPED_TRACE(c.name);
    rate_question q;
    q.algo = c.algo;
    q.mode = c.mode;
    if (c.burst > 0) q.burst = c.burst;
    q.window = c.window;
    q.per_key = c.per_key;
    q.max_rejected = {c.max_rejected_percent * 1'000'000'000};
    if (c.max_delay_p99_ns > 0) q.max_delay_p99_ns = c.max_delay_p99_ns;
    const rate_recommendation r = recommend_rate(c.per_key ? keyed : plain, q);
    ASSERT_TRUE(r.best);
    ASSERT_TRUE(r.tighter);
    EXPECT_LE(r.replays, 40);  // O(log) replays
    const replay_result best = replay_from_memory(
        trace, settings(c, admit::rate::per_second(r.best->rate_per_second), c.burst, r.best->window_limit), c.per_key);
    EXPECT_TRUE(meets(c, best)) << r.best->rate << ": " << best.rejected << " of " << best.arrivals;
    EXPECT_EQ(best.rejected, r.best->rejected);
    EXPECT_EQ(best.delay.p99, r.best->delay_p99_ns);
    // 1% tighter (a window: one request less per window), computed here from the recommendation.
    const replay_result tighter = replay_from_memory(
        trace, settings(c, admit::rate::per_second(r.best->rate_per_second * 0.99), c.burst, r.best->window_limit - 1),
        c.per_key);
    EXPECT_FALSE(meets(c, tighter)) << r.best->rate << " less: " << tighter.rejected << " of " << tighter.arrivals;
    EXPECT_FALSE(r.tighter->meets);
  }
}

TEST_P(RecommendExactness, ConcurrencyMeetsTheTargetAndOnePermitLessDoesNot) {
  const auto trace = bursty_trace(GetParam());
  const recorded_trace recorded = record(trace, false, true);
  struct concurrency_case {
    const char* name;
    std::int64_t wait_p99_ns;  // 0: none
    std::optional<std::int64_t> max_waiters, timeout_ns;
    std::int64_t max_turned_away_percent;
  };
  const concurrency_case cases[] = {
      {"unbounded, p99 wait 20ms", 20 * ms, std::nullopt, std::nullopt, 0},
      {"unbounded, p99 wait 0", 1, std::nullopt, std::nullopt, 0},
      {"10 waiters, 100ms, 1% turned away", 0, 10, 100 * ms, 1},
      {"no queue, 5% turned away, p99 wait 1ms", 1 * ms, 0, std::nullopt, 5},
  };
  for (const concurrency_case& c : cases) {
    SCOPED_TRACE(c.name);
    concurrency_question q;
    if (c.wait_p99_ns > 0) q.max_wait_p99_ns = c.wait_p99_ns;
    q.max_waiters = c.max_waiters;
    q.timeout_ns = c.timeout_ns;
    q.max_turned_away = {c.max_turned_away_percent * 1'000'000'000};
    const concurrency_recommendation r = recommend_concurrency(recorded, q);
    ASSERT_TRUE(r.best);
    ASSERT_TRUE(r.tighter);
    EXPECT_EQ(r.tighter->limit, r.best->limit - 1);
    const auto replayed = [&](std::int64_t limit) {
      concurrency_settings s;
      s.limit = limit;
      s.max_waiters = c.max_waiters;
      if (c.timeout_ns) s.timeout = std::chrono::nanoseconds(*c.timeout_ns);
      std::vector<request> requests;
      for (const auto& k : trace) requests.push_back({k.t_ns, k.duration_ns, k.n, 0});
      return replay_concurrency(s, requests);
    };
    const auto target = [&](const concurrency_result& res) {
      const std::int64_t turned_away = res.requests - res.admitted;
      return turned_away * 100 <= c.max_turned_away_percent * res.requests &&
             (c.wait_p99_ns == 0 || res.wait.p99 <= c.wait_p99_ns);
    };
    EXPECT_TRUE(target(replayed(r.best->limit))) << r.best->limit;
    EXPECT_FALSE(target(replayed(r.best->limit - 1))) << r.best->limit - 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RecommendExactness, ::testing::Values(1, 2, 3, 42));

TEST(RecommendRate, TheFrontierFallsWithTheBurstAndItsKneeIsOnIt) {
  const recorded_trace trace = record(bursty_trace(5), false, false);
  rate_question q;
  q.max_rejected = {1'000'000'000};
  const rate_recommendation r = recommend_rate(trace, q);
  ASSERT_GE(r.frontier.size(), 3U);
  ASSERT_TRUE(r.best);
  bool on_frontier = false;
  for (std::size_t i = 0; i < r.frontier.size(); ++i) {
    EXPECT_TRUE(r.frontier[i].meets);
    if (i > 0) {
      EXPECT_GT(r.frontier[i].burst, r.frontier[i - 1].burst);
    }
    if (r.frontier[i].burst == r.best->burst) {
      on_frontier = true;
      EXPECT_EQ(r.frontier[i].rate, r.best->rate);
    }
  }
  EXPECT_TRUE(on_frontier);
  EXPECT_LT(r.frontier.back().rate_per_second, r.frontier.front().rate_per_second);
}

TEST(RecommendRate, NoRateMeetsWhenRequestsAskForMoreThanTheBurst) {
  const recorded_trace trace = record(bursty_trace(6), false, false);
  rate_question q;
  q.burst = 1;  // a fifth of the requests ask for 2 or 3 tokens: rejected at any rate
  q.max_rejected = {1'000'000'000};
  const rate_recommendation r = recommend_rate(trace, q);
  EXPECT_FALSE(r.best);
  ASSERT_TRUE(r.highest);
  EXPECT_FALSE(r.highest->meets);
  EXPECT_GT(r.highest->rejected_fraction(), 0.1);
}

TEST(RecommendRate, ZeroRateWhenTheBurstHoldsTheWholeTrace) {
  const recorded_trace trace = record_plain("0\n0.5\n1 2\n");
  rate_question q;
  q.burst = 4;
  q.max_rejected = {0};
  const rate_recommendation r = recommend_rate(trace, q);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->rate, "0/s");
  EXPECT_FALSE(r.tighter);
}

// The least token-bucket rate with a burst of 10^6 that rejects nothing of `text`, a plain trace. Below about 0.0002/s
// such a bucket would take more than 2^62 ns to refill: the limiter refuses those rates.
rate_recommendation least_rate_with_a_huge_burst(const char* text) {
  rate_question q;
  q.burst = 1'000'000;
  q.max_rejected = {0};
  return recommend_rate(record_plain(text), q);
}

TEST(RecommendRate, ARateTheLimiterRefusesIsAFailingCandidateNotAnError) {
  // The search must step over refused rates (it once stopped with the limiter's message).
  const rate_recommendation r = least_rate_with_a_huge_burst("0\n1000\n");
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(r.best->meets);
  EXPECT_TRUE(r.best->refused.empty());
  // Below the rates the limiter refuses lies no refill at all, which the burst's 10^6 tokens make meet: the answer is
  // 0/s (it was the least rate above the refused ones, about 0.0002/s, as if nothing below could meet).
  EXPECT_EQ(r.best->rate, "0/s");
  EXPECT_FALSE(r.tighter);
}

TEST(RecommendConcurrency, ALimitWhoseReplayPassesTheClockHasNoAnswerNotAnError) {
  // Twelve requests of 10^9 s at once: with one permit the tenth would end past the replay's clock (2^63 ns, 9.2 * 10^9
  // s); with two, six rounds end at 6 * 10^9 s. One permit is a candidate without an answer (the search stopped with
  // the replay's error, exit 1), and the least limit that turns nobody away is 2.
  constexpr std::int64_t second = 1'000'000'000;
  std::vector<keyed_request> trace;
  for (int i = 0; i < 12; ++i) trace.push_back({0, 1'000'000'000 * second, 1, "k"});
  const recorded_trace recorded = record(trace, false, true);
  concurrency_question q;
  q.max_turned_away = {0};
  const concurrency_recommendation r = recommend_concurrency(recorded, q);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->limit, 2);
  ASSERT_TRUE(r.tighter);
  EXPECT_EQ(r.tighter->limit, 1);
  EXPECT_FALSE(r.tighter->meets);
  EXPECT_EQ(r.tighter->refused.rfind("a request would end about 292 years", 0), 0U) << r.tighter->refused;
  for (const concurrency_point& p : r.curve) EXPECT_TRUE(p.refused.empty()) << p.limit;
  // With a wait target, the answer is as before: 12.
  q.max_wait_p99_ns = second;
  const concurrency_recommendation waits = recommend_concurrency(recorded, q);
  ASSERT_TRUE(waits.best);
  EXPECT_EQ(waits.best->limit, 12);
}

TEST(RecommendRate, ARefusedTighterRateIsShownWhenNoRefillAtAllFails) {
  // The second request needs one token refilled within 4608 s: at least 1/4608 s = 0.000217014/s, just above the
  // least rate the bucket accepts with a burst of 10^6 (10^6 tokens refilled within 2^62 ns: 0.000216840/s). So 1%
  // below the answer is refused, and no refill at all fails: the answer is that rate, the tighter one refused and said
  // why in the user's words.
  const rate_recommendation r = least_rate_with_a_huge_burst("0 1000000\n4608 1\n");
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(r.best->meets);
  EXPECT_NE(r.best->rate, "0/s");
  ASSERT_TRUE(r.tighter);
  EXPECT_FALSE(r.tighter->meets);
  EXPECT_NE(r.tighter->refused.find("refill"), std::string::npos) << r.tighter->refused;
  EXPECT_EQ(r.tighter->refused.find("admit::"), std::string::npos) << r.tighter->refused;
}

TEST(RecommendRate, AFrontierWhoseAnswersAreAllZeroRecommendsItsSmallestBurst) {
  // 10 tokens: bursts 1, 2 and 5 cannot hold the request for 7; 10 holds them all, with no refill at all.
  const recorded_trace trace = record_plain("0 1\n0.5 7\n1 1\n2 1\n");
  rate_question q;
  q.max_rejected = {0};
  const rate_recommendation r = recommend_rate(trace, q);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->burst, 10);
  EXPECT_EQ(r.best->rate, "0/s");
  EXPECT_EQ(r.unmet_bursts, (std::vector<std::int64_t>{1, 2, 5}));
}

TEST(RecommendRate, TheFrontierGoesUpToABurstThatHoldsEveryToken) {
  const recorded_trace trace = record_plain("0 3\n");  // 3 tokens: burst 5 is tried, though it is above 3
  rate_question q;
  q.max_rejected = {0};
  const rate_recommendation r = recommend_rate(trace, q);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->burst, 5);
  EXPECT_EQ(r.best->rate, "0/s");
}

TEST(RecommendRate, AWindowInFractionsOfItsUnitIsWrittenInAWholeOne) {
  const auto generated = bursty_trace(11);
  const recorded_trace trace = record(generated, false, false);
  rate_question q;
  q.algo = algorithm::fixed_window;
  q.window = "1.5s";
  q.max_rejected = {2'000'000'000};
  const rate_recommendation r = recommend_rate(trace, q);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->rate, std::to_string(r.best->window_limit) + "/1500ms");
  EXPECT_TRUE(r.best->refused.empty()) << r.best->refused;
  ASSERT_TRUE(r.tighter);
  EXPECT_FALSE(r.tighter->meets);
}

// The busiest key's tokens, which a per-key frontier's knee compares each burst with (a burst that holds every key's
// trace needs no rate), and the whole trace's without keys.
TEST(RecordedTrace, TheBusiestKeysTokens) {
  const std::vector<keyed_request> trace{{0, 0, 2, "a"}, {1, 0, 5, "b"}, {2, 0, 1, "a"}, {3, 0, 3, "a"}};
  EXPECT_EQ(record(trace, true, false).most_key_tokens(), 6);
  EXPECT_EQ(record(trace, false, false).most_key_tokens(), 11);
  EXPECT_EQ(record(trace, false, false).tokens(), 11);
}

TEST(RecordedTrace, PassesAreIdenticalAndMayRunOnTwoThreads) {
  const auto generated = bursty_trace(9);
  const recorded_trace trace = record(generated, true, true);
  EXPECT_EQ(trace.records(), static_cast<std::int64_t>(generated.size()));
  EXPECT_EQ(trace.keys(), 12);
  replay_config config;
  config.limit = admit::rate::parse("30/s");
  config.burst = 5;
  const replay_settings s = resolve(config);
  replay_result a, b;
  std::thread other([&] { a = trace.replay_rate(s, true); });
  b = trace.replay_rate(s, true);
  other.join();
  EXPECT_EQ(a.rejected, b.rejected);
  EXPECT_EQ(a.arrivals, b.arrivals);
  EXPECT_EQ(a.rejected, replay_from_memory(generated, s, true).rejected);
}

}  // namespace
}  // namespace recommend_exactness_test
