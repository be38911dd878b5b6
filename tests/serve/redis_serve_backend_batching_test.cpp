// How `admit serve`'s Redis backend (src/serve/engine/redis_backend.hpp) calls Redis, against a real redis-server
// and a 3-master Redis Cluster: hits that only add (over_limit_hits: count) as envoyproxy/ratelimit's plain commands,
// one INCRBY and one EXPIRE NX per counter of a batch, each hit answered in its order; the others as one script call
// per batch (and calls shared by requests from many threads), batches capped by max_batch; on a cluster the counters
// spread over the masters with one script call per hash slot.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/cluster.hpp"
#include "io_thread.hpp"
#include "redis_backend_testing.hpp"
#include "redis_cluster.hpp"
#include "serve/engine/redis_backend.hpp"

// In the helpers' namespace (redis_backend_testing.hpp), so that their names are found before any other file's when
// a unity build compiles several test files as one.
namespace admit::serve::testing {

using namespace std::chrono_literals;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_cluster;
using state = hit_outcome::state;

TEST_F(RedisServeBackend, CountingHitsAreEnvoyRatelimitsCommandsPerCounterOfABatch) {
  const rate_limit_rule r = rule(8, unit::minute);
  const auto now = at(minute_start + 10);
  const auto key = [](const std::string& counter) {
    return "admit:serve:fw:{" + counter + "}:60:" + std::to_string(minute_start);
  };
  (void)server.admin({"SET", key("word"), "abc"});
  (void)server.admin({"CONFIG", "RESETSTAT"});
  // One decide(): 20 counters hit once, "shared" hit 5 times 2 by 2 among them, a question (n = 0) on a counter that
  // does not exist, and a counter that holds no number.
  std::vector<hit> hits;
  for (int i = 0; i < 20; ++i) {
    hits.push_back(make_hit(r, "descriptor_" + std::to_string(i)));
    if (i % 4 == 0) hits.push_back(make_hit(r, "shared", 2));
  }
  hits.push_back(make_hit(r, "question", 0));
  hits.push_back(make_hit(r, "word"));
  const auto outcomes = decide(backend, hits, now);
  ASSERT_EQ(outcomes.size(), hits.size());
  // envoyproxy/ratelimit would send 25 INCRBY + 25 EXPIRE; here one INCRBY and one EXPIRE NX per counter, the
  // question a GET, no script.
  EXPECT_EQ(server.script_calls(), 0);
  EXPECT_EQ(server.calls("incrby"), 22);
  EXPECT_EQ(server.calls("expire"), 22);
  EXPECT_EQ(server.calls("get"), 1);
  std::vector<std::uint64_t> shared_counts;
  for (std::size_t i = 0; i + 2 < hits.size(); ++i) {
    if (hits[i].counter_key == "shared") {
      shared_counts.push_back(outcomes[i].count_after);
      EXPECT_EQ(outcomes[i].result, outcomes[i].count_after > 8 ? state::over_limit : state::ok);
    } else {
      EXPECT_EQ(outcomes[i].result, state::ok) << outcomes[i].error;
      EXPECT_EQ(outcomes[i].count_after, 1u);
      EXPECT_EQ(outcomes[i].remaining, 7u);
    }
  }
  // Each hit on a counter as if sent alone after the previous: the 5th (10 > 8) is over the limit, and counted.
  EXPECT_EQ(shared_counts, (std::vector<std::uint64_t>{2, 4, 6, 8, 10}));
  EXPECT_EQ(server.admin({"GET", key("shared")}), "10");
  const hit_outcome& question = outcomes[outcomes.size() - 2];
  EXPECT_EQ(question.result, state::ok) << question.error;
  EXPECT_EQ(question.count_after, 0u);
  EXPECT_EQ(server.admin({"EXISTS", key("question")}), "0");  // asking creates nothing
  const hit_outcome& word = outcomes.back();
  EXPECT_EQ(word.result, state::failed);  // its own failure only
  EXPECT_NE(word.error.find("not an integer"), std::string::npos) << word.error;
  EXPECT_NE(word.error.find(key("word")), std::string::npos) << "names the counter: " << word.error;
  // Every counter expires a unit after its creation: a later hit leaves its expiry as it is.
  (void)server.admin({"EXPIRE", key("shared"), "30"});
  EXPECT_EQ(decide_one(backend, make_hit(r, "shared"), now).count_after, 11u);
  EXPECT_EQ(server.admin({"TTL", key("shared")}), "30");
  (void)server.admin({"EXPIRE", key("shared"), "60"});
  for (const std::string counter : {"descriptor_0", "descriptor_19", "shared"}) {
    const int ttl = std::stoi(server.admin({"TTL", key(counter)}));
    EXPECT_GT(ttl, 50) << counter;
    EXPECT_LE(ttl, 60) << counter;
  }
}

TEST_F(RedisServeBackend, ACounterWhoseExpiryIsRefusedFailsItsHits) {
  // A user that may not run EXPIRE: a server that refuses EXPIRE ... NX (before Redis 7.0) answers the same way.
  (void)server.admin({"ACL", "SETUSER", "noexpire", "on", ">pw", "~*", "+@all", "-expire"});
  redis_backend_options o = options_for(server.url());
  o.url = "redis://noexpire:pw@" + o.url.substr(std::string("redis://").size());
  redis_backend limited(io.executor(), o);
  const rate_limit_rule r = rule(10, unit::minute);
  const hit_outcome out = decide_one(limited, make_hit(r, "e"), at(minute_start));
  EXPECT_EQ(out.result, state::failed);
  EXPECT_NE(out.error.find("EXPIRE"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("Redis 7.0"), std::string::npos) << out.error;
}

// A rule whose refused hits are not charged (over_limit_hits: drop) goes through the script.
rate_limit_rule dropping(std::uint32_t requests, unit per) {
  rate_limit_rule r = rule(requests, per);
  r.over_limit = over_limit_hits::drop;
  return r;
}

TEST_F(RedisServeBackend, OneScriptCallPerBatch) {
  const rate_limit_rule r = dropping(1000, unit::minute);
  (void)decide_one(backend, make_hit(r, "warm-up"));  // loads the script (NOSCRIPT, SCRIPT LOAD, EVALSHA)
  (void)server.admin({"CONFIG", "RESETSTAT"});
  std::vector<hit> hits;
  for (int i = 0; i < 20; ++i) hits.push_back(make_hit(r, "descriptor_" + std::to_string(i)));
  const auto outcomes = decide(backend, hits);
  for (const auto& o : outcomes) EXPECT_EQ(o.result, state::ok) << o.error;
  EXPECT_EQ(server.script_calls(), 1);

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
  EXPECT_LE(server.script_calls(), threads * per_thread);
}

TEST_F(RedisServeBackend, BatchesAreCappedByMaxBatch) {
  redis_backend_options o = options_for(server.url());
  o.max_batch = 4;
  redis_backend small(io.executor(), o);
  const rate_limit_rule r = dropping(1000, unit::minute);
  (void)decide_one(small, make_hit(r, "warm-up"));
  (void)server.admin({"CONFIG", "RESETSTAT"});
  std::vector<hit> hits;
  for (int i = 0; i < 10; ++i) hits.push_back(make_hit(r, std::string("d").append(std::to_string(i))));
  for (const auto& out : decide(small, hits)) EXPECT_EQ(out.result, state::ok) << out.error;
  EXPECT_EQ(server.script_calls(), 3);  // 4 + 4 + 2
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
  for (std::size_t i = 0; i < redis_cluster::size; ++i) calls += cluster.script_calls(i);
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

}  // namespace admit::serve::testing
