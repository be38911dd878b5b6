// admit::redis::gcra — the GCRA's parameters for the shared limiter machinery (see gcra.hpp and limiter.cpp).
#include "admit/redis/gcra.hpp"

#include <admit_redis_lua/gcra_lua.hpp>
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

// The script's arithmetic is exact while every value stays below 2^53 µs; with now ~1.8e15 µs (2^50.6) and values up
// to now + 2·tau, tau <= 2^51 (~71 years) keeps it so until about the year 2100.
constexpr std::int64_t max_tau_us = std::int64_t{1} << 51;

[[noreturn]] void invalid(const std::string& what) { throw std::invalid_argument("admit::redis::gcra: " + what); }

const script& gcra_script() {
  static const script s{std::string(detail::lua::gcra)};
  return s;
}

// T rounded up to whole nanoseconds (as admit::gcra), then up to whole microseconds; validates rate and burst.
std::chrono::microseconds checked_interval(rate r, std::int64_t burst) {
  if (r.is_zero()) invalid("rate must not be zero (a quota that never refills would keep its keys forever)");
  if (burst < 1) invalid("burst must be at least 1, got " + std::to_string(burst));
  if (r.is_inf()) return std::chrono::microseconds{0};
  const std::int64_t interval_ns = std::max<std::int64_t>(1, admit::detail::ceil_ns(r.interval_ns()));
  const std::int64_t interval_us = interval_ns / 1000 + (interval_ns % 1000 != 0 ? 1 : 0);
  if (admit::detail::sat_mul(burst, interval_us) > max_tau_us) {
    invalid("burst " + std::to_string(burst) + " at rate " + r.to_string() +
            " spans more than 2^51 microseconds (~71 years)");
  }
  return std::chrono::microseconds{interval_us};
}

detail::limiter_algorithm gcra_algorithm(rate r, std::int64_t burst, std::chrono::microseconds t) {
  detail::limiter_algorithm a;
  a.lua = &gcra_script();
  a.params = {std::to_string(t.count()), std::to_string(burst)};
  a.limit = burst;
  a.max_n = burst;
  a.inf = r.is_inf();
  a.fallback_rate = r;
  a.fallback_burst = burst;
  return a;
}

}  // namespace

gcra::gcra(client& c, std::string name, rate r, std::int64_t burst, limiter_options options)
    : gcra(c, std::move(name), r, burst, std::move(options), checked_interval(r, burst)) {}

gcra::gcra(client& c, std::string name, rate r, std::int64_t burst, limiter_options options,
           std::chrono::microseconds t)
    : limiter(c, detail::make_limiter_core("gcra", std::move(name), gcra_algorithm(r, burst, t), std::move(options))),
      rate_(r),
      interval_(t) {}

}  // namespace admit::redis
