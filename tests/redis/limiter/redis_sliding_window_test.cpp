// admit::redis::sliding_window against a real redis-server, what is the sliding window's own: the same decisions as
// the local admit::sliding_window at the server's time (in the server's order under 64 concurrent callers too), the
// documented bound over every window-long interval of server times, a clock gone back, keys that expire once both
// counts have left the estimate, limit and window changes that keep the counts, and the parameter checks. The
// contract every limiter shares (deadline, failure policies, breaker, lost state, batching, leasing, SCRIPT FLUSH,
// refusals that write nothing) is redis_limiter_contract_test.cpp and redis_limiter_contract_calls_test.cpp.
#include "admit/redis/sliding_window.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/sliding_window.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::limiter_result;
using admit::redis::testing::at;
using admit::redis::testing::decide_concurrently;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using admit::redis::testing::server_now;
using admit::redis::testing::sort_in_server_order;
using admit::redis::testing::traced;
using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;

// The local decision as the server reports it: durations in whole microseconds, retry_after rounded up (the local
// limiter answers to the nanosecond).
admit::decision in_server_units(admit::decision d) {
  if (d.retry_after != std::chrono::nanoseconds::max())
    d.retry_after = std::chrono::ceil<std::chrono::microseconds>(d.retry_after);
  return d;
}

// Replays the trace on admit::sliding_window (one per key) at the server times: every field must match. With `sort`
// (concurrent callers), in the server's order.
void expect_matches_local(std::vector<traced> trace, const admit::redis::sliding_window& limiter, bool sort = false) {
  if (sort) sort_in_server_order(trace);
  admit::redis::testing::expect_matches_local(
      trace, [&] { return std::make_unique<admit::sliding_window>(limiter.limit(), limiter.window()); },
      in_server_units);
}

// The bound of the sliding window counter over the admissions of one key, at server times (µs): any interval
// (t − d, t] with d <= window admits fewer than limit + limit·d/window + 1 (so at most 2·limit − 1 in a window, never
// 2·limit), and within each aligned window no more than the limit.
void expect_sliding_bound(std::vector<std::pair<std::int64_t, std::int64_t>> admitted, std::int64_t limit,
                          std::int64_t window) {
  std::sort(admitted.begin(), admitted.end());
  for (std::size_t j = 0; j < admitted.size(); ++j) {
    std::int64_t sum = 0;
    for (std::size_t i = j + 1; i-- > 0;) {
      const std::int64_t d = admitted[j].first - admitted[i].first + 1;  // (t − d, t] holds both
      if (d > window) break;
      sum += admitted[i].second;
      // limit + floor(limit·d/window) is the largest count the estimate allows in (t − d, t].
      ASSERT_LE(sum, limit + limit * d / window) << "interval of " << d << "us ending at " << admitted[j].first;
      ASSERT_LT(sum, 2 * limit);
    }
  }
  std::map<std::int64_t, std::int64_t> per_window;
  for (const auto& [t, n] : admitted) per_window[t / window] += n;
  for (const auto& [w, c] : per_window) EXPECT_LE(c, limit) << "window " << w;
}

TEST(RedisSlidingWindow, DecisionsMatchTheLocalLimiterAtTheServerTime) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // 7.3 ms windows (not a divisor of a second); requests arrive fast enough for refusals and slow enough to cross
  // many window boundaries.
  admit::redis::sliding_window limiter(conn, "trace", 6, 7'300'001ns, patient());
  ASSERT_EQ(limiter.window(), 7301us);  // rounded up
  std::mt19937 rng(5);
  const std::vector<std::string> keys{"a", "b"};
  const std::vector<std::int64_t> sizes{1, 1, 1, 2, 3, 0, 6, 7};
  std::vector<traced> trace;
  for (int i = 0; i < 800; ++i) {
    const std::string& key = keys[rng() % keys.size()];
    const std::int64_t n = sizes[rng() % sizes.size()];
    if (i % 2 == 0) {
      trace.push_back({key, n, limiter.async_decide_detailed(key, n, asio::use_future).get()});
    } else {
      trace.push_back({key, n, limiter.decide(key, n)});
    }
    if (i % 200 == 199) std::this_thread::sleep_for(20ms);  // let the estimate decay fully (variety, not timing)
  }
  int admitted = 0, refused = 0, oversize = 0;
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> per_key;
  for (const auto& t : trace) {
    const auto& d = t.result.decision;
    admitted += t.n > 0 && d.admitted;
    refused += !d.admitted && !d.exceeds_capacity();
    oversize += d.exceeds_capacity();
    if (t.n > 0 && d.admitted) per_key[t.key].emplace_back(t.result.server_time.count(), t.n);
  }
  EXPECT_GT(admitted, 0);
  EXPECT_GT(refused, 0);
  EXPECT_GT(oversize, 0);
  expect_matches_local(trace, limiter);
  for (const auto& [key, adm] : per_key) expect_sliding_bound(adm, 6, 7301);
}

TEST(RedisSlidingWindow, NeverTwiceTheLimitAcrossBoundaries) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // Callers hammer one key through several 5 ms windows (8 requests in flight): whatever the timing, no window-long
  // interval of server times holds 2·limit admissions, and every decision is the local limiter's.
  constexpr std::int64_t limit = 20;
  admit::redis::sliding_window limiter(conn, "edge", limit, 5ms, patient());
  std::vector<traced> trace;
  // At least 40 ms (8 windows), and on a slow machine until the limit was reached and more than a window's worth
  // admitted (bounded: 10 s).
  const auto start = clock_type::now();
  std::int64_t units = 0, refusals = 0;
  while (clock_type::now() < start + 10s && (clock_type::now() < start + 40ms || units <= limit || refusals == 0)) {
    std::vector<std::future<limiter_result>> batch;
    for (int i = 0; i < 8; ++i) batch.push_back(limiter.async_decide_detailed("k", 1, asio::use_future));
    for (auto& f : batch) trace.push_back({"k", 1, f.get()});
    units = refusals = 0;
    for (const auto& t : trace) (t.result.decision.admitted ? units : refusals) += t.n;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> admitted;
  for (const auto& t : trace) {
    if (t.result.decision.admitted) admitted.emplace_back(t.result.server_time.count(), 1);
  }
  ASSERT_GT(admitted.size(), static_cast<std::size_t>(limit));  // more than one window's worth went through
  expect_sliding_bound(admitted, limit, 5000);
  expect_matches_local(trace, limiter, true);
}

TEST(RedisSlidingWindow, AClockGoneBackCountsAgainstTheNewestWindow) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  constexpr std::int64_t w = 3'600'000'000;  // one hour
  admit::redis::sliding_window limiter(conn, "back", 4, std::chrono::microseconds(w), patient());
  // A state written while the server's clock was in the next window (e.g. before a failover to a server whose clock
  // is behind): 3 requests counted there.
  const std::int64_t next = (server_now(server) / w + 1) * w;
  server.admin({"SET", limiter.storage_key("k"), std::to_string(next) + ":" + std::to_string(w) + ":0:3"});
  const auto r = limiter.decide("k", 1);
  ASSERT_TRUE(r.consulted);
  EXPECT_TRUE(r.decision.admitted);
  EXPECT_EQ(r.decision.remaining, 0);
  // Judged at the start of that newer window (never reopening the current, emptier one), as the local limiter fed the
  // same history decides.
  admit::sliding_window local(4, limiter.window());
  (void)local.decide_at(clock_type::time_point{std::chrono::microseconds(next)}, 3);
  EXPECT_EQ(r.decision, in_server_units(local.decide_at(at(r), 1)));
  EXPECT_EQ(r.decision.reset_after, std::chrono::microseconds(next + 2 * w - r.server_time.count()));
  const auto refused = limiter.decide("k", 1);
  EXPECT_FALSE(refused.decision.admitted);
  // As the previous window's weight decays: a quarter into the window after the newer one (limit 4, 4 counted).
  EXPECT_EQ(refused.decision.retry_after, std::chrono::microseconds(next + w + w / 4 - refused.server_time.count()));
  EXPECT_EQ(refused.decision, in_server_units(local.decide_at(at(refused), 1)));
}

TEST(RedisSlidingWindow, KeyExpiresWhenBothCountsHaveLeftTheEstimate) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  constexpr std::int64_t w = 7'777'777;  // µs: not whole milliseconds, so the expiry is rounded up
  admit::redis::sliding_window limiter(conn, "exp", 4, std::chrono::microseconds(w), patient());
  const std::string key = limiter.storage_key("k");
  const auto r = limiter.decide("k", 3);
  ASSERT_TRUE(r.decision.admitted);
  const std::int64_t now = r.server_time.count();
  const std::int64_t start = now / w * w;  // windows aligned on the Unix epoch
  EXPECT_EQ(server.admin({"GET", key}), std::to_string(start) + ":" + std::to_string(w) + ":0:3");
  EXPECT_EQ(r.decision.reset_after, std::chrono::microseconds(start + 2 * w - now));
  // Expires at the end of the next window (start + 2 windows), rounded up to the millisecond.
  EXPECT_EQ(std::stoll(server.admin({"PEXPIRETIME", key})), (start + 2 * w + 999) / 1000);
  // Nothing is left after the horizon: a 1 ms window's key is gone within 2 ms (observed, not waited out on purpose).
  admit::redis::sliding_window brief(conn, "brief", 4, 1ms, patient());
  ASSERT_TRUE(brief.decide("k", 1).decision.admitted);
  // The epoch key expires with the last state written under it.
  ASSERT_TRUE(eventually([&] { return server.admin({"KEYS", "*brief*"}).empty(); }));
}

TEST(RedisSlidingWindow, LimitAndWindowChangesKeepTheCounts) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  constexpr std::int64_t hour = 3'600'000'000;
  admit::redis::sliding_window one(conn, "chg", 4, std::chrono::hours(1), patient());
  const auto a = one.decide("k", 3);
  ASSERT_TRUE(a.decision.admitted);
  // Two-hour windows: the one-hour window that holds the 3 requests ended after the current two-hour window began,
  // so they count as the current window's (a reset would leave 3 remaining after this admission).
  admit::redis::sliding_window two(conn, "chg", 4, std::chrono::hours(2), patient());
  const auto b = two.decide("k", 1);
  ASSERT_TRUE(b.decision.admitted);
  EXPECT_EQ(b.decision.remaining, 0);
  const std::int64_t start2 = b.server_time.count() / (2 * hour) * (2 * hour);
  EXPECT_EQ(server.admin({"GET", two.storage_key("k")}),
            std::to_string(start2) + ":" + std::to_string(2 * hour) + ":0:4");
  EXPECT_FALSE(two.decide("k", 1).decision.admitted);
  // A higher limit with the same window: the same counts, more room.
  admit::redis::sliding_window wider(conn, "chg", 8, std::chrono::hours(2), patient());
  EXPECT_EQ(wider.decide("k", 0).decision.remaining, 4);
  // Back to one-hour windows: the two-hour window is current, its 4 requests count in the current hour.
  admit::redis::sliding_window back(conn, "chg", 8, std::chrono::hours(1), patient());
  const auto d = back.decide("k", 0);
  EXPECT_EQ(d.decision.remaining, 4);
  EXPECT_EQ(d.decision.reset_after,
            std::chrono::microseconds(d.server_time.count() / hour * hour + 2 * hour - d.server_time.count()));
}

TEST(RedisSlidingWindow, HotKeyWith64ConcurrentCallersAdmitsExactlyTheLimit) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  constexpr std::int64_t limit = 100;
  admit::redis::sliding_window limiter(conn, "hot", limit, std::chrono::hours(1), patient());
  constexpr int callers = 64, per_caller = 12;
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, callers, per_caller);
  ASSERT_EQ(results.size(), static_cast<std::size_t>(callers * per_caller));
  // Exact: the local limiter, replayed in the server's order, admits the same requests (the limit, unless the run
  // straddled an hour boundary, where the previous hour's weight allows a few more as it decays).
  expect_matches_local(results, limiter, true);
  std::int64_t admitted = 0;
  for (const auto& r : results) admitted += r.result.decision.admitted;
  const bool straddled = results.front().result.server_time / std::chrono::hours(1) !=
                         results.back().result.server_time / std::chrono::hours(1);
  if (!straddled) {
    EXPECT_EQ(admitted, limit);
  }
}

TEST(RedisSlidingWindow, InvalidConfigurationThrows) {
  io_thread io;
  connection conn(io.executor(), "redis://127.0.0.1:1/0");
  EXPECT_THROW(admit::redis::sliding_window(conn, "", 1, 1s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_window(conn, "a}", 1, 1s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_window(conn, "b", 0, 1s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_window(conn, "b", admit::redis::sliding_window::max_limit + 1, 1s),
               std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_window(conn, "b", 1, 0s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_window(conn, "b", 1, -1s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_window(conn, "b", 1'000, std::chrono::hours(24 * 27)), std::invalid_argument);
  try {
    admit::redis::sliding_window(conn, "b", -3, 1s);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("-3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sliding_window"), std::string::npos) << e.what();
  }
  EXPECT_EQ(admit::redis::sliding_window(conn, "r", 1, 1ns).window(), 1us);
  EXPECT_EQ(admit::redis::sliding_window(conn, "r", 1, 1500ns).window(), 2us);
  EXPECT_EQ(admit::redis::sliding_window(conn, "r", 1'000, std::chrono::hours(24 * 26)).window(),
            std::chrono::hours(24 * 26));
}

}  // namespace
