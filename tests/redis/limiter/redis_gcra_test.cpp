// admit::redis::gcra against a real redis-server, what is GCRA's own: the same decisions as the local admit::gcra at
// the server's time (blocking and asynchronous), the writes of an admission, keys that expire when full, limits that
// change without losing state, the TAT a hot key stores, a state that is not a TAT, rate inf without a server, and the
// parameter checks. The contract every limiter shares (deadline, failure policies, breaker, lost state, batching,
// leasing, SCRIPT FLUSH, refusals that write nothing) is redis_limiter_contract_test.cpp and
// redis_limiter_contract_calls_test.cpp, run for GCRA too.
#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
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
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/gcra.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::testing::decide_async;
using admit::redis::testing::decide_concurrently;
using admit::redis::testing::dirty;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using admit::redis::testing::traced;
namespace asio = boost::asio;

std::int64_t us(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }

// Replays the trace on admit's local GCRA (one limiter per key) at exactly the server times the script used, with
// the interval the distributed limiter enforces (whole microseconds): every field must match.
void expect_matches_local(const std::vector<traced>& trace, const admit::redis::gcra& limiter) {
  admit::redis::testing::expect_matches_local(trace, [&] {
    return std::make_unique<admit::gcra>(admit::rate::every(limiter.emission_interval()), limiter.burst());
  });
}

TEST(RedisGcra, DecisionsMatchTheLocalGcraAtTheServerTime) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // 700/s: T = 1,428,572 ns, enforced as 1,429 µs; requests arrive faster than that, so the trace mixes admissions,
  // refusals, n == 0 and n > burst.
  admit::redis::gcra limiter(conn, "trace", admit::rate::per_second(700), 5, patient());
  ASSERT_EQ(limiter.emission_interval(), 1429us);
  std::mt19937 rng(7);
  const std::vector<std::string> keys{"a", "b", "c"};
  const std::vector<std::int64_t> sizes{1, 1, 1, 2, 3, 0, 5, 6};
  std::vector<traced> trace;
  for (int i = 0; i < 600; ++i) {
    const std::string& key = keys[rng() % keys.size()];
    const std::int64_t n = sizes[rng() % sizes.size()];
    trace.push_back({key, n, limiter.decide(key, n)});
    if (i % 150 == 149) std::this_thread::sleep_for(10ms);  // let the keys refill partly (variety, not timing)
  }
  int admitted = 0, refused = 0, oversize = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const auto& d = trace[i].result.decision;
    if (trace[i].n > 0 && d.admitted) ++admitted;
    if (!d.admitted && !d.exceeds_capacity()) ++refused;
    if (d.exceeds_capacity()) ++oversize;
    if (i > 0) {
      EXPECT_LE(trace[i - 1].result.server_time, trace[i].result.server_time);
    }
  }
  EXPECT_GT(admitted, 0);
  EXPECT_GT(refused, 0);
  EXPECT_GT(oversize, 0);
  expect_matches_local(trace, limiter);
}

TEST(RedisGcra, AsyncDecisionsMatchTheLocalGcraToo) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "async", admit::rate::every(3ms), 3, patient());
  std::vector<traced> trace;
  for (int i = 0; i < 40; ++i) {
    const std::int64_t n = i % 4;
    auto r = limiter.async_decide_detailed("k", n, asio::use_future).get();
    trace.push_back({"k", n, std::move(r)});
  }
  expect_matches_local(trace, limiter);
  // The (error_code, decision) form.
  auto [ec, d] = decide_async(limiter, "k2", 1).get();
  EXPECT_FALSE(ec);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_after, 3ms);
  // In a coroutine, with as_tuple so that an error does not become an exception and drop the policy's decision.
  auto run = [&]() -> asio::awaitable<std::tuple<boost::system::error_code, admit::decision>> {
    co_return co_await limiter.async_decide("k3", 3, asio::as_tuple(asio::use_awaitable));
  };
  auto [ec3, d3] = asio::co_spawn(io.context(), run(), asio::use_future).get();
  EXPECT_FALSE(ec3);
  EXPECT_TRUE(d3.admitted);
  EXPECT_EQ(d3.remaining, 0);
}

TEST(RedisGcra, AnAdmissionIsOneWriteAndFourWithLostStateDetection) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "one", admit::rate::per(1, std::chrono::hours(1)), 2, patient());
  (void)limiter.decide("warm-up", 0);  // loads the function library (a write of its own)
  const long long before = dirty(server);
  ASSERT_TRUE(limiter.decide("k", 1).decision.admitted);
  EXPECT_EQ(dirty(server), before + 1);  // one SET (with its expiry)
  ASSERT_TRUE(limiter.decide("k", 1).decision.admitted);
  EXPECT_EQ(dirty(server), before + 2);
  EXPECT_EQ(server.admin({"EXISTS", limiter.epoch_key()}), "0");
  // With the epoch: the SET and the epoch's creation (HSET of 2 fields, PEXPIREAT).
  limiter_options o = patient();
  o.detect_lost_state = true;
  admit::redis::gcra detecting(conn, "four", admit::rate::per(1, std::chrono::hours(1)), 2, o);
  const long long with_epoch = dirty(server);
  ASSERT_TRUE(detecting.decide("k", 2).decision.admitted);
  EXPECT_EQ(dirty(server), with_epoch + 4);
}

TEST(RedisGcra, KeyExpiresWhenTheLimiterIsFullAgain) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "exp", admit::rate::every(100ms), 3, patient());
  const std::string key = limiter.storage_key("k");
  limiter_result last;
  for (int i = 0; i < 2; ++i) {
    last = limiter.decide("k", 1);
    ASSERT_TRUE(last.decision.admitted);
  }
  // The TTL is reset_after: the key expires at the decision's server time + reset_after, rounded up to the ms.
  const std::int64_t tat_us = last.server_time.count() + us(last.decision.reset_after);
  EXPECT_EQ(server.admin({"GET", key}), std::to_string(tat_us));
  EXPECT_EQ(std::stoll(server.admin({"PEXPIRETIME", key})), (tat_us + 999) / 1000);
  const long long pttl = std::stoll(server.admin({"PTTL", key}));
  EXPECT_GT(pttl, 0);
  // PTTL counts from the server's current millisecond (truncated): reset_after rounded up, plus at most one.
  EXPECT_LE(pttl, (us(last.decision.reset_after) + 999) / 1000 + 1);
  // Observe (not wait out) the expiry: gone no earlier than TAT by the server's own clock.
  ASSERT_TRUE(eventually([&] { return server.admin({"EXISTS", key}) == "0"; }));
  const std::string time = server.admin({"TIME"});
  const auto newline = time.find('\n');
  const std::int64_t server_now_us =
      std::stoll(time.substr(0, newline)) * 1'000'000 + std::stoll(time.substr(newline + 1));
  EXPECT_GE(server_now_us, tat_us - 1000);  // Redis expires at millisecond precision
  // And a full limiter again.
  const auto again = limiter.decide("k", 1);
  EXPECT_EQ(again.decision.remaining, 2);
  EXPECT_EQ(again.decision.reset_after, 100ms);
}

TEST(RedisGcra, NewLimitsContinueFromTheStoredState) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra before(conn, "chg", admit::rate::every(1s), 4, patient());
  ASSERT_TRUE(before.decide("k", 4).decision.admitted);
  const auto stored = [&] { return std::stoll(server.admin({"GET", before.storage_key("k")})); };
  const std::int64_t tat = stored();

  // A larger burst at a slower rate: the time already charged stays charged (a reset would give remaining 7).
  admit::redis::gcra wider(conn, "chg", admit::rate::every(2s), 8, patient());
  const auto w = wider.decide("k", 1);
  ASSERT_TRUE(w.consulted);
  const std::int64_t now = w.server_time.count();
  ASSERT_LT(now, tat);  // the test ran faster than 4 s (the TAT is 4 s ahead)
  ASSERT_TRUE(w.decision.admitted);
  EXPECT_EQ(us(w.decision.reset_after), tat + 2'000'000 - now);
  EXPECT_EQ(w.decision.remaining, (now + 16'000'000 - (tat + 2'000'000)) / 2'000'000);
  EXPECT_EQ(stored(), tat + 2'000'000);

  // A smaller burst: the same state now refuses, and says until when.
  admit::redis::gcra narrow(conn, "chg", admit::rate::every(1s), 2, patient());
  const auto nr = narrow.decide("k", 1);
  ASSERT_TRUE(nr.consulted);
  if (nr.server_time.count() < tat + 2'000'000 - 1'000'000) {
    EXPECT_FALSE(nr.decision.admitted);
    EXPECT_EQ(us(nr.decision.retry_after), tat + 1'000'000 - nr.server_time.count());  // ready = TAT - tau + T
    EXPECT_EQ(nr.decision.remaining, 0);
  }
  EXPECT_EQ(stored(), tat + 2'000'000);
}

TEST(RedisGcra, AHotKeysTatIsItsFirstAdmissionPlusTheBurst) {
  redis_server server;
  io_thread io(2);
  connection conn(io.executor(), server.url());
  // One token an hour: nothing refills during the test, so exactly `burst` admissions are correct (every algorithm's
  // hot key: redis_limiter_contract_calls_test.cpp); here, what GCRA stores for them.
  constexpr std::int64_t burst = 100;
  admit::redis::gcra limiter(conn, "hot", admit::rate::per(1, std::chrono::hours(1)), burst, patient());
  const std::vector<traced> results = decide_concurrently(limiter, "k", 1, 64, 12);
  std::int64_t first_time = 0;
  for (const traced& t : results) {
    ASSERT_TRUE(t.result.consulted) << t.result.error.message() << " " << t.result.message;
    if (t.result.decision.admitted && t.result.decision.remaining == burst - 1)
      first_time = t.result.server_time.count();
  }
  ASSERT_NE(first_time, 0);
  // The stored TAT is the first admission's time plus exactly `burst` intervals.
  EXPECT_EQ(std::stoll(server.admin({"GET", limiter.storage_key("k")})), first_time + burst * 3'600'000'000LL);
}

TEST(RedisGcra, AStateThatIsNotATatIsAnErrorReply) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::gcra limiter(conn, "err", admit::rate::per_second(10), 5, patient());
  server.admin({"SET", limiter.storage_key("text"), "not a time"});
  const auto t = limiter.decide("text");
  EXPECT_FALSE(t.consulted);
  EXPECT_EQ(t.error, admit::errc::error_reply);
  EXPECT_NE(t.message.find("does not hold an integer TAT"), std::string::npos) << t.message;
}

TEST(RedisGcra, InfiniteRateNeedsNoServer) {
  io_thread io;
  connection conn(io.executor(), "redis://127.0.0.1:1/0");  // nothing listens there
  admit::redis::gcra limiter(conn, "inf", admit::rate::inf(), 3);
  const auto r = limiter.decide("k", 1000);
  EXPECT_TRUE(r.decision.admitted);
  EXPECT_EQ(r.decision.remaining, 3);
  EXPECT_FALSE(r.error);
  EXPECT_FALSE(r.consulted);
  auto [ec, d] = decide_async(limiter, "k", 5).get();
  EXPECT_FALSE(ec);
  EXPECT_TRUE(d.admitted);
}

TEST(RedisGcra, InvalidConfigurationThrows) {
  io_thread io;
  connection conn(io.executor(), "redis://127.0.0.1:1/0");
  const auto r = admit::rate::per_second(10);
  EXPECT_THROW(admit::redis::gcra(conn, "", r, 1), std::invalid_argument);
  EXPECT_THROW(admit::redis::gcra(conn, "a{b", r, 1), std::invalid_argument);
  EXPECT_THROW(admit::redis::gcra(conn, "a}", r, 1), std::invalid_argument);
  EXPECT_THROW(admit::redis::gcra(conn, "z", admit::rate{}, 1), std::invalid_argument);
  EXPECT_THROW(admit::redis::gcra(conn, "b", r, 0), std::invalid_argument);
  EXPECT_THROW(admit::redis::gcra(conn, "b", admit::rate::per(1, std::chrono::hours(24)), 30'000),
               std::invalid_argument);  // 30,000 days > 2^51 µs
  try {
    admit::redis::gcra(conn, "b", r, -3);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("-3"), std::string::npos) << e.what();
  }
  // Rounding of the interval to whole microseconds (up).
  EXPECT_EQ(admit::redis::gcra(conn, "r", admit::rate::per_second(3), 1).emission_interval(), 333'334us);
  EXPECT_EQ(admit::redis::gcra(conn, "r", admit::rate::per_second(1e7), 1).emission_interval(), 1us);
  EXPECT_EQ(admit::redis::gcra(conn, "r", admit::rate::inf(), 1).emission_interval(), 0us);
}

}  // namespace
