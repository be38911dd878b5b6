// admit::redis::sliding_window — the sliding window counter's parameters for the shared limiter machinery (see
// sliding_window.hpp and limiter.cpp).
#include "admit/redis/sliding_window.hpp"

#include <admit_redis_lua/sliding_window_lua.hpp>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "admit/detail/saturating.hpp"

namespace admit::redis {

namespace {

// limit · window (and twice the limit times the window, after a window change) must stay below 2^53 for the script's
// products to be exact; the window itself below 2^51 µs so that now + 2·window does too.
constexpr std::int64_t max_product = std::int64_t{1} << 51;

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("admit::redis::sliding_window: " + what);
}

const script& sliding_window_script() {
  static const script s{std::string(detail::lua::sliding_window)};
  return s;
}

// The window rounded up to whole microseconds; validates limit and window.
std::chrono::microseconds checked_window(std::int64_t limit, std::chrono::nanoseconds window) {
  if (limit < 1 || limit > sliding_window::max_limit) {
    invalid("limit must be from 1 to " + std::to_string(sliding_window::max_limit) + ", got " + std::to_string(limit));
  }
  if (window.count() <= 0) invalid("window must be positive, got " + std::to_string(window.count()) + "ns");
  const std::int64_t w = window.count() / 1000 + (window.count() % 1000 != 0 ? 1 : 0);
  if (admit::detail::sat_mul(limit, w) > max_product) {
    invalid("limit " + std::to_string(limit) + " times window " + std::to_string(w) +
            "us exceeds 2^51 (the script's arithmetic must stay exact in doubles)");
  }
  return std::chrono::microseconds{w};
}

detail::limiter_algorithm sliding_window_algorithm(std::int64_t limit, std::chrono::microseconds window) {
  detail::limiter_algorithm a;
  a.lua = &sliding_window_script();
  a.params = {std::to_string(window.count()), std::to_string(limit)};
  a.limit = limit;
  a.max_n = limit;
  a.fallback_rate = rate::per(static_cast<double>(limit), window);
  a.fallback_burst = limit;
  return a;
}

}  // namespace

sliding_window::sliding_window(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
                               limiter_options options)
    : sliding_window(c, std::move(name), limit, std::move(options), checked_window(limit, window)) {}

sliding_window::sliding_window(client& c, std::string name, std::int64_t limit, limiter_options options,
                               std::chrono::microseconds window)
    : limiter(c, detail::make_limiter_core("sliding_window", std::move(name), sliding_window_algorithm(limit, window),
                                           std::move(options))),
      window_(window) {}

}  // namespace admit::redis
