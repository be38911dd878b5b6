// serve/config/rule.hpp — one rate-limit rule of `admit serve`'s configuration, as envoyproxy/ratelimit's YAML states
// it (`rate_limit: {unit, requests_per_unit, name, replaces, unlimited}` and the descriptor's `shadow_mode`,
// `detailed_metric`, `share_threshold`), plus admit's extensions (`algorithm`, `burst`, `concurrency`).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace admit::serve {

// The units envoyproxy/ratelimit accepts, with the numbers of Envoy's RateLimitResponse.RateLimit.Unit (so a value
// converts to the wire enum by a cast). `unknown` is never held by a loaded rule.
enum class unit : std::uint8_t {
  unknown = 0,
  second = 1,
  minute = 2,
  hour = 3,
  day = 4,
  month = 5,
  year = 6,
  week = 7
};

// The unit's length in seconds as envoyproxy/ratelimit counts it (a month is 30 days, a year 365 days).
[[nodiscard]] std::int64_t unit_seconds(unit u) noexcept;
// "second", "minute", ...: the YAML spelling (upper case in YAML is accepted by the loader; this is the canonical).
[[nodiscard]] std::string_view to_string(unit u) noexcept;

// How a rule counts. fixed_window is envoyproxy/ratelimit's own (windows aligned to Unix time, every hit counted even
// when over the limit), the default, so that an unmodified configuration decides exactly as it does there.
enum class algorithm : std::uint8_t { fixed_window, sliding_window, gcra, token_bucket, concurrency };
[[nodiscard]] std::string_view to_string(algorithm a) noexcept;

// What a hit over the limit costs (the extension `over_limit_hits`). count: it is charged all the same — a fixed
// window counts it (envoyproxy/ratelimit's INCRBY, the fixed window's default); a token bucket or GCRA goes into debt
// and refuses every hit, a check of 0 hits too, until the rate has repaid it. drop: it is not charged (the default of
// the other algorithms). sliding_window takes drop only; concurrency rules neither.
enum class over_limit_hits : std::uint8_t { count, drop };
[[nodiscard]] std::string_view to_string(over_limit_hits h) noexcept;

struct rate_limit_rule;
// The rule's over_limit_hits: as written, else count for fixed_window and drop for the other algorithms.
[[nodiscard]] over_limit_hits over_limit_hits_of(const rate_limit_rule& r) noexcept;

struct rate_limit_rule {
  // The descriptor path of the rule, as envoyproxy/ratelimit's FullKey: "domain.key_value.key2" (the value part is
  // present only where the YAML gives a value). Used for metrics labels and /rules.
  std::string full_key;
  std::string name;                   // rate_limit.name; empty when not given
  std::vector<std::string> replaces;  // names of rules this one replaces when both match
  bool unlimited = false;             // always OK, counts nothing
  unit per = unit::unknown;           // the window / rate unit; unknown only when unlimited or algorithm concurrency
  std::uint32_t requests_per_unit = 0;
  bool shadow_mode = false;      // over-limit answers are turned into OK (and counted as shadow-mode overrides)
  bool detailed_metric = false;  // metrics carry the request's values, not only the rule's key
  admit::serve::algorithm algorithm = algorithm::fixed_window;
  std::optional<std::uint32_t> burst;  // gcra / token_bucket only; default requests_per_unit
  // Rate rules: whether a refused hit is charged, as the YAML says; absent: the algorithm's default
  // (over_limit_hits_of).
  std::optional<admit::serve::over_limit_hits> over_limit;
  // Rate rules on Redis: each instance takes up to `prefetch` hits of a counter at a time and decides from them
  // locally (1: every hit asks Redis). Ignored in process, where no counter is remote.
  std::uint32_t prefetch = 1;
  std::uint32_t concurrency = 0;  // algorithm::concurrency only: permits held at once
  // Where in its file the rule was written (1-based), for messages and /rules.
  std::string file;
  int line = 0;
  // Dense index of the rule in its configuration, stable for the configuration's lifetime: backends keep their state
  // in a vector indexed by it (a reload builds new state; see engine/).
  std::size_t index = 0;
};

}  // namespace admit::serve
