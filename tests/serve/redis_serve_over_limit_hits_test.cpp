// over_limit_hits (count | drop) on `admit serve`'s Redis backend, against a real redis-server: a token bucket and a
// GCRA charged with a cost above the burst refuse a check of 0 (an hour of debt: no clock can repay it during the
// test), and say when the debt is repaid; drop charges nothing, and its refusal says when the hit could pass; the fixed
// window's drop keeps only what fits, in keys of its own, and deletes a counter it would have created over the limit;
// an override of a dropping rule is counted as envoyproxy/ratelimit counts it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "redis_backend_testing.hpp"
#include "serve/engine/redis_backend.hpp"

namespace admit::serve::testing {

using state = hit_outcome::state;

TEST_F(RedisServeBackend, ACountingBudgetGoesIntoDebtAndRefusesACheck) {
  for (const algorithm a : {algorithm::gcra, algorithm::token_bucket}) {
    SCOPED_TRACE(std::string(to_string(a)));
    rate_limit_rule r = rule(2, unit::hour, a);
    r.over_limit = over_limit_hits::count;
    const std::string user = "user_" + std::string(to_string(a));
    EXPECT_EQ(decide_one(backend, make_hit(r, user, 3)).result, state::over_limit);
    const hit_outcome check = decide_one(backend, make_hit(r, user, 0));
    EXPECT_EQ(check.result, state::over_limit);
    EXPECT_EQ(check.remaining, 0U);
    // Refused until the debt is repaid: one hit owed, 30 minutes at 2 an hour (not the 90 until it is full again).
    EXPECT_GE(check.reset_after, 1799s);
    EXPECT_LE(check.reset_after, 1800s);
    EXPECT_EQ(decide_one(backend, make_hit(r, user, 1)).result, state::over_limit);
    // Its keys are apart from those of the same limit that drops refused hits.
    EXPECT_EQ(server.admin({"EXISTS", "{admit:serve:" + std::string(to_string(a)) + ":2/hour:2:count}:" + user}), "1");

    rate_limit_rule dropping = rule(2, unit::hour, a);
    const hit_outcome never = decide_one(backend, make_hit(dropping, user, 3));
    EXPECT_EQ(never.result, state::over_limit);
    EXPECT_EQ(never.reset_after, 3600s);  // more than the burst never passes: one unit, as a window's refusal
    EXPECT_EQ(decide_one(backend, make_hit(dropping, user, 0)).result, state::ok);
    EXPECT_EQ(decide_one(backend, make_hit(dropping, user, 2)).result, state::ok);
    const hit_outcome next = decide_one(backend, make_hit(dropping, user, 1));
    EXPECT_EQ(next.result, state::over_limit);
    EXPECT_GE(next.reset_after, 1799s);  // one refilled in 30 minutes (60 until the bucket is full)
    EXPECT_LE(next.reset_after, 1800s);
    const hit_outcome none = decide_one(backend, make_hit(rule(0, unit::hour, a), user, 1));  // a limit of 0
    EXPECT_EQ(none.result, state::over_limit);
    EXPECT_EQ(none.reset_after, 3600s);
  }
}

TEST_F(RedisServeBackend, TheFixedWindowsDropCountsOnlyWhatFits) {
  rate_limit_rule r = rule(10, unit::hour);
  r.over_limit = over_limit_hits::drop;
  const auto now = at(minute_start + 5);
  const std::string key = "admit:serve:fwd:{u}:3600:" + std::to_string(minute_start);
  EXPECT_EQ(decide_one(backend, make_hit(r, "u", 15), now).result, state::over_limit);
  EXPECT_EQ(server.admin({"EXISTS", key}), "0") << "a counter made only to be over the limit is deleted";
  EXPECT_EQ(decide_one(backend, make_hit(r, "u", 0), now).result, state::ok);
  const hit_outcome all = decide_one(backend, make_hit(r, "u", 10), now);
  EXPECT_EQ(all.result, state::ok);
  EXPECT_EQ(all.remaining, 0U);
  const hit_outcome over = decide_one(backend, make_hit(r, "u", 1), now);
  EXPECT_EQ(over.result, state::over_limit);
  EXPECT_EQ(over.count_after, 11U);  // what it would have made
  EXPECT_EQ(server.admin({"GET", key}), "10");
  const int ttl = std::stoi(server.admin({"TTL", key}));
  EXPECT_GT(ttl, 0) << "the counter expires with its window";
  EXPECT_LE(ttl, 3600);
  EXPECT_EQ(decide_one(backend, make_hit(r, "u", 0), now).result, state::ok);

  // An override: every hit counted, on envoyproxy/ratelimit's key.
  hit o = make_hit(r, "u", 5);
  o.override_limit = limit_override{3, unit::hour};
  EXPECT_EQ(decide_one(backend, o, now).result, state::over_limit);
  o.n = 0;
  EXPECT_EQ(decide_one(backend, o, now).result, state::over_limit);
  EXPECT_EQ(server.admin({"GET", "admit:serve:fw:{u}:3600:" + std::to_string(minute_start)}), "5");

  // The default (count): envoyproxy/ratelimit's INCRBY.
  const rate_limit_rule counting = rule(10, unit::hour);
  EXPECT_EQ(decide_one(backend, make_hit(counting, "c", 15), now).result, state::over_limit);
  EXPECT_EQ(decide_one(backend, make_hit(counting, "c", 0), now).result, state::over_limit);
}

}  // namespace admit::serve::testing
