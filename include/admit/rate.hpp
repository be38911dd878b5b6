// admit/rate.hpp — the rate value type: "how often", as tokens per unit of time.
//
// A rate is an immutable value: `rate::per_second(100)`, `rate::every(10ms)`, `rate::parse("100/s")`, `rate::inf()`.
// Zero is a valid rate (a limiter with rate zero spends its initial burst and never refills); infinity admits
// everything. Internally a rate is kept as the time one token takes to accrue, in (fractional) nanoseconds, because
// every limiter works in that unit; `per_second()` gives the familiar form back.
//
//   admit::rate r = admit::rate::parse("500/min");   // r.interval_ns() == 1.2e8, r.to_string() == "500/min"
//   admit::token_bucket tb{admit::rate::every(std::chrono::milliseconds(10)), 5};
//
// Thread safety: a value type; all members are const and may be used concurrently.
#pragma once

#include <charconv>
#include <chrono>
#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/format_double.hpp"

namespace admit {

class rate {
 public:
  // The zero rate: never refills.
  constexpr rate() noexcept = default;

  // `tokens_per_second` tokens accrue each second. +infinity gives `inf()`.
  // Throws std::invalid_argument (naming the value) when negative or NaN.
  static rate per_second(double tokens_per_second) {
    if (std::isnan(tokens_per_second) || tokens_per_second < 0) {
      throw std::invalid_argument("admit::rate: rate must be a non-negative number of tokens per second, got " +
                                  detail::format_double(tokens_per_second));
    }
    if (tokens_per_second == 0) return rate{};
    if (std::isinf(tokens_per_second)) return inf();
    return checked(1e9 / tokens_per_second,
                   [&] { return "per_second(" + detail::format_double(tokens_per_second) + ")"; });
  }

  // One token every `interval`. A zero interval is `inf()` (as Go's rate.Every); a negative one throws.
  template <class Rep, class Period>
  static rate every(std::chrono::duration<Rep, Period> interval) {
    const double ns = std::chrono::duration<double, std::nano>(interval).count();
    if (std::isnan(ns) || ns < 0) {
      throw std::invalid_argument("admit::rate::every: interval must not be negative, got " +
                                  detail::format_double(ns) + "ns");
    }
    if (ns == 0) return inf();
    return checked(ns, [&] { return "every(" + detail::format_double(ns) + "ns)"; });
  }

  // `count` tokens every `period` ("5 per 500ms"). Throws when count is negative/NaN or period is not positive.
  template <class Rep, class Period>
  static rate per(double count, std::chrono::duration<Rep, Period> period) {
    const double ns = std::chrono::duration<double, std::nano>(period).count();
    if (std::isnan(count) || count < 0 || !(ns > 0)) {
      throw std::invalid_argument("admit::rate::per: need count >= 0 and period > 0, got count " +
                                  detail::format_double(count) + " per " + detail::format_double(ns) + "ns");
    }
    if (count == 0) return rate{};
    if (std::isinf(count)) return inf();
    return checked(ns / count,
                   [&] { return "per(" + detail::format_double(count) + ", " + detail::format_double(ns) + "ns)"; });
  }

  // Admits everything.
  static constexpr rate inf() noexcept {
    rate r;
    r.interval_ns_ = 0;
    return r;
  }

  // Parses "N/unit" or "N/<k><unit>" with N a non-negative decimal (e.g. "100/s", "2.5/ms", "500/min", "10/h",
  // "100/day", "5/500ms") or "inf". The units: ns, us, ms, s or second, min or minute, h or hour, d or day, week,
  // month (30 days) and year (365 days); the spelled-out names also in capitals as Envoy's rate limit service writes
  // them (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR). Throws std::invalid_argument naming the input.
  static rate parse(std::string_view text) {
    if (text == "inf") return inf();
    const auto fail = [&](const char* why) {
      return std::invalid_argument("admit::rate::parse: invalid rate \"" + printable(text) + "\": " + why +
                                   " (expected a decimal count N, '/', and a unit, optionally after a whole number: "
                                   "ns, us, ms, s or second, min or minute, h or hour, d or day, week, month or year, "
                                   "such as 100/s, 2.5/ms, 10/hour, 5/500ms; or inf)");
    };
    const auto slash = text.find('/');
    if (slash == std::string_view::npos) throw fail("missing '/'");
    const std::string_view count_text = text.substr(0, slash);
    std::string_view period_text = text.substr(slash + 1);

    double count = 0;
    if (!count_text.empty() && count_text.front() == '-') throw fail("the count must be finite and >= 0");
    if (!parse_number(count_text, count)) throw fail("the count is not a plain decimal number");
    if (std::isnan(count) || std::isinf(count) || count < 0) throw fail("the count must be finite and >= 0");

    // Optional positive integer multiplier in front of the unit: "500ms".
    std::size_t digits = 0;
    while (digits < period_text.size() && period_text[digits] >= '0' && period_text[digits] <= '9') ++digits;
    std::uint64_t multiplier = 1;
    if (digits > 0) {
      const auto* first = period_text.data();
      const auto [ptr, ec] = std::from_chars(first, first + digits, multiplier);
      if (ec != std::errc{} || multiplier == 0) throw fail("the period multiplier must be a positive integer");
      period_text.remove_prefix(digits);
    }
    const double unit_ns = unit_nanoseconds(period_text);
    if (unit_ns == 0) throw fail("unknown time unit");

    const double period_ns = static_cast<double>(multiplier) * unit_ns;
    if (count == 0) return rate{};
    const double interval = period_ns / count;
    if (!(interval >= min_interval_ns)) throw fail("faster than 1e18 per second (use inf)");
    rate r = from_interval(interval);
    return r;
  }

  [[nodiscard]] constexpr bool is_inf() const noexcept { return interval_ns_ == 0; }
  [[nodiscard]] constexpr bool is_zero() const noexcept { return interval_ns_ == infinity(); }

  // Nanoseconds for one token to accrue: 0 for inf(), +infinity for the zero rate.
  [[nodiscard]] constexpr double interval_ns() const noexcept { return interval_ns_; }

  // Tokens per second: +infinity for inf(), 0 for the zero rate.
  [[nodiscard]] double per_second() const noexcept {
    if (is_inf()) return std::numeric_limits<double>::infinity();
    if (is_zero()) return 0;
    return 1e9 / interval_ns_;
  }

  // The time `tokens` tokens take to accrue, rounded up to whole nanoseconds (so that a limiter built on it never
  // admits more than the rate), saturating at nanoseconds::max(). Zero for inf(); nanoseconds::max() for NaN tokens.
  [[nodiscard]] std::chrono::nanoseconds duration_for(double tokens) const noexcept {
    if (tokens <= 0 || is_inf()) return std::chrono::nanoseconds{0};
    if (std::isnan(tokens)) return std::chrono::nanoseconds::max();
    return std::chrono::nanoseconds{detail::ceil_ns(tokens * interval_ns_)};
  }

  // The tokens that accrue in `d` (+infinity for inf() when d > 0).
  [[nodiscard]] double tokens_for(std::chrono::nanoseconds d) const noexcept {
    if (d.count() <= 0) return 0;
    if (is_inf()) return std::numeric_limits<double>::infinity();
    return static_cast<double>(d.count()) / interval_ns_;
  }

  // A readable form that parse() accepts: "inf", "0/s", "100/s", "5/min", "100/d", "1/70ms", "1/7s"... Prefers a
  // whole count per second, then per minute, per hour, per day, per ms, per µs; else one token per a whole number of
  // the largest unit that holds the interval (h, min, s, ms, us, ns); else the count per second.
  [[nodiscard]] std::string to_string() const {
    if (is_inf()) return "inf";
    if (is_zero()) return "0/s";
    struct unit {
      double ns;
      const char* name;
    };
    constexpr unit units[] = {{1e9, "s"}, {60e9, "min"}, {3600e9, "h"}, {86400e9, "d"}, {1e6, "ms"}, {1e3, "us"}};
    for (const auto& u : units) {
      // A whole count only where it parses back to exactly this interval (parse() computes period / count).
      const double count = std::round(u.ns / interval_ns_);
      if (count >= 1 && u.ns / count == interval_ns_) return detail::format_double(count) + "/" + u.name;
    }
    const double whole_ns = std::round(interval_ns_);
    if (whole_ns == interval_ns_ && whole_ns < 1e15) {
      constexpr unit periods[] = {{3600e9, "h"}, {60e9, "min"}, {1e9, "s"}, {1e6, "ms"}, {1e3, "us"}};
      for (const auto& u : periods) {
        const double k = whole_ns / u.ns;
        if (k >= 1 && k == std::round(k) && k * u.ns == whole_ns) return "1/" + detail::format_double(k) + u.name;
      }
      return "1/" + detail::format_double(whole_ns) + "ns";
    }
    // Slower than one a day and not one per whole number of hours: a count a week, month (30 days) or year (365
    // days), as parse() reads them ("10/year").
    constexpr unit long_units[] = {{604800e9, "week"}, {2592000e9, "month"}, {31536000e9, "year"}};
    for (const auto& u : long_units) {
      const double count = std::round(u.ns / interval_ns_);
      if (count >= 1 && u.ns / count == interval_ns_) return detail::format_double(count) + "/" + u.name;
    }
    // A count per second that parses back to exactly this interval: parse() computes 1e9 / count, so the nearest
    // doubles around 1e9 / interval are tried for one whose quotient is the interval again (found by
    // fuzz/rate_parse_fuzz: the plain quotient can be one ulp off, and to_string() was then not stable).
    double count = 1e9 / interval_ns_;
    for (int i = 0; i < 8 && 1e9 / count != interval_ns_; ++i) {
      count = std::nextafter(count, 1e9 / count > interval_ns_ ? std::numeric_limits<double>::infinity() : 0.0);
    }
    return detail::format_double(1e9 / count == interval_ns_ ? count : per_second()) + "/s";
  }

  friend constexpr bool operator==(const rate&, const rate&) noexcept = default;
  // Orders by speed: a faster rate compares greater.
  friend constexpr std::partial_ordering operator<=>(const rate& a, const rate& b) noexcept {
    return b.interval_ns_ <=> a.interval_ns_;
  }

 private:
  static constexpr double infinity() noexcept { return std::numeric_limits<double>::infinity(); }

  // The fastest finite rate: 1e18 per second. Faster ones are refused rather than silently losing precision (every
  // limiter rounds its interval up to whole nanoseconds anyway, so above 1e9/s they all act as 1e9/s).
  static constexpr double min_interval_ns = 1e-9;

  template <class Describe>
  static rate checked(double interval_ns, Describe describe) {
    if (!(interval_ns >= min_interval_ns)) {
      throw std::invalid_argument("admit::rate::" + describe() + ": faster than 1e18 per second (use rate::inf())");
    }
    return from_interval(interval_ns);
  }

  static rate from_interval(double ns) noexcept {
    rate r;
    r.interval_ns_ = ns;
    return r;
  }

  // Nanoseconds in one `unit` (see parse()), 0 for an unknown unit.
  static constexpr double unit_nanoseconds(std::string_view unit) noexcept {
    struct named {
      std::string_view short_name, long_name, upper_name;
      double ns;
    };
    constexpr double day = 86400e9;
    constexpr named units[] = {{"ns", "", "", 1},
                               {"us", "", "", 1e3},
                               {"ms", "", "", 1e6},
                               {"s", "second", "SECOND", 1e9},
                               {"min", "minute", "MINUTE", 60e9},
                               {"h", "hour", "HOUR", 3600e9},
                               {"d", "day", "DAY", day},
                               {"", "week", "WEEK", 7 * day},
                               {"", "month", "MONTH", 30 * day},
                               {"", "year", "YEAR", 365 * day}};
    for (const auto& u : units) {
      if (unit.empty()) break;
      if (unit == u.short_name || unit == u.long_name || unit == u.upper_name) return u.ns;
    }
    return 0;
  }

  static bool parse_number(std::string_view s, double& out) {
    if (s.empty() || s.front() == '+' || s.front() == '-') return false;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, std::chars_format::fixed);
    return ec == std::errc{} && ptr == s.data() + s.size();
  }

  // The input as it can be shown in a message: control bytes and non-ASCII escaped as \xNN, at most 80 characters.
  static std::string printable(std::string_view text) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (const char ch : text.substr(0, 80)) {
      const auto u = static_cast<unsigned char>(ch);
      if (u >= 0x20 && u < 0x7f) {
        out += ch;
      } else {
        out += "\\x";
        out += hex[u >> 4];
        out += hex[u & 0xf];
      }
    }
    if (text.size() > 80) out += "...";
    return out;
  }

  // Nanoseconds per token: 0 means infinite rate, +infinity means the zero rate.
  double interval_ns_ = infinity();
};

}  // namespace admit
