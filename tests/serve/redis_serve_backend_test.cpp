// `admit serve`'s Redis backend (src/serve/engine/redis_backend.hpp) against a real redis-server:
// envoyproxy/ratelimit's fixed window exactly, the keys' layout, overrides, each algorithm, concurrency leases, a
// backend on a thread of its own, a loaded configuration and the check of its rules. Batching:
// redis_serve_backend_batching_test.cpp; failures and recovery: redis_serve_backend_failures_test.cpp.
#include "serve/engine/redis_backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "limiter_testing.hpp"
#include "redis_backend_testing.hpp"
#include "serve/config/configuration.hpp"

// In the helpers' namespace (redis_backend_testing.hpp), so that their names are found before any other file's when
// a unity build compiles several test files as one.
namespace admit::serve::testing {

using namespace std::chrono_literals;
using state = hit_outcome::state;

TEST_F(RedisServeBackend, FixedWindowCountsEveryHitAsEnvoyRatelimitDoes) {
  const rate_limit_rule r = rule(3, unit::minute);
  const auto now = at(minute_start + 15);
  const std::string key = "admit:serve:fw:{domain_key_value_}:60:" + std::to_string(minute_start);
  std::vector<std::uint32_t> remaining;
  std::vector<std::uint64_t> counts;
  for (int i = 0; i < 5; ++i) {
    const hit_outcome o = decide_one(backend, make_hit(r, "domain_key_value_"), now);
    EXPECT_EQ(o.result, i < 3 ? state::ok : state::over_limit) << i;
    EXPECT_EQ(o.limit, 3u);
    EXPECT_EQ(o.reset_after, 45s);  // to the end of the minute, in whole seconds
    remaining.push_back(o.remaining);
    counts.push_back(o.count_after);
  }
  EXPECT_EQ(remaining, (std::vector<std::uint32_t>{2, 1, 0, 0, 0}));
  EXPECT_EQ(counts, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  // Refused hits were counted too (INCRBY even over the limit), and the counter expires after the unit.
  EXPECT_EQ(server.admin({"GET", key}), "5");
  const int ttl = std::stoi(server.admin({"TTL", key}));
  EXPECT_GT(ttl, 55);
  EXPECT_LE(ttl, 60);

  // hits_addend: n hits at once; over iff the count after exceeds the limit.
  const rate_limit_rule r10 = rule(10, unit::hour);
  EXPECT_EQ(decide_one(backend, make_hit(r10, "k", 7), now).remaining, 3u);
  const hit_outcome o = decide_one(backend, make_hit(r10, "k", 4), now);
  EXPECT_EQ(o.result, state::over_limit);
  EXPECT_EQ(o.count_after, 11u);
  const hit_outcome zero = decide_one(backend, make_hit(r10, "k", 0), now);  // a zero addend counts nothing
  EXPECT_EQ(zero.result, state::over_limit);
  EXPECT_EQ(zero.count_after, 11u);
}

TEST_F(RedisServeBackend, WindowsAreAlignedToUnixTimeFromTheGivenNow) {
  const rate_limit_rule r = rule(2, unit::minute);
  const hit h = make_hit(r, "d_k_v_");
  EXPECT_EQ(decide_one(backend, h, at(minute_start + 58)).result, state::ok);
  EXPECT_EQ(decide_one(backend, h, at(minute_start + 59)).result, state::ok);
  const hit_outcome last = decide_one(backend, h, at(minute_start + 59));
  EXPECT_EQ(last.result, state::over_limit);
  EXPECT_EQ(last.reset_after, 1s);
  // The next minute is a new counter: the limit again (the boundary burst of a fixed window).
  const hit_outcome next = decide_one(backend, h, at(minute_start + 60));
  EXPECT_EQ(next.result, state::ok);
  EXPECT_EQ(next.remaining, 1u);
  EXPECT_EQ(next.reset_after, 60s);
  EXPECT_EQ(server.admin({"GET", "admit:serve:fw:{d_k_v_}:60:" + std::to_string(minute_start + 60)}), "1");
}

TEST_F(RedisServeBackend, KeysHaveThePrefixAndLeaveEnvoyRatelimitsAlone) {
  const rate_limit_rule r = rule(1, unit::second);
  const auto now = at(minute_start);
  // envoyproxy/ratelimit's own key for the same descriptor and second, already over its limit.
  const std::string theirs = "domain_key_value_" + std::to_string(minute_start);
  (void)server.admin({"SET", theirs, "100"});
  EXPECT_EQ(decide_one(backend, make_hit(r, "domain_key_value_"), now).result, state::ok);
  EXPECT_EQ(server.admin({"GET", theirs}), "100");
  const rate_limit_rule g = rule(5, unit::minute, algorithm::gcra);
  EXPECT_EQ(decide_one(backend, make_hit(g, "domain_key_value_")).result, state::ok);
  const rate_limit_rule c = rule(1, unit::unknown, algorithm::concurrency);
  EXPECT_FALSE(decide_one(backend, make_hit(c, "domain_key_value_")).lease.empty());
  std::vector<std::string> ours = server.keys();
  std::erase(ours, theirs);
  // The window, gcra's state, the semaphore's state, holders and leases.
  ASSERT_EQ(ours.size(), 5u) << server.admin({"KEYS", "*"});
  for (const auto& k : ours) {
    EXPECT_TRUE(k.starts_with("admit:serve:") || k.starts_with("{admit:serve:")) << k;
  }
}

TEST_F(RedisServeBackend, OverrideReplacesTheRulesLimit) {
  const rate_limit_rule r = rule(100, unit::minute);
  hit h = make_hit(r, "o");
  h.override_limit = admit::serve::limit_override{1, unit::second};
  const auto now = at(minute_start + 7);
  const hit_outcome first = decide_one(backend, h, now);
  EXPECT_EQ(first.result, state::ok);
  EXPECT_EQ(first.limit, 1u);
  EXPECT_EQ(first.reset_after, 1s);
  EXPECT_EQ(decide_one(backend, h, now).result, state::over_limit);
}

TEST_F(RedisServeBackend, EachAlgorithmDecides) {
  for (const algorithm a : {algorithm::sliding_window, algorithm::gcra, algorithm::token_bucket}) {
    SCOPED_TRACE(std::string(to_string(a)));
    const rate_limit_rule r = rule(2, unit::hour, a);
    const hit h = make_hit(r, "user_" + std::string(to_string(a)));
    const hit_outcome first = decide_one(backend, h);
    EXPECT_EQ(first.result, state::ok);
    EXPECT_EQ(first.limit, 2u);
    EXPECT_EQ(first.remaining, 1u);
    EXPECT_EQ(decide_one(backend, h).result, state::ok);
    const hit_outcome third = decide_one(backend, h);
    EXPECT_EQ(third.result, state::over_limit);
    EXPECT_EQ(third.remaining, 0u);
    EXPECT_EQ(server.admin({"EXISTS", "{admit:serve:" + std::string(to_string(a)) + ":2/hour:2}:" + h.counter_key}),
              "1");
  }
  // A burst above the rate (gcra and token_bucket).
  rate_limit_rule burst = rule(1, unit::hour, algorithm::gcra);
  burst.burst = 3;
  const hit h = make_hit(burst, "bursty");
  EXPECT_EQ(decide(backend, {h, h, h})[2].result, state::ok);
  EXPECT_EQ(decide_one(backend, h).result, state::over_limit);
  // A rule admit::redis cannot hold is a failed decision naming the rule (check() refuses it at load).
  const rate_limit_rule huge = rule(16'000'000, unit::year, algorithm::sliding_window);
  const hit_outcome failed = decide_one(backend, make_hit(huge, "x"));
  EXPECT_EQ(failed.result, state::failed);
  EXPECT_NE(failed.error.find("domain.key_value"), std::string::npos) << failed.error;
  // A limit of 0 refuses without Redis.
  const rate_limit_rule none = rule(0, unit::second, algorithm::gcra);
  EXPECT_EQ(decide_one(backend, make_hit(none, "x")).result, state::over_limit);
}

TEST_F(RedisServeBackend, ConcurrencyLeasesAreReleasedFromAnyProcess) {
  const rate_limit_rule r = rule(2, unit::unknown, algorithm::concurrency);
  const hit h = make_hit(r, "db_queries_");
  const hit_outcome a = decide_one(backend, h);
  const hit_outcome b = decide_one(backend, h);
  ASSERT_EQ(a.result, state::ok);
  ASSERT_EQ(b.result, state::ok);
  EXPECT_EQ(b.remaining, 0u);
  EXPECT_NE(a.lease, b.lease);
  const hit_outcome c = decide_one(backend, h);
  EXPECT_EQ(c.result, state::over_limit);
  EXPECT_TRUE(c.lease.empty());
  // As in process: while permits are held, the longest they can stay held (lease_ttl); nothing when none is.
  EXPECT_EQ(c.reset_after, 60s);
  EXPECT_EQ(decide_one(backend, make_hit(r, "db_queries_", 0)).reset_after, 60s);
  EXPECT_EQ(decide_one(backend, make_hit(r, "nothing_held", 0)).reset_after, 0s);
  // Another backend (another `admit serve` of the fleet) releases a lease this one granted.
  redis_backend other(io.executor(), options_for(server.url()));
  EXPECT_TRUE(release(other, a.lease));
  EXPECT_FALSE(release(backend, a.lease));  // once
  EXPECT_EQ(decide_one(backend, h).result, state::ok);
  EXPECT_EQ(release_of(backend, "not a lease").result, release_result::state::not_held);
  EXPECT_EQ(release_of(backend, "cc1.zz.00").result, release_result::state::not_held);

  // Leases expire in Redis after lease_ttl (60 s by default) unless released: the keys live as long as the longest,
  // and a second more (idle_ttl), up to a quarter of that beyond.
  const std::string tag = "{admit:serve:cc:2:db_queries_}:";
  for (const char* k : {"meta", "holders", "leases"}) {
    const int pttl = std::stoi(server.admin({"PTTL", tag + k}));
    EXPECT_GT(pttl, 50'000) << k;
    EXPECT_LE(pttl, 61'251) << k;
  }
  // A lease whose expiry has passed (set back in Redis, and the semaphore told to look: its script reads Redis's
  // clock) frees its permit for the next acquisition.
  const std::string b_id = b.lease.substr(b.lease.rfind('.') + 1);
  ASSERT_EQ(server.admin({"ZADD", tag + "holders", "XX", "CH", "1", b_id}), "1");
  (void)server.admin({"HSET", tag + "meta", "next", "0"});
  EXPECT_EQ(decide_one(backend, h).result, state::ok);
  EXPECT_FALSE(release(backend, b.lease));

  // A check (n = 0) takes nothing and says how many are in use.
  hit check = h;
  check.n = 0;
  const hit_outcome in_use = decide_one(backend, check);
  EXPECT_EQ(in_use.result, state::ok);
  EXPECT_TRUE(in_use.lease.empty());
  EXPECT_EQ(in_use.count_after, 2u);
  EXPECT_EQ(in_use.remaining, 0u);
  hit unused = make_hit(r, "nobody_");
  unused.n = 0;
  EXPECT_EQ(decide_one(backend, unused).remaining, 2u);
  EXPECT_EQ(server.admin({"EXISTS", "{admit:serve:cc:2:nobody_}:meta"}), "0");  // looking creates nothing

  // Another limit for the same descriptor counts apart (as a changed rate does for the other algorithms).
  const rate_limit_rule wider = rule(3, unit::unknown, algorithm::concurrency);
  EXPECT_EQ(decide_one(backend, make_hit(wider, "db_queries_")).remaining, 2u);

  // A descriptor value with braces: escaped in the semaphore's name, whose braces are its keys' hash tag.
  const hit_outcome braced = decide_one(backend, make_hit(r, "db_{x}%_"));
  ASSERT_EQ(braced.result, state::ok) << braced.error;
  EXPECT_EQ(server.admin({"EXISTS", "{admit:serve:cc:2:db_%7Bx%7D%25_}:meta"}), "1");
  EXPECT_TRUE(release(other, braced.lease));
}

TEST_F(RedisServeBackend, RunsOnAThreadOfItsOwn) {
  redis_backend own(options_for(server.url()));
  EXPECT_EQ(own.ping(2s), std::nullopt);
  const rate_limit_rule r = rule(1, unit::minute);
  const rate_limit_rule c = rule(1, unit::unknown, algorithm::concurrency);
  const auto o = decide(own, {make_hit(r, "own"), make_hit(r, "own"), make_hit(c, "own")}, at(minute_start));
  EXPECT_EQ(o[0].result, state::ok);
  EXPECT_EQ(o[1].result, state::over_limit);
  ASSERT_EQ(o[2].result, state::ok) << o[2].error;
  EXPECT_TRUE(release(own, o[2].lease));
}

// The hits as the service makes them: rules and counter keys from a loaded configuration.
TEST_F(RedisServeBackend, DecidesOnALoadedConfigurationAndKeepsCountsAcrossReloads) {
  const std::string yaml = R"(domain: shop
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: api
    rate_limit:
      unit: minute
      requests_per_unit: 3
      algorithm: gcra
  - key: db
    rate_limit:
      concurrency: 1
)";
  const std::vector<std::pair<std::string, std::string>> files{{"shop.yaml", yaml}};
  const auto config = admit::serve::configuration::load(files);
  EXPECT_NO_THROW(redis_backend::check(*config));
  backend.configure(*config);
  const auto hit_for = [](const admit::serve::configuration& c, const std::string& key, const std::string& value) {
    const std::vector<admit::serve::descriptor_entry> entries{{key, value}};
    const auto m = c.find("shop", entries);
    EXPECT_TRUE(m.has_value());
    hit h;
    h.rule = m->rule;
    h.counter_key = m->counter_key;
    return h;
  };
  const auto now = at(minute_start + 30);
  const auto first = decide(
      backend, {hit_for(*config, "user", "alice"), hit_for(*config, "api", "x"), hit_for(*config, "db", "main")}, now);
  for (const auto& o : first) EXPECT_EQ(o.result, state::ok) << o.error;
  EXPECT_EQ(first[0].remaining, 1u);
  EXPECT_EQ(first[1].remaining, 2u);
  EXPECT_FALSE(first[2].lease.empty());

  // A reload with the same rules: the counts are Redis's, so they carry over.
  const auto reloaded = admit::serve::configuration::load(files);
  backend.configure(*reloaded);
  const auto second = decide(
      backend, {hit_for(*reloaded, "user", "alice"), hit_for(*reloaded, "api", "x"), hit_for(*reloaded, "db", "main")},
      now);
  EXPECT_EQ(second[0].result, state::ok);
  EXPECT_EQ(second[0].remaining, 0u);
  EXPECT_EQ(second[1].remaining, 1u);
  EXPECT_EQ(second[2].result, state::over_limit);  // the lease of the first decision is still held
  EXPECT_TRUE(release(backend, first[2].lease));
}

TEST(RedisServeBackendCheck, RefusesARuleRedisCannotHoldNamingItsFileAndLine) {
  const std::string yaml = R"(domain: big
descriptors:
  - key: everyone
    rate_limit:
      unit: year
      requests_per_unit: 16000000
      algorithm: sliding_window
)";
  const std::vector<std::pair<std::string, std::string>> files{{"big.yaml", yaml}};
  const auto config = admit::serve::configuration::load(files);
  try {
    redis_backend::check(*config);
    ADD_FAILURE() << "check() accepted a sliding window beyond admit::redis's range";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("big.yaml:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sliding window"), std::string::npos) << e.what();
  }
}

// A release Redis cannot answer is not "no such lease": the lease may still be held (it was, here), and the caller
// is told that the backend could not be asked, and why. It said "not held" (HTTP 404) before, and a caller that
// trusted it never tried again while the permit stayed taken until the lease expired.
TEST_F(RedisServeBackend, AReleaseRedisCannotAnswerFailsAndIsNotANoSuchLease) {
  const rate_limit_rule r = rule(1, unit::unknown, algorithm::concurrency);
  const hit h = make_hit(r, "exports");
  const hit_outcome held = decide_one(backend, h);
  ASSERT_EQ(held.result, state::ok);
  server.kill();
  const release_result failed = release_of(backend, held.lease);
  EXPECT_EQ(failed.result, release_result::state::failed);
  EXPECT_NE(failed.error, "");
  server.start();  // (no persistence: the restarted server holds no lease)
  EXPECT_TRUE(admit::redis::testing::eventually(
      [&] { return release_of(backend, held.lease).result == release_result::state::not_held; }));
}

}  // namespace admit::serve::testing
