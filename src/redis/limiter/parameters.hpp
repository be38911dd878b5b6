// src/redis/limiter/parameters.hpp — the parameter checks and script arguments the distributed algorithms share
// (private to the admit_redis library): rate algorithms (gcra, token_bucket) take a rate and a burst, window
// algorithms (fixed_window, sliding_window, sliding_log) a limit per window; every limiter takes limiter_options.
// Every message starts "admit::redis::<algorithm>: " and names the bad value.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "admit/rate.hpp"
#include "admit/redis/client/script.hpp"
#include "admit/redis/limiter.hpp"
#include "admit/redis/limiter_options.hpp"

namespace admit::redis::detail {

// The scripts' arithmetic is exact while every value stays below 2^53 µs: with now ~1.8e15 µs (2^50.6) and values up
// to now + 2·span, a span up to 2^51 µs (~71 years) keeps it so until about the year 2100.
inline constexpr std::int64_t max_span_us = std::int64_t{1} << 51;

// 1/r rounded up to whole nanoseconds (as the local limiters), then up to whole microseconds (the scripts' unit);
// 0 for rate inf. Throws std::invalid_argument for a zero rate (a quota that never refills would keep its keys
// forever), burst < 1, or burst · interval above max_span_us.
std::chrono::microseconds checked_interval(std::string_view algorithm, rate r, std::int64_t burst);

// `window` rounded up to whole microseconds. Throws std::invalid_argument for limit outside [1, max_limit], window <=
// 0, and a window above max_span_us, or, with `bound_product`, limit · window above max_span_us.
std::chrono::microseconds checked_window(std::string_view algorithm, std::int64_t limit, std::int64_t max_limit,
                                         std::chrono::nanoseconds window, bool bound_product);

// Throws std::invalid_argument naming the first bad value of `options` for a limiter of `algorithm`: timeout not
// positive and finite, failure_retry_after < 0, fallback_share outside (0, 1], fallback_max_keys, lease_max_keys or
// max_batch 0, lease < 0 or (when > 1) above algorithm.max_n, lease_ttl <= 0 with leasing on; and `name` empty or
// with '{' or '}'. (The breaker's options are checked by circuit_breaker.)
void check_limiter_options(std::string_view algorithm_name, const std::string& name, const limiter_algorithm& algorithm,
                           const limiter_options& options);

// A rate algorithm's arguments (ARGV[4..] = interval µs, burst) and its local fallback (a GCRA at r, burst).
limiter_algorithm rate_algorithm(const script& lua, rate r, std::int64_t burst, std::chrono::microseconds interval);

// A window algorithm's arguments (ARGV[4..] = window µs, limit) and its local fallback (a GCRA of limit per window,
// burst limit).
limiter_algorithm window_algorithm(const script& lua, std::int64_t limit, std::chrono::microseconds window);

}  // namespace admit::redis::detail
