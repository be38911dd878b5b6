// `admit serve`'s Redis backend (src/serve/engine/redis_backend.hpp) when Redis fails, against a real redis-server:
// an error reply fails its hit alone, a killed server fails decisions until it is back and they recover by
// themselves, the breaker fails them at once while it is open, a server down from the start, and invalid options.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "io_thread.hpp"
#include "redis_backend_testing.hpp"
#include "redis_server.hpp"
#include "serve/engine/redis_backend.hpp"

// In the helpers' namespace (redis_backend_testing.hpp), so that their names are found before any other file's when
// a unity build compiles several test files as one.
namespace admit::serve::testing {

using namespace std::chrono_literals;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using state = hit_outcome::state;

TEST_F(RedisServeBackend, AnErrorReplyFailsItsHitAlone) {
  const rate_limit_rule r = rule(10, unit::minute);
  const auto now = at(minute_start);
  (void)server.admin({"HSET", "admit:serve:fw:{bad}:60:" + std::to_string(minute_start), "f", "v"});
  const auto o = decide(backend, {make_hit(r, "good"), make_hit(r, "bad")}, now);
  EXPECT_EQ(o[0].result, state::ok);
  EXPECT_EQ(o[1].result, state::failed);
  EXPECT_NE(o[1].error.find("WRONGTYPE"), std::string::npos) << o[1].error;
}

TEST_F(RedisServeBackend, RedisKilledFailsDecisionsAndTheyRecoverByThemselves) {
  const rate_limit_rule fixed = rule(100, unit::minute);
  const rate_limit_rule gcra = rule(100, unit::minute, algorithm::gcra);
  const rate_limit_rule conc = rule(100, unit::unknown, algorithm::concurrency);
  const std::vector<hit> hits{make_hit(fixed, "f"), make_hit(gcra, "g"), make_hit(conc, "c")};
  for (const auto& o : decide(backend, hits)) EXPECT_EQ(o.result, state::ok) << o.error;

  server.kill();
  for (const auto& o : decide(backend, hits)) {
    EXPECT_EQ(o.result, state::failed);
    EXPECT_NE(o.error.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << o.error;
  }
  EXPECT_TRUE(backend.ping(200ms).has_value());

  server.start();  // empty: persistence is off
  // The connection comes back by itself (backoff up to 2 s; gcra's breaker opens for 1 s): no call from the test.
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  std::vector<hit_outcome> last;
  do {
    last = decide(backend, hits);
    if (std::all_of(last.begin(), last.end(), [](const hit_outcome& o) { return o.result == state::ok; })) break;
  } while (std::chrono::steady_clock::now() < give_up);
  for (const auto& o : last) EXPECT_EQ(o.result, state::ok) << o.error;
  EXPECT_EQ(backend.ping(1s), std::nullopt);
}

// A concurrency rule at its limit is Redis answering, not failing: refusals, and checks of counters nobody uses, never
// open the breaker for the other rules.
TEST_F(RedisServeBackend, RefusalsOfAFullConcurrencyRuleDoNotOpenTheBreaker) {
  redis_backend_options o = options_for(server.url());
  o.breaker = {.failure_threshold = 2, .open_for = std::chrono::hours(1)};
  redis_backend b(io.executor(), o);
  const rate_limit_rule conc = rule(1, unit::unknown, algorithm::concurrency);
  const rate_limit_rule fixed = rule(100, unit::minute);
  ASSERT_EQ(decide_one(b, make_hit(conc, "full")).result, state::ok);
  hit unused = make_hit(conc, "unused");
  unused.n = 0;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(decide_one(b, make_hit(conc, "full")).result, state::over_limit);
    EXPECT_EQ(decide_one(b, make_hit(conc, "full", 2)).result, state::over_limit);  // above the limit
    EXPECT_EQ(decide_one(b, unused).result, state::ok);
  }
  const hit_outcome after = decide_one(b, make_hit(fixed, "f"));
  EXPECT_EQ(after.result, state::ok) << after.error;
}

TEST_F(RedisServeBackend, TheBreakerFailsDecisionsAtOnceWhileRedisIsDown) {
  redis_backend_options o = options_for(server.url());
  o.timeout = 200ms;
  o.breaker = {.failure_threshold = 2, .open_for = std::chrono::hours(1)};  // stays open for the whole test
  redis_backend b(io.executor(), o);
  const rate_limit_rule fixed = rule(100, unit::minute);
  const rate_limit_rule conc = rule(100, unit::unknown, algorithm::concurrency);
  EXPECT_EQ(decide_one(b, make_hit(fixed, "f")).result, state::ok);
  server.kill();
  for (int i = 0; i < 2; ++i) {
    const hit_outcome o1 = decide_one(b, make_hit(fixed, "f"));
    EXPECT_EQ(o1.result, state::failed);
    EXPECT_EQ(o1.error.find("circuit"), std::string::npos) << o1.error;  // a timeout
  }
  server.start();
  // Open: Redis is not called although it is back.
  for (const hit& h : {make_hit(fixed, "f"), make_hit(conc, "c")}) {
    const hit_outcome out = decide_one(b, h);
    EXPECT_EQ(out.result, state::failed);
    EXPECT_NE(out.error.find("circuit"), std::string::npos) << out.error;
  }
  EXPECT_EQ(server.script_calls(), 0);  // FCALL or EVALSHA: the concurrency rule's semaphore neither
}

// The connection keeps its last failure after it connected again: a Redis that stops answering later is a timeout,
// not the refusal of the outage before (it read "timed out (connection to redis refused)").
TEST_F(RedisServeBackend, ATimeoutAfterAnOutageIsNotGivenTheOutagesCause) {
  redis_backend_options o = options_for(server.url());
  o.timeout = 200ms;
  o.breaker = {.failure_threshold = 0};  // never opens: every decision asks Redis
  redis_backend b(io.executor(), o);
  const rate_limit_rule r = rule(100, unit::minute);
  ASSERT_EQ(decide_one(b, make_hit(r, "k")).result, state::ok);
  server.kill();
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  hit_outcome out;
  do {
    out = decide_one(b, make_hit(r, "k"));
  } while (out.error.find("refused") == std::string::npos && std::chrono::steady_clock::now() < give_up);
  ASSERT_NE(out.error.find("refused"), std::string::npos) << out.error;
  server.start();
  do {
    out = decide_one(b, make_hit(r, "k"));
  } while (out.result == state::failed && std::chrono::steady_clock::now() < give_up);
  ASSERT_EQ(out.result, state::ok) << out.error;
  server.pause(std::chrono::milliseconds(2000));  // connected, and silent
  out = decide_one(b, make_hit(r, "k"));
  server.unpause();
  EXPECT_EQ(out.result, state::failed);
  EXPECT_NE(out.error.find("timed out"), std::string::npos) << out.error;
  EXPECT_EQ(out.error.find("refused"), std::string::npos) << out.error;
}

TEST(RedisServeBackendUnreachable, PingNamesTheServerDecisionsFailThenWorkOnceItStarts) {
  redis_server server;
  server.kill();  // down from the start (`admit serve` without --redis-required)
  io_thread io;
  const std::string url = server.url();
  redis_backend_options o = options_for(url);
  o.timeout = 200ms;
  redis_backend backend(io.executor(), o);
  const auto why = backend.ping(300ms);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << *why;
  const rate_limit_rule r = rule(1, unit::second);
  const rate_limit_rule g = rule(5, unit::second, algorithm::gcra);
  const std::vector<hit> hits{make_hit(r, "k"), make_hit(g, "k")};
  for (const auto& out : decide(backend, hits)) {
    EXPECT_EQ(out.result, state::failed);
    EXPECT_FALSE(out.error.empty());
  }
  // The fixed window's call waited for a connection that never came: the connection's failure is what it says first
  // (it read "timed out (connection to redis refused)").
  EXPECT_NE(decide(backend, hits)[0].error.find("not connected (connection to redis refused)"), std::string::npos)
      << decide(backend, hits)[0].error;
  // It comes up: the backend learns the topology and decides, with no call from the test.
  server.start();
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  std::vector<hit_outcome> last;
  // (Each rule's connection reconnects on its own schedule: both are waited for.)
  do {
    last = decide(backend, hits);
  } while ((last[1].result != state::ok || last[0].result == state::failed) &&
           std::chrono::steady_clock::now() < give_up);
  EXPECT_EQ(last[1].result, state::ok) << last[1].error;
  EXPECT_NE(last[0].result, state::failed) << last[0].error;

  EXPECT_THROW(redis_backend(io.executor(), options_for("http://x")), std::invalid_argument);
  EXPECT_THROW(redis_backend(options_for("http://x")), std::invalid_argument);  // its own thread stopped again
  redis_backend_options braces = options_for(url);
  braces.key_prefix = "{x}";
  EXPECT_THROW(redis_backend(io.executor(), braces), std::invalid_argument);
}

}  // namespace admit::serve::testing
