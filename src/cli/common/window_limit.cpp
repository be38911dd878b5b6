#include "cli/common/window_limit.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/format_double.hpp"
#include "admit/detail/saturating.hpp"
#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"

namespace admit::cli {

namespace {

// The whole number rate × window stands for, if it is one (forgiving a relative 1e-12 of floating-point noise: the
// rate's interval is a double, good to ~1e-16).
std::optional<std::int64_t> whole_per_window(const admit::rate& r, std::int64_t window_ns) {
  const double pw = r.tokens_for(std::chrono::nanoseconds{window_ns});
  const double nearest = std::round(pw);
  if (!(nearest >= 1) || nearest > static_cast<double>(max_count)) return std::nullopt;
  if (std::abs(pw - nearest) > 1e-12 * nearest) return std::nullopt;
  return static_cast<std::int64_t>(nearest);
}

// "1.99", "0.5", "1.667": a fractional count for a message, with enough digits to show it is not whole.
std::string show_count(double v) {
  for (int digits = 3; digits <= 9; digits += 3) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    std::string s = buf;
    while (s.back() == '0') s.pop_back();
    if (s.back() != '.') return s;
  }
  return admit::detail::format_double(v);
}

// A duration as the period of a rate: "s" for 1s (as in "100/s"), "1.5s" (not ".5s") for 1.5s, "500ms" for 500ms.
std::string period_of(std::chrono::nanoseconds d) {
  const std::string text = format_duration(d);
  const bool one_unit = text.size() > 1 && text.front() == '1' && std::isalpha(static_cast<unsigned char>(text[1]));
  return one_unit ? text.substr(1) : text;
}

// The period of the rate as the user wrote it ("s" of "199/s", "500ms" of "5/500ms"), with its length; "s" when
// the text has none.
std::pair<std::string, double> user_period(std::string_view rate_text) {
  const auto slash = rate_text.find('/');
  if (slash != std::string_view::npos) {
    const std::string period(rate_text.substr(slash + 1));
    try {
      return {period, admit::rate::parse("1/" + period).interval_ns()};
    } catch (const std::invalid_argument&) {
    }
  }
  return {"s", 1e9};
}

// A rate giving exactly `k` per window: in the user's unit when that gives a whole count ("200/s"), else per the
// window when it is one unit ("14/s" for a 1s window), else in the user's unit when that is a short decimal
// ("0.5/min"), else "k/<window>".
std::string rate_for(std::int64_t k, std::int64_t window_ns, std::string_view rate_text) {
  const auto [period, period_ns] = user_period(rate_text);
  const auto accepted = [&](const std::string& text) {
    try {
      return whole_per_window(admit::rate::parse(text), window_ns) == k;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  const double value = static_cast<double>(k) * period_ns / static_cast<double>(window_ns);
  if (value >= 1 && value == std::round(value)) {
    const std::string text = admit::detail::format_double(value) + "/" + period;
    if (accepted(text)) return text;
  }
  const std::string per_window = std::to_string(k) + "/" + period_of(std::chrono::nanoseconds{window_ns});
  const double thousandths = std::round(value * 1000);
  if (per_window.find_first_of("0123456789", per_window.find('/')) != std::string::npos && thousandths >= 1 &&
      std::abs(value * 1000 - thousandths) <= 1e-9 * thousandths) {
    const std::string text = admit::detail::format_double(thousandths / 1000) + "/" + period;
    if (accepted(text)) return text;
  }
  return per_window;
}

// The window nearest to `window_ns` (by the count it would hold) in which `r` gives a whole number of requests.
std::optional<std::pair<std::int64_t, std::int64_t>> nearest_window(const admit::rate& r, double pw) {
  constexpr std::int64_t max_ns = max_duration_seconds * 1'000'000'000;
  const auto fits = [&](double c) -> std::optional<std::pair<std::int64_t, std::int64_t>> {
    if (c < 1 || c > static_cast<double>(max_count)) return std::nullopt;
    const double w = std::round(c * r.interval_ns());
    if (!(w >= 1) || w > static_cast<double>(max_ns)) return std::nullopt;
    const auto ns = static_cast<std::int64_t>(w);
    if (const auto k = whole_per_window(r, ns)) return std::pair{ns, *k};
    return std::nullopt;
  };
  const double up = std::max(1.0, std::ceil(pw));
  const double down = std::floor(pw);
  for (int d = 0; d < 10'000; ++d) {
    if (auto f = fits(down - d)) return f;
    if (auto f = fits(up + d)) return f;
  }
  return std::nullopt;
}

}  // namespace

std::int64_t window_limit(const admit::rate& r, std::string_view rate_text, std::chrono::nanoseconds window) {
  const std::string shown = rate_text.empty() ? r.to_string() : std::string(rate_text);
  const std::string w = format_duration(window);
  const std::string both = "--rate " + shown + " with --window " + w;
  if (window.count() <= 0) throw std::invalid_argument("invalid --window " + w + ": must be positive");
  if (r.is_inf()) throw std::invalid_argument("--rate inf with --window " + w + ": a window needs a finite limit");
  const double pw = r.tokens_for(window);
  if (pw > static_cast<double>(max_count) + 0.5) {
    throw std::invalid_argument(both + " gives a per-window limit above " + std::to_string(max_count));
  }
  if (const auto k = whole_per_window(r, window.count())) return *k;

  // Not a whole number of requests: say so, and what would fit.
  std::string message = both;
  if (pw < 1) {
    message += " allows less than one request per window (" + show_count(pw) + ")";
  } else {
    message += " gives " + show_count(pw) + " requests per window, and a window counts whole requests";
  }
  const auto lo = static_cast<std::int64_t>(std::floor(pw));
  message += "; use --rate ";
  if (lo >= 1) {
    message += rate_for(lo, window.count(), rate_text) + " or " + rate_for(lo + 1, window.count(), rate_text) + " (" +
               std::to_string(lo) + " or " + std::to_string(lo + 1) + " per " + w + " window)";
  } else {
    message += rate_for(1, window.count(), rate_text) + " (1 per " + w + " window)";
  }
  if (const auto fit = nearest_window(r, pw)) {
    message += ", or --window " + format_duration(std::chrono::nanoseconds{fit->first}) + " (" +
               std::to_string(fit->second) + " per window)";
  }
  throw std::invalid_argument(message);
}

void require_whole_window(std::chrono::nanoseconds window, std::chrono::nanoseconds granularity,
                          std::string_view unit_name, std::string_view where) {
  const std::int64_t g = granularity.count();
  if (g <= 1 || window.count() % g == 0) return;
  const std::int64_t down = window.count() / g * g;
  const std::int64_t up = down + g;
  std::string use = "use --window ";
  if (down > 0) use += format_duration(std::chrono::nanoseconds{down}) + " or ";
  use += format_duration(std::chrono::nanoseconds{up});
  throw std::invalid_argument("--window " + format_duration(window) + " is not a whole number of " +
                              std::string(unit_name) + ", which " + std::string(where) + " counts windows in; " + use);
}

void require_close_rate(const admit::rate& r, std::string_view rate_text, std::chrono::nanoseconds granularity,
                        std::string_view unit_name, std::string_view where) {
  const std::int64_t g = granularity.count();
  if (g <= 1 || r.is_inf() || r.is_zero()) return;
  const double exact = r.interval_ns();
  // The limiters' rounding: up to whole nanoseconds (at least 1), then up to whole granularity.
  const std::int64_t ns = std::max<std::int64_t>(1, admit::detail::ceil_ns(exact));
  const std::int64_t enforced = admit::detail::sat_mul(ns / g + (ns % g != 0 ? 1 : 0), g);
  // (Forgiving a relative 1e-9 of floating-point noise: 1/499.5us is slowed by exactly 0.1%.)
  if (1 - exact / static_cast<double>(enforced) <= max_rate_slowdown * (1 + 1e-9)) return;

  // The rates are shown per the user's unit ("/min" of "180000/min"), per second for a period with a count ("1/500us").
  std::pair<std::string, double> unit = user_period(rate_text);
  if (unit.first.empty() || (unit.first.front() >= '0' && unit.first.front() <= '9')) unit = {"s", 1e9};
  const auto in_user_unit = [&unit](std::int64_t interval) {
    return show_count(unit.second / static_cast<double>(interval)) + "/" + unit.first;
  };
  // "1/333us", "1/us": one request per `interval`.
  const auto one_per = [](std::int64_t interval) { return "1/" + period_of(std::chrono::nanoseconds{interval}); };
  const std::string shown = rate_text.empty() ? r.to_string() : std::string(rate_text);
  std::string message = "--rate " + shown + " would be slowed to " + in_user_unit(enforced) + ": " +
                        std::string(where) + " spaces requests a whole number of " + std::string(unit_name) +
                        " apart (" + std::to_string(enforced / g) + ", not " +
                        show_count(exact / static_cast<double>(g)) + "); use --rate ";
  const std::int64_t down = enforced - g;
  if (down > 0) {
    message +=
        one_per(down) + " or " + one_per(enforced) + " (" + in_user_unit(down) + " or " + in_user_unit(enforced) + ")";
  } else {
    message += one_per(enforced) + " (" + in_user_unit(enforced) + "), the fastest it spaces";
  }
  throw std::invalid_argument(message);
}

}  // namespace admit::cli
