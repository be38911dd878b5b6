// tests/serve/redis_backend_testing.hpp — what the tests of `admit serve`'s Redis backend share: a hit of a rule, and
// the backend's asynchronous decide as a blocking call; and for the tests of redis_serve_backend*_test.cpp, a rule of
// each algorithm, times at the start of a minute, release as a blocking call, the backend's options for a URL, and the
// fixture `RedisServeBackend` (a backend on a redis-server of its own).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "io_thread.hpp"
#include "redis_server.hpp"
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
  serve::decide(b, std::move(hits), now, [&p](std::vector<hit_outcome> o) { p.set_value(std::move(o)); });
  return p.get_future().get();
}

// One hit's outcome.
inline hit_outcome decide_one(redis_backend& b, const hit& h,
                              std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) {
  auto o = decide(b, {h}, now);
  EXPECT_EQ(o.size(), 1u);
  return o.at(0);
}

// A Unix time at the start of a minute (and of an hour): 1'700'002'800 = 28'333'380 minutes.
inline constexpr std::int64_t minute_start = 1'700'002'800;
inline std::chrono::system_clock::time_point at(std::int64_t unix_seconds) {
  return std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds));
}

// A rule of domain.key_value: `requests` per `per` with algorithm `a`, or, for algorithm::concurrency, `requests`
// at once.
inline rate_limit_rule rule(std::uint32_t requests, unit per, algorithm a = algorithm::fixed_window) {
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

// b.release(lease), waited for: whether the lease was held.
// How the release of `lease` ended.
inline release_result release_of(redis_backend& b, std::string lease) {
  std::promise<release_result> p;
  b.release(std::move(lease), [&p](release_result r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}
// Whether it released the lease.
inline bool release(redis_backend& b, std::string lease) {
  return release_of(b, std::move(lease)).result == release_result::state::released;
}

// The options of a backend on `url`.
inline redis_backend_options options_for(const std::string& url) {
  using namespace std::chrono_literals;
  redis_backend_options o;
  o.url = url;
  o.timeout = 5s;  // generous: a loaded CI machine can stall a call past a second; the failure tests set their own
  return o;
}

// A backend on a redis-server of its own, run on an I/O thread.
class RedisServeBackend : public ::testing::Test {
 protected:
  admit::redis::testing::io_thread io;
  admit::redis::testing::redis_server server;
  redis_backend backend{io.executor(), options_for(server.url())};
};

}  // namespace admit::serve::testing
