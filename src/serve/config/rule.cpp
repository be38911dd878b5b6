#include "serve/config/rule.hpp"

namespace admit::serve {

std::int64_t unit_seconds(unit u) noexcept {
  switch (u) {
    case unit::second:
      return 1;
    case unit::minute:
      return 60;
    case unit::hour:
      return 60 * 60;
    case unit::day:
      return 24 * 60 * 60;
    case unit::week:
      return 7 * 24 * 60 * 60;
    case unit::month:
      return 30 * 24 * 60 * 60;
    case unit::year:
      return 365 * 24 * 60 * 60;
    case unit::unknown:
      break;
  }
  return 0;
}

std::string_view to_string(unit u) noexcept {
  switch (u) {
    case unit::second:
      return "second";
    case unit::minute:
      return "minute";
    case unit::hour:
      return "hour";
    case unit::day:
      return "day";
    case unit::week:
      return "week";
    case unit::month:
      return "month";
    case unit::year:
      return "year";
    case unit::unknown:
      break;
  }
  return "unknown";
}

std::string_view to_string(algorithm a) noexcept {
  switch (a) {
    case algorithm::fixed_window:
      return "fixed_window";
    case algorithm::sliding_window:
      return "sliding_window";
    case algorithm::gcra:
      return "gcra";
    case algorithm::token_bucket:
      return "token_bucket";
    case algorithm::concurrency:
      return "concurrency";
  }
  return "unknown";
}

std::string_view to_string(over_limit_hits h) noexcept { return h == over_limit_hits::count ? "count" : "drop"; }

over_limit_hits over_limit_hits_of(const rate_limit_rule& r) noexcept {
  if (r.over_limit) return *r.over_limit;
  return r.algorithm == algorithm::fixed_window ? over_limit_hits::count : over_limit_hits::drop;
}

}  // namespace admit::serve
