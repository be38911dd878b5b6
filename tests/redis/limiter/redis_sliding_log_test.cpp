// admit::redis::sliding_log against a real redis-server, what is the sliding log's own: the same decisions as the
// local admit::sliding_log at the server's time, never more than `limit` in any window-long interval of server times,
// a refusal's wait for the n-th oldest member, a set bounded by the limit that expires when its newest member leaves
// the window, limit and window changes that keep the log, a clock gone back, unique members under 64 concurrent
// callers on a hot key, leasing that takes at most what fits, and the parameter checks. The contract every limiter
// shares (deadline, failure policies, breaker, lost state, batching, leasing, SCRIPT FLUSH, refusals that write
// nothing) is redis_limiter_contract_test.cpp and redis_limiter_contract_calls_test.cpp.
#include "admit/redis/sliding_log.hpp"

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
#include "admit/sliding_log.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::limiter_options;
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

// Replays the trace on admit::sliding_log (one per key) at the server times: every field must match. With `sort`
// (concurrent callers), in the server's order.
void expect_matches_local(std::vector<traced> trace, const admit::redis::sliding_log& limiter, bool sort = false) {
  if (sort) sort_in_server_order(trace);
  admit::redis::testing::expect_matches_local(
      trace, [&] { return std::make_unique<admit::sliding_log>(limiter.limit(), limiter.window()); });
}

// The sliding log's bound over admissions (server time µs, n) of one key: two admissions lie in a common interval
// (t − window, t] iff they are less than a window apart; every such interval holds at most `limit`.
void expect_log_bound(std::vector<std::pair<std::int64_t, std::int64_t>> admitted, std::int64_t limit,
                      std::int64_t window) {
  std::sort(admitted.begin(), admitted.end());
  std::size_t i = 0;
  std::int64_t sum = 0;
  for (std::size_t j = 0; j < admitted.size(); ++j) {
    sum += admitted[j].second;
    while (admitted[j].first - admitted[i].first >= window) sum -= admitted[i++].second;
    ASSERT_LE(sum, limit) << "interval (" << admitted[j].first - window << ", " << admitted[j].first << "]";
  }
}

std::vector<std::pair<std::int64_t, std::int64_t>> admissions(const std::vector<traced>& trace,
                                                              const std::string& key) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& t : trace) {
    if (t.key == key && t.n > 0 && t.result.decision.admitted) out.emplace_back(t.result.server_time.count(), t.n);
  }
  return out;
}

TEST(RedisSlidingLog, DecisionsMatchTheLocalLimiterAtTheServerTime) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::sliding_log limiter(conn, "trace", 6, 4'100'500ns, patient());
  ASSERT_EQ(limiter.window(), 4101us);  // rounded up
  std::mt19937 rng(9);
  const std::vector<std::string> keys{"a", "b", "c"};
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
  }
  int admitted = 0, refused = 0, oversize = 0;
  for (const auto& t : trace) {
    const auto& d = t.result.decision;
    admitted += t.n > 0 && d.admitted;
    refused += !d.admitted && !d.exceeds_capacity();
    oversize += d.exceeds_capacity();
  }
  EXPECT_GT(admitted, 0);
  EXPECT_GT(refused, 0);
  EXPECT_GT(oversize, 0);
  expect_matches_local(trace, limiter);
  for (const auto& key : keys) {
    expect_log_bound(admissions(trace, key), 6, 4101);
    // Bounded by the limit.
    EXPECT_LE(std::stoll(server.admin({"ZCARD", limiter.storage_key(key)})), 6);
  }
}

TEST(RedisSlidingLog, NeverMoreThanTheLimitInAnyWindow) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // Callers hammer one key through several 5 ms windows (8 requests in flight, of 1 or 2): whatever the timing, no
  // window-long interval of server times holds more than the limit, and every decision is the local limiter's.
  constexpr std::int64_t limit = 20;
  admit::redis::sliding_log limiter(conn, "edge", limit, 5ms, patient());
  std::vector<traced> trace;
  // At least 40 ms (8 windows), and on a slow machine until the limit was reached and more than a window's worth
  // admitted (bounded: 10 s).
  const auto start = clock_type::now();
  std::int64_t units = 0, refusals = 0;
  while (clock_type::now() < start + 10s && (clock_type::now() < start + 40ms || units <= limit || refusals == 0)) {
    std::vector<std::pair<std::int64_t, std::future<limiter_result>>> batch;
    for (std::int64_t i = 0; i < 8; ++i) {
      batch.emplace_back(1 + i % 2, limiter.async_decide_detailed("k", 1 + i % 2, asio::use_future));
    }
    for (auto& [n, f] : batch) trace.push_back({"k", n, f.get()});
    units = refusals = 0;
    for (const auto& t : trace) (t.result.decision.admitted ? units : refusals) += t.n;
  }
  const auto adm = admissions(trace, "k");
  ASSERT_GT(units, limit);  // more than one window's worth went through
  expect_log_bound(adm, limit, 5000);
  expect_matches_local(trace, limiter, true);
}

TEST(RedisSlidingLog, ARefusalWaitsUntilTheNthOldestMemberLeavesTheWindow) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::sliding_log limiter(conn, "ro", 3, std::chrono::hours(1), patient());
  const auto first = limiter.decide("k", 2);
  ASSERT_TRUE(first.decision.admitted);
  const auto second = limiter.decide("k", 1);
  ASSERT_TRUE(second.decision.admitted);
  const std::string members = server.admin({"ZRANGE", limiter.storage_key("k"), "0", "-1", "WITHSCORES"});
  for (int i = 0; i < 12; ++i) {
    const std::int64_t n = 1 + i % 3;
    const auto r = limiter.decide("k", n);
    ASSERT_TRUE(r.consulted);
    EXPECT_FALSE(r.decision.admitted);
    // Until the n-th oldest member has left the window: for n <= 2 one of the first admission's, for n == 3 the
    // second admission's, an hour after they were recorded.
    const auto& blocking = n == 3 ? second : first;
    EXPECT_EQ(r.decision.retry_after,
              std::chrono::microseconds(blocking.server_time.count() + 3'600'000'000LL - r.server_time.count()));
  }
  // The log is as the admissions left it (refusals writing nothing: redis_limiter_contract_calls_test.cpp).
  EXPECT_EQ(server.admin({"ZRANGE", limiter.storage_key("k"), "0", "-1", "WITHSCORES"}), members);
}

TEST(RedisSlidingLog, TheLogIsTrimmedAndExpiresWhenItsNewestMemberLeavesTheWindow) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  constexpr std::int64_t w = 7'777'777;  // µs: not whole milliseconds, so the expiry is rounded up
  admit::redis::sliding_log limiter(conn, "exp", 4, std::chrono::microseconds(w), patient());
  const std::string key = limiter.storage_key("k");
  const auto r = limiter.decide("k", 3);
  ASSERT_TRUE(r.decision.admitted);
  const std::string t = std::to_string(r.server_time.count());
  EXPECT_EQ(server.admin({"ZRANGE", key, "0", "-1", "WITHSCORES"}),
            t + ":000000001\n" + t + "\n" + t + ":000000002\n" + t + "\n" + t + ":000000003\n" + t);
  EXPECT_EQ(r.decision.reset_after, std::chrono::microseconds(w));
  EXPECT_EQ(r.decision.remaining, 1);
  EXPECT_EQ(std::stoll(server.admin({"PEXPIRETIME", key})), (r.server_time.count() + w + 999) / 1000);

  // Trimmed on every admission: with a 1 ms window, members that have left the window are removed by the next
  // admission, and the set never holds more than the limit.
  admit::redis::sliding_log brief(conn, "brief", 4, 1ms, patient());
  const std::string bkey = brief.storage_key("k");
  limiter_result last;
  for (int i = 0; i < 200; ++i) {
    const auto b = brief.decide("k", 1 + i % 2);
    ASSERT_TRUE(b.consulted);
    if (b.decision.admitted) last = b;
    EXPECT_LE(std::stoll(server.admin({"ZCARD", bkey})), 4);
  }
  ASSERT_TRUE(last.consulted);
  // Nothing is left after the horizon: gone within 1 ms of the last admission, with the epoch (observed, not waited
  // out on purpose).
  ASSERT_TRUE(eventually([&] { return server.admin({"KEYS", "*brief*"}).empty(); }));
}

TEST(RedisSlidingLog, LimitAndWindowChangesKeepTheLog) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::sliding_log one(conn, "chg", 4, std::chrono::hours(1), patient());
  const auto a = one.decide("k", 3);
  ASSERT_TRUE(a.decision.admitted);
  // A lower limit: the same 3 members, over the new limit of 2.
  admit::redis::sliding_log lower(conn, "chg", 2, std::chrono::hours(1), patient());
  const auto l = lower.decide("k", 1);
  EXPECT_FALSE(l.decision.admitted);
  EXPECT_EQ(l.decision.remaining, 0);
  // The oldest of the last 2 must leave: recorded at a's time.
  EXPECT_EQ(l.decision.retry_after,
            std::chrono::microseconds(a.server_time.count() + 3'600'000'000LL - l.server_time.count()));
  // A longer window and a higher limit: the members keep their times.
  admit::redis::sliding_log wider(conn, "chg", 5, std::chrono::hours(2), patient());
  const auto b = wider.decide("k", 2);
  ASSERT_TRUE(b.decision.admitted);
  EXPECT_EQ(b.decision.remaining, 0);
  EXPECT_EQ(server.admin({"ZCARD", wider.storage_key("k")}), "5");
  // A window so short that the members have left it: everything fits again; the log then holds only the 5 new
  // members, which leave the window 1 µs later (the key itself then expires within a millisecond: not inspected).
  admit::redis::sliding_log tiny(conn, "chg", 5, 1us, patient());
  const auto c = tiny.decide("k", 5);
  ASSERT_TRUE(c.decision.admitted);
  EXPECT_EQ(c.decision.remaining, 0);
  EXPECT_EQ(c.decision.reset_after, 1us);
}

TEST(RedisSlidingLog, AClockGoneBackRecordsAtTheNewestTimeWithUniqueNames) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::sliding_log limiter(conn, "back", 5, std::chrono::hours(2), patient());
  const std::string key = limiter.storage_key("k");
  // A log written while the server's clock was an hour ahead (e.g. before a failover to a server whose clock is
  // behind): one member, recorded in our future.
  const std::string time = server.admin({"TIME"});
  const auto newline = time.find('\n');
  const std::int64_t server_now =
      std::stoll(time.substr(0, newline)) * 1'000'000 + std::stoll(time.substr(newline + 1));
  const std::string future = std::to_string(server_now + 3'600'000'000LL);
  server.admin({"ZADD", key, future, future + ":000000001"});
  const auto r = limiter.decide("k", 2);
  ASSERT_TRUE(r.decision.admitted);
  // Recorded at the newest time, numbered after its member: three distinct members, the log still in time order.
  EXPECT_EQ(server.admin({"ZRANGE", key, "0", "-1"}),
            future + ":000000001\n" + future + ":000000002\n" + future + ":000000003");
  // The local log fed the same history decides the same.
  admit::sliding_log local(5, limiter.window());
  (void)local.decide_at(clock_type::time_point{std::chrono::microseconds(server_now + 3'600'000'000LL)}, 1);
  EXPECT_EQ(r.decision, local.decide_at(at(r), 2));
  EXPECT_EQ(r.decision.remaining, 2);
}

TEST(RedisSlidingLog, HotKeyWith64ConcurrentCallersAdmitsExactlyTheLimitWithUniqueMembers) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  constexpr std::int64_t limit = 300;
  admit::redis::sliding_log limiter(conn, "hot", limit, std::chrono::hours(1), patient());
  constexpr int callers = 64, per_caller = 12;
  const std::vector<traced> results = decide_concurrently(limiter, "k", 3, callers, per_caller);
  ASSERT_EQ(results.size(), static_cast<std::size_t>(callers * per_caller));
  std::int64_t admitted = 0;
  for (const auto& r : results) admitted += r.result.decision.admitted;
  EXPECT_EQ(admitted * 3, limit);
  // Every admitted unit is its own member: none was merged with another caller's (same microsecond, same name).
  EXPECT_EQ(server.admin({"ZCARD", limiter.storage_key("k")}), std::to_string(limit));
  expect_matches_local(results, limiter, true);
}

TEST(RedisSlidingLog, LeasingTakesAtMostWhatFits) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.lease = 4;
  o.lease_ttl = 10s;
  admit::redis::sliding_log limiter(conn, "lease", 6, std::chrono::hours(1), o);
  const auto first = limiter.decide("k", 1);
  ASSERT_TRUE(first.consulted);
  EXPECT_EQ(first.granted, 4);
  EXPECT_EQ(first.decision.remaining, 2);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.decide("k", 1).source, admit::redis::decided_by::lease);
  const auto second = limiter.decide("k", 1);
  ASSERT_TRUE(second.consulted);
  EXPECT_EQ(second.granted, 2);
  EXPECT_EQ(server.admin({"ZCARD", limiter.storage_key("k")}), "6");
}

TEST(RedisSlidingLog, InvalidConfigurationThrows) {
  io_thread io;
  connection conn(io.executor(), "redis://127.0.0.1:1/0");
  EXPECT_THROW(admit::redis::sliding_log(conn, "", 1, 1s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_log(conn, "}", 1, 1s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_log(conn, "b", 0, 1s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_log(conn, "b", admit::redis::sliding_log::max_limit + 1, 1s),
               std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_log(conn, "b", 1, 0s), std::invalid_argument);
  EXPECT_THROW(admit::redis::sliding_log(conn, "b", 1, std::chrono::hours(24 * 365 * 100)), std::invalid_argument);
  try {
    admit::redis::sliding_log(conn, "b", -7, 1s);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("-7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sliding_log"), std::string::npos) << e.what();
  }
  EXPECT_EQ(admit::redis::sliding_log(conn, "r", 1, 1ns).window(), 1us);
  EXPECT_EQ(admit::redis::sliding_log(conn, "r", 1, 2001ns).window(), 3us);
}

}  // namespace
