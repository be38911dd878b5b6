// tests/redis/support/limiter_kinds.hpp — the five distributed limiters as types for the typed contract suite
// (tests/redis/limiter/redis_limiter_contract_test.cpp and redis_limiter_contract_calls_test.cpp): each kind builds its
// algorithm with a given limit (the burst, or the window's limit) that does not refill within a test, or that refills
// every `period`.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "admit/rate.hpp"
#include "admit/redis/client/client.hpp"
#include "admit/redis/fixed_window.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/limiter_options.hpp"
#include "admit/redis/sliding_log.hpp"
#include "admit/redis/sliding_window.hpp"
#include "admit/redis/token_bucket.hpp"

namespace admit::redis::testing {

// A period no test outlasts, for the window algorithms: 30 days (windows are aligned on the Unix epoch, so a boundary
// passes during a one-second test with a probability of ~4e-7). sliding_window's limit · window must stay within
// max_span_us = 2^51 µs (parameters.hpp): 2^51 µs / 30 days = 868.7, so its make() takes limits up to 868.
inline constexpr std::chrono::hours long_window{24 * 30};
// The rate algorithms' equivalent: one token an hour.
inline const rate hourly = rate::per(1, std::chrono::hours(1));

// Rate algorithms: `limit` is the burst; "refills every period" is a rate of one token per period.
template <class Limiter>
struct rate_kind {
  using type = Limiter;
  static constexpr bool has_rate = true;
  static type make(client& c, const std::string& name, std::int64_t limit, limiter_options o = {}) {
    return type(c, name, hourly, limit, std::move(o));
  }
  // The average time make()'s limiter takes to refill one unit: an hour, whatever the burst.
  static std::chrono::nanoseconds refill_interval(std::int64_t /*limit*/) { return std::chrono::hours(1); }
  static type make_refilling(client& c, const std::string& name, std::int64_t limit, std::chrono::nanoseconds period,
                             limiter_options o = {}) {
    return type(c, name, rate::every(period), limit, std::move(o));
  }
};

// Window algorithms: `limit` per window; "refills every period" is a window of that length.
template <class Limiter>
struct window_kind {
  using type = Limiter;
  static constexpr bool has_rate = false;
  static type make(client& c, const std::string& name, std::int64_t limit, limiter_options o = {}) {
    return type(c, name, limit, long_window, std::move(o));
  }
  // The average time make()'s limiter takes to refill one unit: the window over the limit.
  static std::chrono::nanoseconds refill_interval(std::int64_t limit) {
    return std::chrono::nanoseconds(long_window) / limit;
  }
  static type make_refilling(client& c, const std::string& name, std::int64_t limit, std::chrono::nanoseconds period,
                             limiter_options o = {}) {
    return type(c, name, limit, period, std::move(o));
  }
};

struct gcra_kind : rate_kind<gcra> {};
struct token_bucket_kind : rate_kind<token_bucket> {};
struct fixed_window_kind : window_kind<fixed_window> {};
struct sliding_window_kind : window_kind<sliding_window> {};
struct sliding_log_kind : window_kind<sliding_log> {};

// GoogleTest's names for the typed suites' instances.
struct kind_names {
  template <class T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, gcra_kind>) return "gcra";
    if constexpr (std::is_same_v<T, token_bucket_kind>) return "token_bucket";
    if constexpr (std::is_same_v<T, fixed_window_kind>) return "fixed_window";
    if constexpr (std::is_same_v<T, sliding_window_kind>) return "sliding_window";
    if constexpr (std::is_same_v<T, sliding_log_kind>) return "sliding_log";
    return "unknown";
  }
};

// The five kinds, for TYPED_TEST_SUITE(..., limiter_kinds, kind_names).
using limiter_kinds =
    ::testing::Types<gcra_kind, token_bucket_kind, fixed_window_kind, sliding_window_kind, sliding_log_kind>;

}  // namespace admit::redis::testing
