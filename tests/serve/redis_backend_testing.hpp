// tests/serve/redis_backend_testing.hpp — what the tests of `admit serve`'s Redis backend share: a hit of a rule, and
// the backend's asynchronous decide as a blocking call.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "serve/config/configuration.hpp"
#include "serve/engine/redis_backend.hpp"

namespace admit::serve::testing {

// `n` hits of rule `r` on the counter `key`.
inline hit make_hit(const rate_limit_rule& r, std::string key, std::uint32_t n = 1) {
  hit h;
  h.rule = &r;
  h.counter_key = std::move(key);
  h.n = n;
  return h;
}

// b.decide(hits, now), waited for.
inline std::vector<hit_outcome> decide(redis_backend& b, std::vector<hit> hits,
                                       std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) {
  std::promise<std::vector<hit_outcome>> p;
  b.decide(std::move(hits), now, [&p](std::vector<hit_outcome> o) { p.set_value(std::move(o)); });
  return p.get_future().get();
}

// One hit's outcome.
inline hit_outcome decide_one(redis_backend& b, const hit& h,
                              std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) {
  auto o = decide(b, {h}, now);
  EXPECT_EQ(o.size(), 1u);
  return o.at(0);
}

}  // namespace admit::serve::testing
