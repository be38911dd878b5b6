// admit::redis::sliding_log — the sliding log's parameters for the shared limiter machinery (see
// sliding_log.hpp and limiter.cpp).
#include "admit/redis/sliding_log.hpp"

#include <admit_redis_lua/sliding_log_lua.hpp>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace admit::redis {

namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("admit::redis::sliding_log: " + what);
}

const script& sliding_log_script() {
  static const script s{std::string(detail::lua::sliding_log)};
  return s;
}

// The window rounded up to whole microseconds; validates limit and window.
std::chrono::microseconds checked_window(std::int64_t limit, std::chrono::nanoseconds window) {
  if (limit < 1 || limit > sliding_log::max_limit) {
    invalid("limit must be from 1 to " + std::to_string(sliding_log::max_limit) + ", got " + std::to_string(limit));
  }
  if (window.count() <= 0) invalid("window must be positive, got " + std::to_string(window.count()) + "ns");
  const std::int64_t w = window.count() / 1000 + (window.count() % 1000 != 0 ? 1 : 0);
  if (w > sliding_log::max_window.count()) {
    invalid("window " + std::to_string(w) + "us exceeds 2^51 us (~71 years; the script's arithmetic must stay exact)");
  }
  return std::chrono::microseconds{w};
}

detail::limiter_algorithm sliding_log_algorithm(std::int64_t limit, std::chrono::microseconds window) {
  detail::limiter_algorithm a;
  a.lua = &sliding_log_script();
  a.params = {std::to_string(window.count()), std::to_string(limit)};
  a.limit = limit;
  a.max_n = limit;
  a.fallback_rate = rate::per(static_cast<double>(limit), window);
  a.fallback_burst = limit;
  return a;
}

}  // namespace

sliding_log::sliding_log(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
                         limiter_options options)
    : sliding_log(c, std::move(name), limit, std::move(options), checked_window(limit, window)) {}

sliding_log::sliding_log(client& c, std::string name, std::int64_t limit, limiter_options options,
                         std::chrono::microseconds window)
    : limiter(c, detail::make_limiter_core("sliding_log", std::move(name), sliding_log_algorithm(limit, window),
                                           std::move(options))),
      window_(window) {}

}  // namespace admit::redis
