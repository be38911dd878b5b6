// admit::redis::token_bucket against a real redis-server, what is the token bucket's own: the same decisions as the
// local admit::token_bucket at the server's time, the stored empty instant and a key that expires when the bucket is
// full, parameters that change without losing state, leasing that never takes more than the bucket holds, and the
// parameter checks. The contract every limiter shares (deadline, failure policies, breaker, lost state, batching,
// leasing, SCRIPT FLUSH, refusals that write nothing, a hot key) is redis_limiter_contract_test.cpp and
// redis_limiter_contract_calls_test.cpp, run for the token bucket too.
#include "admit/redis/token_bucket.hpp"

#include <gtest/gtest.h>

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
#include <vector>

#include "admit/detail/token_bucket_math.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/token_bucket.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::limiter_options;
using admit::redis::testing::at;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;
using admit::redis::testing::traced;
using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;

std::int64_t us(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }

TEST(RedisTokenBucket, DecisionsMatchTheLocalBucketAtTheServerTime) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // 700/s: 1,428,572 ns, enforced as 1,429 µs; requests arrive faster than that: admissions, refusals, n == 0 and
  // n > burst all occur.
  admit::redis::token_bucket bucket(conn, "trace", admit::rate::per_second(700), 5, patient());
  ASSERT_EQ(bucket.refill_interval(), 1429us);
  std::mt19937 rng(11);
  const std::vector<std::string> keys{"a", "b", "c"};
  const std::vector<std::int64_t> sizes{1, 1, 1, 2, 3, 0, 5, 6};
  std::vector<traced> trace;
  for (int i = 0; i < 600; ++i) {
    const std::string& key = keys[rng() % keys.size()];
    const std::int64_t n = sizes[rng() % sizes.size()];
    if (i % 3 == 0) {
      trace.push_back({key, n, bucket.async_decide_detailed(key, n, asio::use_future).get()});
    } else {
      trace.push_back({key, n, bucket.decide(key, n)});
    }
    if (i % 150 == 149) std::this_thread::sleep_for(10ms);  // partial refills (variety, not timing)
  }
  std::map<std::string, std::unique_ptr<admit::token_bucket>> local;
  int admitted = 0, refused = 0, oversize = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const traced& t = trace[i];
    ASSERT_TRUE(t.result.consulted) << i << ": " << t.result.error.message();
    auto& b = local[t.key];
    if (!b) b = std::make_unique<admit::token_bucket>(admit::rate::every(bucket.refill_interval()), bucket.burst());
    EXPECT_EQ(t.result.decision, b->decide_at(at(t.result), t.n))
        << "request " << i << " key " << t.key << " n " << t.n;
    const auto& d = t.result.decision;
    admitted += t.n > 0 && d.admitted;
    refused += !d.admitted && !d.exceeds_capacity();
    oversize += d.exceeds_capacity();
  }
  EXPECT_GT(admitted, 0);
  EXPECT_GT(refused, 0);
  EXPECT_GT(oversize, 0);
}

TEST(RedisTokenBucket, KeyExpiresWhenTheBucketIsFullAgain) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admit::redis::token_bucket bucket(conn, "exp", admit::rate::every(1'234'567us), 3, patient());
  const std::string key = bucket.storage_key("k");
  const auto r = bucket.decide("k", 2);
  ASSERT_TRUE(r.decision.admitted);
  // The state is the empty instant: the bucket was full at r's time, so it is now − 3 intervals + 2 intervals.
  const std::int64_t empty_at = r.server_time.count() - 1'234'567;
  EXPECT_EQ(server.admin({"GET", key}), std::to_string(empty_at));
  EXPECT_EQ(us(r.decision.reset_after), 2 * 1'234'567);
  // It expires when the bucket is full again, rounded up to the millisecond.
  EXPECT_EQ(std::stoll(server.admin({"PEXPIRETIME", key})), (empty_at + 3 * 1'234'567 + 999) / 1000);
  // Nothing is left after that horizon: a bucket that refills in 2 ms is gone within 2 ms (observed, not waited out
  // on purpose).
  admit::redis::token_bucket brief(conn, "brief", admit::rate::every(1ms), 2, patient());
  ASSERT_TRUE(brief.decide("k", 2).decision.admitted);
  // The epoch key expires with the last state written under it.
  ASSERT_TRUE(eventually([&] { return server.admin({"KEYS", "*brief*"}).empty(); }));
}

TEST(RedisTokenBucket, NewParametersContinueFromTheStoredState) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  // The documented semantics: the stored empty instant is kept and read with the new parameters. The local
  // arithmetic (detail/token_bucket_math.hpp) on the same state, switched to the new configuration, must agree.
  struct phase {
    admit::rate r;
    std::int64_t burst;
  };
  const std::vector<phase> phases{
      {admit::rate::every(2ms), 4}, {admit::rate::every(1ms), 8}, {admit::rate::every(4ms), 2}};
  std::int64_t tat = admit::detail::ns_min;
  std::int64_t last_now = admit::detail::ns_min;
  for (std::size_t p = 0; p < phases.size(); ++p) {
    admit::redis::token_bucket bucket(conn, "chg", phases[p].r, phases[p].burst, patient());
    const auto cfg = admit::detail::make_token_bucket_config(phases[p].r, phases[p].burst, 0);
    for (int i = 0; i < 30; ++i) {
      const std::int64_t n = 1 + i % 3;
      const auto r = bucket.decide("k", n);
      ASSERT_TRUE(r.consulted);
      const auto expected = admit::detail::token_bucket_decide(cfg, admit::oversize_policy::reject, tat, last_now,
                                                               r.server_time.count() * 1000, n);
      EXPECT_EQ(r.decision, expected) << "phase " << p << " request " << i;
    }
  }
  // (A reset on a change would have shown: each phase starts on a nearly empty bucket, the local one carries it.)
}

TEST(RedisTokenBucket, LeasingTakesAtMostWhatTheBucketHolds) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  limiter_options o = patient();
  o.lease = 4;
  o.lease_ttl = 10s;
  admit::redis::token_bucket bucket(conn, "lease", admit::rate::per(1, std::chrono::hours(1)), 6, o);
  const auto first = bucket.decide("k", 1);
  ASSERT_TRUE(first.consulted);
  EXPECT_EQ(first.granted, 4);  // 1 asked, 3 leased
  EXPECT_EQ(first.decision.remaining, 2);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.decide("k", 1).source, admit::redis::decided_by::lease);
  const auto second = bucket.decide("k", 1);  // back to Redis: 2 left, both taken
  ASSERT_TRUE(second.consulted);
  EXPECT_EQ(second.granted, 2);
  EXPECT_EQ(second.decision.remaining, 0);
  EXPECT_EQ(bucket.decide("k", 1).source, admit::redis::decided_by::lease);
  const auto empty = bucket.decide("k", 1);
  ASSERT_TRUE(empty.consulted);
  EXPECT_FALSE(empty.decision.admitted);
  // Six tokens charged in all: the empty instant is the first decision's time (full then) − 6 intervals + 6 intervals.
  EXPECT_EQ(std::stoll(server.admin({"GET", bucket.storage_key("k")})), first.server_time.count());
}

TEST(RedisTokenBucket, InvalidConfigurationThrows) {
  io_thread io;
  connection conn(io.executor(), "redis://127.0.0.1:1/0");
  const auto r = admit::rate::per_second(10);
  EXPECT_THROW(admit::redis::token_bucket(conn, "", r, 1), std::invalid_argument);
  EXPECT_THROW(admit::redis::token_bucket(conn, "a{b", r, 1), std::invalid_argument);
  EXPECT_THROW(admit::redis::token_bucket(conn, "z", admit::rate{}, 1), std::invalid_argument);
  EXPECT_THROW(admit::redis::token_bucket(conn, "b", r, 0), std::invalid_argument);
  EXPECT_THROW(admit::redis::token_bucket(conn, "b", admit::rate::per(1, std::chrono::hours(24)), 30'000),
               std::invalid_argument);
  try {
    admit::redis::token_bucket(conn, "b", r, -3);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("-3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("token_bucket"), std::string::npos) << e.what();
  }
  EXPECT_EQ(admit::redis::token_bucket(conn, "r", admit::rate::per_second(3), 1).refill_interval(), 333'334us);
  EXPECT_EQ(admit::redis::token_bucket(conn, "r", admit::rate::per_second(1e7), 1).refill_interval(), 1us);
  const admit::redis::token_bucket inf(conn, "r", admit::rate::inf(), 2);
  EXPECT_EQ(inf.refill_interval(), 0us);
  const auto d = inf.decide("k", 1000);  // no server needed
  EXPECT_TRUE(d.decision.admitted);
  EXPECT_EQ(d.source, admit::redis::decided_by::unlimited);
}

}  // namespace
