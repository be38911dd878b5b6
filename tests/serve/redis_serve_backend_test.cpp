// `admit serve`'s Redis backend (src/serve/engine/redis_backend.hpp) against a real redis-server and a 3-master Redis
// Cluster: envoyproxy/ratelimit's fixed window exactly, the keys' layout, each algorithm, concurrency leases, one
// script call per batch, failures and recovery.
#include "serve/engine/redis_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/cluster.hpp"
#include "io_thread.hpp"
#include "redis_backend_testing.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "serve/config/configuration.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_cluster;
using admit::redis::testing::redis_server;
using admit::serve::algorithm;
using admit::serve::hit;
using admit::serve::hit_outcome;
using admit::serve::rate_limit_rule;
using admit::serve::redis_backend;
using admit::serve::redis_backend_options;
using admit::serve::unit;
using state = hit_outcome::state;
using admit::serve::testing::decide;
using admit::serve::testing::decide_one;
using admit::serve::testing::make_hit;
using sys = std::chrono::system_clock;

// A Unix time at the start of a minute (and of an hour): 1'700'002'800 = 28'333'380 minutes.
constexpr std::int64_t minute_start = 1'700'002'800;
sys::time_point at(std::int64_t unix_seconds) { return sys::time_point(std::chrono::seconds(unix_seconds)); }

rate_limit_rule rule(std::uint32_t requests, unit per, algorithm a = algorithm::fixed_window) {
  rate_limit_rule r;
  r.full_key = "domain.key_value";
  r.per = per;
  r.requests_per_unit = requests;
  r.algorithm = a;
  if (a == algorithm::concurrency) {
    r.per = unit::unknown;
    r.concurrency = requests;
    r.requests_per_unit = 0;
  }
  return r;
}

bool release(redis_backend& b, std::string lease) {
  std::promise<bool> p;
  b.release(std::move(lease), [&p](bool ok) { p.set_value(ok); });
  return p.get_future().get();
}

redis_backend_options options_for(const std::string& url) {
  redis_backend_options o;
  o.url = url;
  o.timeout = 1s;  // generous: CI machines are slow; the failure tests need no shorter one
  return o;
}

class RedisServeBackend : public ::testing::Test {
 protected:
  io_thread io;
  redis_server server;
  redis_backend backend{io.executor(), options_for(server.url())};
};

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
  std::string keys = server.admin({"KEYS", "*"});
  std::vector<std::string> ours;
  for (std::size_t from = 0; from < keys.size();) {
    const auto to = std::min(keys.find('\n', from), keys.size());
    if (std::string k = keys.substr(from, to - from); k != theirs) ours.push_back(k);
    from = to + 1;
  }
  ASSERT_EQ(ours.size(), 4u) << keys;  // the window, gcra's state, the leases and their counts
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
  // Another backend (another `admit serve` of the fleet) releases a lease this one granted.
  redis_backend other(io.executor(), options_for(server.url()));
  EXPECT_TRUE(release(other, a.lease));
  EXPECT_FALSE(release(backend, a.lease));  // once
  EXPECT_EQ(decide_one(backend, h).result, state::ok);
  EXPECT_FALSE(release(backend, "not a lease"));
  EXPECT_FALSE(release(backend, "cc1.zz.00"));

  // Leases expire in Redis after lease_ttl (60 s by default) unless released: the keys live as long as the longest.
  const std::string zset = "admit:serve:cc:{db_queries_}";
  const int pttl = std::stoi(server.admin({"PTTL", zset}));
  EXPECT_GT(pttl, 50'000);
  EXPECT_LE(pttl, 60'000);
  // A lease whose expiry has passed (set back in Redis: the script reads Redis's clock) frees its permit for the
  // next acquisition.
  (void)server.admin({"ZADD", zset, "XX", "1", b.lease});
  EXPECT_EQ(decide_one(backend, h).result, state::ok);
  EXPECT_FALSE(release(backend, b.lease));
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

TEST_F(RedisServeBackend, OneScriptCallPerBatch) {
  const rate_limit_rule r = rule(1000, unit::minute);
  (void)decide_one(backend, make_hit(r, "warm-up"));  // loads the script (NOSCRIPT, SCRIPT LOAD, EVALSHA)
  (void)server.admin({"CONFIG", "RESETSTAT"});
  std::vector<hit> hits;
  for (int i = 0; i < 20; ++i) hits.push_back(make_hit(r, "descriptor_" + std::to_string(i)));
  const auto outcomes = decide(backend, hits);
  for (const auto& o : outcomes) EXPECT_EQ(o.result, state::ok) << o.error;
  EXPECT_EQ(server.calls("evalsha"), 1);  // envoyproxy/ratelimit: 20 INCRBY + 20 EXPIRE

  // Requests from many threads at once share calls.
  (void)server.admin({"CONFIG", "RESETSTAT"});
  constexpr int threads = 8, per_thread = 50;
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const auto o =
            decide(backend, {make_hit(r, std::string("t").append(std::to_string(t))), make_hit(r, "shared")});
        if (o[0].result == state::ok && o[1].result == state::ok) ++ok;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(ok.load(), threads * per_thread);
  EXPECT_LE(server.calls("evalsha"), threads * per_thread);
}

TEST_F(RedisServeBackend, BatchesAreCappedByMaxBatch) {
  redis_backend_options o = options_for(server.url());
  o.max_batch = 4;
  redis_backend small(io.executor(), o);
  const rate_limit_rule r = rule(1000, unit::minute);
  (void)decide_one(small, make_hit(r, "warm-up"));
  (void)server.admin({"CONFIG", "RESETSTAT"});
  std::vector<hit> hits;
  for (int i = 0; i < 10; ++i) hits.push_back(make_hit(r, std::string("d").append(std::to_string(i))));
  for (const auto& out : decide(small, hits)) EXPECT_EQ(out.result, state::ok) << out.error;
  EXPECT_EQ(server.calls("evalsha"), 3);  // 4 + 4 + 2
}

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
  EXPECT_EQ(server.calls("evalsha"), 0);
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
  // It comes up: the backend learns the topology and decides, with no call from the test.
  server.start();
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  std::vector<hit_outcome> last;
  do {
    last = decide(backend, hits);
  } while (last[1].result != state::ok && std::chrono::steady_clock::now() < give_up);
  EXPECT_EQ(last[1].result, state::ok) << last[1].error;
  EXPECT_NE(last[0].result, state::failed) << last[0].error;

  EXPECT_THROW(redis_backend(io.executor(), options_for("http://x")), std::invalid_argument);
  EXPECT_THROW(redis_backend(options_for("http://x")), std::invalid_argument);  // its own thread stopped again
  redis_backend_options braces = options_for(url);
  braces.key_prefix = "{x}";
  EXPECT_THROW(redis_backend(io.executor(), braces), std::invalid_argument);
}

TEST(RedisServeBackendCluster, DecidesOnThreeMasters) {
  redis_cluster cluster;
  io_thread io;
  redis_backend backend(io.executor(), options_for(cluster.url(0)));  // topology: automatic (INFO cluster)
  EXPECT_EQ(backend.ping(5s), std::nullopt);
  const rate_limit_rule r = rule(2, unit::hour);
  const auto now = at(minute_start);
  std::vector<hit> hits;
  for (int i = 0; i < 30; ++i) hits.push_back(make_hit(r, "user_" + std::to_string(i)));
  hits.push_back(make_hit(r, "user_0"));
  hits.push_back(make_hit(r, "user_0"));
  const auto outcomes = decide(backend, hits, now);
  for (std::size_t i = 0; i < 30; ++i) EXPECT_EQ(outcomes[i].result, state::ok) << outcomes[i].error;
  EXPECT_EQ(outcomes[30].result, state::ok);
  EXPECT_EQ(outcomes[31].result, state::over_limit);
  // The counters are spread over the masters (one slot per counter key).
  std::vector<int> per_node(redis_cluster::size, 0);
  for (int i = 0; i < 30; ++i) {
    const std::size_t owner =
        cluster.owner_of("admit:serve:fw:{user_" + std::to_string(i) + "}:3600:" + std::to_string(minute_start));
    ASSERT_LT(owner, redis_cluster::size);
    ++per_node[owner];
  }
  for (const int n : per_node) EXPECT_GT(n, 0);

  // One script call per hash slot: 30 hits on 30 counters (loaded on every master above) are as many calls as they
  // have distinct slots, spread over the masters.
  for (std::size_t i = 0; i < redis_cluster::size; ++i) (void)cluster.admin(i, {"CONFIG", "RESETSTAT"});
  std::set<std::uint16_t> slots;
  for (int i = 0; i < 30; ++i) {
    slots.insert(admit::redis::hash_slot("admit:serve:fw:{user_" + std::to_string(i) +
                                         "}:3600:" + std::to_string(minute_start)));
  }
  const auto again = decide(backend, std::vector<hit>(hits.begin(), hits.begin() + 30), now);
  EXPECT_EQ(again[0].result, state::over_limit);  // user_0's fourth hit
  for (std::size_t i = 1; i < 30; ++i) EXPECT_EQ(again[i].result, state::ok) << again[i].error;
  long long calls = 0;
  for (std::size_t i = 0; i < redis_cluster::size; ++i) calls += cluster.calls(i, "evalsha");
  EXPECT_EQ(calls, static_cast<long long>(slots.size()));

  const rate_limit_rule g = rule(1, unit::hour, algorithm::token_bucket);
  EXPECT_EQ(decide_one(backend, make_hit(g, "tb")).result, state::ok);
  EXPECT_EQ(decide_one(backend, make_hit(g, "tb")).result, state::over_limit);
  const rate_limit_rule c = rule(1, unit::unknown, algorithm::concurrency);
  const hit_outcome lease = decide_one(backend, make_hit(c, "conc"));
  ASSERT_EQ(lease.result, state::ok) << lease.error;
  EXPECT_EQ(decide_one(backend, make_hit(c, "conc")).result, state::over_limit);
  EXPECT_TRUE(release(backend, lease.lease));
  EXPECT_EQ(decide_one(backend, make_hit(c, "conc")).result, state::ok);
}

}  // namespace
