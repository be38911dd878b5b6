// prefetch: N on `admit serve`'s Redis backend, against a real redis-server, at explicit times: a fixed window takes
// N hits at once (counted in Redis when taken, by envoyproxy/ratelimit's INCRBY) and decides the next ones without a
// call; it never spends a hit beyond the limit, so the window never admits more than the limit; a new window starts
// without the old stock; overrides and checks of 0 do not prefetch; hits that arrive while a refill is under way wait
// for it (and fail with it). The bucket algorithms lease through the library (limiter_options::lease).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "redis_backend_testing.hpp"
#include "serve/config/configuration.hpp"
#include "serve/engine/redis_backend.hpp"

namespace admit::serve::testing {

using state = hit_outcome::state;

TEST_F(RedisServeBackend, AFixedWindowPrefetchesAndNeverPassesItsLimit) {
  rate_limit_rule r = rule(50, unit::hour);
  r.prefetch = 20;
  const auto now = at(minute_start + 5);
  const std::string key = "admit:serve:fw:{u}:3600:" + std::to_string(minute_start);
  const hit_outcome first = decide_one(backend, make_hit(r, "u"), now);
  ASSERT_EQ(first.result, state::ok);
  EXPECT_TRUE(first.consulted) << "Redis answered the refill";
  EXPECT_EQ(server.admin({"GET", key}), "20") << "the first hit took 20";
  const long long calls = server.calls("incrby");
  for (int i = 0; i < 19; ++i) {
    const hit_outcome o = decide_one(backend, make_hit(r, "u"), now);
    ASSERT_EQ(o.result, state::ok) << i;
    // Its stock (18 − i) and the room the last reply showed (50 − 20): the window's remaining as far as it knows.
    EXPECT_EQ(o.remaining, 48U - static_cast<unsigned>(i));
    EXPECT_FALSE(o.consulted) << "from the stock: says nothing of whether Redis answers";
  }
  EXPECT_EQ(server.calls("incrby"), calls) << "19 hits decided from the stock, without Redis";
  EXPECT_EQ(decide_one(backend, make_hit(r, "u"), now).result, state::ok);  // refills: 40
  EXPECT_EQ(server.admin({"GET", key}), "40");
  for (int i = 0; i < 19; ++i) ASSERT_EQ(decide_one(backend, make_hit(r, "u"), now).result, state::ok);
  // The third refill counts 20 (as envoyproxy/ratelimit counts hits over the limit), but only the 10 under the limit
  // are spent: the last of them, then the window is full.
  EXPECT_EQ(decide_one(backend, make_hit(r, "u"), now).result, state::ok);
  EXPECT_EQ(server.admin({"GET", key}), "60");
  for (int i = 0; i < 9; ++i) ASSERT_EQ(decide_one(backend, make_hit(r, "u"), now).result, state::ok);
  const long long full = server.calls("incrby");
  EXPECT_EQ(decide_one(backend, make_hit(r, "u"), now).result, state::over_limit) << "50 admitted in the window";
  EXPECT_EQ(server.calls("incrby"), full) << "the reply showed the window full: refused here";
  // The next window: a new counter, no stock carried over.
  const auto next = at(minute_start + 3600);
  EXPECT_EQ(decide_one(backend, make_hit(r, "u"), next).result, state::ok);
  EXPECT_EQ(server.admin({"GET", "admit:serve:fw:{u}:3600:" + std::to_string(minute_start + 3600)}), "20");
}

TEST_F(RedisServeBackend, HitsArrivingDuringARefillWaitForItInsteadOfCallingRedis) {
  rate_limit_rule r = rule(50, unit::hour);
  r.prefetch = 20;
  const auto now = at(minute_start + 5);
  const std::string key = "admit:serve:fw:{w}:3600:" + std::to_string(minute_start);
  ASSERT_EQ(decide_one(backend, make_hit(r, "warm-up"), now).result, state::ok);  // loads the script
  (void)server.admin({"CONFIG", "RESETSTAT"});
  // 25 hits at once: the first refills (20 counted), the other 24 wait for it; 19 are served from its stock, the
  // 20th refills again (40 counted) and the last 4 wait for that one and are served from it.
  std::vector<hit> hits(25, make_hit(r, "w"));
  const auto outcomes = decide(backend, hits, now);
  for (std::size_t i = 0; i < outcomes.size(); ++i) EXPECT_EQ(outcomes[i].result, state::ok) << i << outcomes[i].error;
  EXPECT_EQ(server.admin({"GET", key}), "40") << "two refills of 20, no hit counted on its own";
  EXPECT_EQ(server.calls("incrby"), 2);
  EXPECT_EQ(server.script_calls(), 0) << "envoyproxy/ratelimit's commands, not a script";
}

TEST_F(RedisServeBackend, HitsWaitingForAFailedRefillFailWithItsError) {
  rate_limit_rule r = rule(50, unit::hour);
  r.prefetch = 20;
  const auto now = at(minute_start + 5);
  (void)server.admin({"SET", "admit:serve:fw:{bad}:3600:" + std::to_string(minute_start), "not a number"});
  const auto outcomes = decide(backend, std::vector<hit>(5, make_hit(r, "bad")), now);
  for (const hit_outcome& o : outcomes) {  // the refill's error: Redis's answer to its INCRBY
    EXPECT_EQ(o.result, state::failed);
    EXPECT_NE(o.error.find("not an integer"), std::string::npos) << o.error;
    EXPECT_NE(o.error.find("{bad}"), std::string::npos) << "names the counter: " << o.error;
  }
  EXPECT_EQ(server.calls("incrby"), 1) << "the others waited for the refill and failed with it";
}

TEST_F(RedisServeBackend, AReloadDropsTheStock) {
  rate_limit_rule r = rule(50, unit::hour);
  r.prefetch = 20;
  const auto now = at(minute_start + 5);
  ASSERT_EQ(decide_one(backend, make_hit(r, "s"), now).result, state::ok);  // 19 in stock
  backend.configure(*configuration::load(std::vector<std::pair<std::string, std::string>>{}));
  const long long calls = server.calls("incrby");
  ASSERT_EQ(decide_one(backend, make_hit(r, "s"), now).result, state::ok);
  EXPECT_GT(server.calls("incrby"), calls) << "the stock taken before the reload is not spent after it";
}

TEST_F(RedisServeBackend, ChecksAndOverridesDoNotPrefetch) {
  rate_limit_rule r = rule(50, unit::hour);
  r.prefetch = 20;
  const auto now = at(minute_start + 5);
  const std::string key = "admit:serve:fw:{c}:3600:" + std::to_string(minute_start);
  EXPECT_EQ(decide_one(backend, make_hit(r, "c", 0), now).result, state::ok);
  EXPECT_EQ(server.admin({"EXISTS", key}), "0") << "a check counts nothing, and makes no counter";
  hit o = make_hit(r, "c", 1);
  o.override_limit = limit_override{100, unit::hour};
  EXPECT_EQ(decide_one(backend, o, now).result, state::ok);
  EXPECT_EQ(server.admin({"GET", key}), "1") << "an override counts its own hit only";
}

TEST_F(RedisServeBackend, ABucketPrefetchLeasesTokens) {
  rate_limit_rule r = rule(100, unit::hour, algorithm::token_bucket);
  r.prefetch = 10;
  ASSERT_EQ(decide_one(backend, make_hit(r, "b")).result, state::ok);
  const long long calls = server.script_calls();
  for (int i = 0; i < 9; ++i) {
    const hit_outcome o = decide_one(backend, make_hit(r, "b"));
    ASSERT_EQ(o.result, state::ok);
    EXPECT_FALSE(o.consulted) << i;
  }
  EXPECT_EQ(server.script_calls(), calls) << "9 hits spent from the lease";
}

}  // namespace admit::serve::testing
