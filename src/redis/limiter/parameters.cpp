// The parameter checks and script arguments the distributed algorithms share (see parameters.hpp).
#include "parameters.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/saturating.hpp"
#include "hash_tag.hpp"

namespace admit::redis::detail {

namespace {

[[noreturn]] void invalid(std::string_view algorithm, const std::string& what) {
  std::string message = "admit::redis::";
  message.append(algorithm).append(": ").append(what);
  throw std::invalid_argument(message);
}

// Whole microseconds, rounded up, of a positive count of nanoseconds.
std::int64_t ceil_us(std::int64_t ns) { return ns / 1000 + (ns % 1000 != 0 ? 1 : 0); }

}  // namespace

std::chrono::microseconds checked_interval(std::string_view algorithm, rate r, std::int64_t burst) {
  if (r.is_zero()) {
    invalid(algorithm, "rate must not be zero (a quota that never refills would keep its keys forever)");
  }
  if (burst < 1) invalid(algorithm, "burst must be at least 1, got " + std::to_string(burst));
  if (r.is_inf()) return std::chrono::microseconds{0};
  const std::int64_t interval_us = ceil_us(std::max<std::int64_t>(1, admit::detail::ceil_ns(r.interval_ns())));
  if (admit::detail::sat_mul(burst, interval_us) > max_span_us) {
    invalid(algorithm, "burst " + std::to_string(burst) + " at rate " + r.to_string() +
                           " spans more than 2^51 microseconds (~71 years)");
  }
  return std::chrono::microseconds{interval_us};
}

std::chrono::microseconds checked_window(std::string_view algorithm, std::int64_t limit, std::int64_t max_limit,
                                         std::chrono::nanoseconds window, bool bound_product) {
  if (limit < 1 || limit > max_limit) {
    invalid(algorithm, "limit must be from 1 to " + std::to_string(max_limit) + ", got " + std::to_string(limit));
  }
  if (window.count() <= 0) {
    invalid(algorithm, "window must be positive, got " + std::to_string(window.count()) + "ns");
  }
  const std::int64_t w = ceil_us(window.count());
  if (w > max_span_us) {
    invalid(algorithm, "window " + std::to_string(w) +
                           "us exceeds 2^51 us (~71 years; the script's arithmetic must "
                           "stay exact)");
  }
  if (bound_product && admit::detail::sat_mul(limit, w) > max_span_us) {
    invalid(algorithm, "limit " + std::to_string(limit) + " times window " + std::to_string(w) +
                           "us exceeds 2^51 (the script's arithmetic must stay exact in doubles)");
  }
  return std::chrono::microseconds{w};
}

void check_limiter_options(std::string_view algorithm_name, const std::string& name, const limiter_algorithm& algorithm,
                           const limiter_options& options) {
  const auto invalid_option = [&](const std::string& what) { invalid(algorithm_name, "options." + what); };
  check_tag_name(algorithm_name, name);
  if (!(options.timeout > std::chrono::nanoseconds::zero()) || options.timeout == std::chrono::nanoseconds::max()) {
    invalid_option("timeout must be positive and finite, got " + std::to_string(options.timeout.count()) + "ns");
  }
  if (options.failure_retry_after < std::chrono::nanoseconds::zero()) {
    invalid_option("failure_retry_after must not be negative, got " +
                   std::to_string(options.failure_retry_after.count()) + "ns");
  }
  if (!(options.fallback_share > 0 && options.fallback_share <= 1)) {
    invalid_option("fallback_share must be in (0, 1], got " + std::to_string(options.fallback_share));
  }
  if (options.fallback_max_keys < 1) invalid_option("fallback_max_keys must be at least 1, got 0");
  if (options.lease < 0) invalid_option("lease must not be negative, got " + std::to_string(options.lease));
  if (options.lease > 1 && options.lease > algorithm.max_n) {
    invalid_option("lease " + std::to_string(options.lease) + " exceeds the limit " + std::to_string(algorithm.max_n));
  }
  if (options.lease > 1 && options.lease_ttl <= std::chrono::nanoseconds::zero()) {
    invalid_option("lease_ttl must be positive, got " + std::to_string(options.lease_ttl.count()) + "ns");
  }
  if (options.lease_max_keys < 1) invalid_option("lease_max_keys must be at least 1, got 0");
  if (options.max_batch < 1) invalid_option("max_batch must be at least 1, got 0");
  if (options.charge_refused && !algorithm.charges_refused) {
    invalid_option("charge_refused is offered by gcra and token_bucket only");
  }
}

limiter_algorithm rate_algorithm(const script& lua, rate r, std::int64_t burst, std::chrono::microseconds interval) {
  limiter_algorithm a;
  a.lua = &lua;
  a.params = {std::to_string(interval.count()), std::to_string(burst), "0"};
  a.charges_refused = true;
  a.refill_us = interval.count();
  a.limit = burst;
  a.max_n = burst;
  a.inf = r.is_inf();
  a.fallback_rate = r;
  a.fallback_burst = burst;
  return a;
}

limiter_algorithm window_algorithm(const script& lua, std::int64_t limit, std::chrono::microseconds window) {
  limiter_algorithm a;
  a.lua = &lua;
  a.params = {std::to_string(window.count()), std::to_string(limit)};
  a.limit = limit;
  a.max_n = limit;
  a.fallback_rate = rate::per(static_cast<double>(limit), window);
  a.fallback_burst = limit;
  return a;
}

}  // namespace admit::redis::detail
