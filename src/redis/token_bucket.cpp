// admit::redis::token_bucket — the token bucket's parameters for the shared limiter machinery (see token_bucket.hpp
// and limiter.cpp).
#include "admit/redis/token_bucket.hpp"

#include <admit_redis_lua/token_bucket_lua.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/saturating.hpp"

namespace admit::redis {

namespace {

// The script's arithmetic is exact while every value stays below 2^53 µs: with now ~1.8e15 µs (2^50.6) and values up
// to now + 2·tol, tol <= 2^51 (~71 years) keeps it so until about the year 2100.
constexpr std::int64_t max_tol_us = std::int64_t{1} << 51;

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("admit::redis::token_bucket: " + what);
}

const script& token_bucket_script() {
  static const script s{std::string(detail::lua::token_bucket)};
  return s;
}

// The interval rounded up to whole nanoseconds (as admit::token_bucket), then up to whole microseconds; validates
// rate and burst.
std::chrono::microseconds checked_interval(rate r, std::int64_t burst) {
  if (r.is_zero()) invalid("rate must not be zero (a bucket that never refills would keep its keys forever)");
  if (burst < 1) invalid("burst must be at least 1, got " + std::to_string(burst));
  if (r.is_inf()) return std::chrono::microseconds{0};
  const std::int64_t interval_ns = std::max<std::int64_t>(1, admit::detail::ceil_ns(r.interval_ns()));
  const std::int64_t interval_us = interval_ns / 1000 + (interval_ns % 1000 != 0 ? 1 : 0);
  if (admit::detail::sat_mul(burst, interval_us) > max_tol_us) {
    invalid("burst " + std::to_string(burst) + " at rate " + r.to_string() +
            " takes more than 2^51 microseconds (~71 years) to refill");
  }
  return std::chrono::microseconds{interval_us};
}

detail::limiter_algorithm token_bucket_algorithm(rate r, std::int64_t burst, std::chrono::microseconds interval) {
  detail::limiter_algorithm a;
  a.lua = &token_bucket_script();
  a.params = {std::to_string(interval.count()), std::to_string(burst)};
  a.limit = burst;
  a.max_n = burst;
  a.inf = r.is_inf();
  a.fallback_rate = r;
  a.fallback_burst = burst;
  return a;
}

}  // namespace

token_bucket::token_bucket(client& c, std::string name, rate r, std::int64_t burst, limiter_options options)
    : token_bucket(c, std::move(name), r, burst, std::move(options), checked_interval(r, burst)) {}

token_bucket::token_bucket(client& c, std::string name, rate r, std::int64_t burst, limiter_options options,
                           std::chrono::microseconds interval)
    : limiter(c, detail::make_limiter_core("token_bucket", std::move(name), token_bucket_algorithm(r, burst, interval),
                                           std::move(options))),
      rate_(r),
      interval_(interval) {}

}  // namespace admit::redis
