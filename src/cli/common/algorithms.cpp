// The table of rate algorithms and the checks it drives (see algorithms.hpp).
#include "cli/common/algorithms.hpp"

#include <cstdio>
#include <limits>
#include <stdexcept>

#include "admit/fixed_window.hpp"
#include "admit/sliding_log.hpp"
#include "admit/sliding_window.hpp"
#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"
#include "cli/common/values.hpp"
#include "cli/common/window_limit.hpp"

namespace admit::cli {

namespace {

constexpr unsigned bit(parameter p) noexcept { return static_cast<unsigned>(p); }
constexpr unsigned bursty = bit(parameter::burst);
constexpr unsigned windowed = bit(parameter::window);

// basic_fixed_window packs (window index) * (limit + 1) + count into one int64 and its constructor refuses a limit
// for which that overflows for some time of the clock: the largest limit it takes, found by asking it (the bound is
// monotonic in the limit), so that the bound stays the library's and is never derived a second time here.
std::int64_t fixed_window_max(std::chrono::nanoseconds window) noexcept {
  if (window.count() <= 0) return 0;
  const auto accepted = [&](std::int64_t limit) {
    try {
      [[maybe_unused]] const basic_fixed_window<std::chrono::steady_clock> probe(limit, window);
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  // accepted(lo) holds (0: none) and the answer is in [lo, hi]: at most 63 probes.
  std::int64_t lo = 0, hi = std::numeric_limits<std::int64_t>::max();
  if (accepted(hi)) return hi;
  while (lo + 1 < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (accepted(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::int64_t sliding_window_max(std::chrono::nanoseconds window) noexcept {
  return window.count() > 0 ? basic_sliding_window<std::chrono::steady_clock>::max_limit : 0;
}
std::int64_t sliding_log_max(std::chrono::nanoseconds window) noexcept {
  return window.count() > 0 ? basic_sliding_log<std::chrono::steady_clock>::max_limit : 0;
}

constexpr algorithm_info table[] = {
    {algorithm::token_bucket, "token-bucket", bursty, rate_bound::any, true, replay_mode::allow, true, nullptr},
    {algorithm::gcra, "gcra", bursty, rate_bound::any, true, replay_mode::allow, true, nullptr},
    {algorithm::pacer, "pacer", bit(parameter::slack), rate_bound::above_zero, true, replay_mode::reserve, false,
     nullptr},
    {algorithm::fixed_window, "fixed-window", windowed, rate_bound::finite, false, replay_mode::allow, true,
     fixed_window_max},
    {algorithm::sliding_window, "sliding-window", windowed, rate_bound::finite, false, replay_mode::allow, true,
     sliding_window_max},
    {algorithm::sliding_log, "sliding-log", windowed, rate_bound::finite, false, replay_mode::allow, true,
     sliding_log_max},
    {algorithm::warmup, "warmup", bit(parameter::warmup), rate_bound::finite_above_zero, true, replay_mode::allow,
     false, nullptr},
};

// The defaults of the parameters an algorithm takes and does not get.
constexpr std::int64_t default_burst = 1;
constexpr std::chrono::nanoseconds default_window = std::chrono::seconds(1);
constexpr std::int64_t default_slack = 10;
constexpr std::chrono::nanoseconds default_warmup = std::chrono::seconds(10);
constexpr double default_cold_factor = 3.0;

[[noreturn]] void refuse(const std::string& message) { throw std::invalid_argument(message); }

// "--rate 0/s does not apply to pacer: it must be above zero" when the rate is outside what `a` takes.
void check_rate(const algorithm_info& a, const replay_settings& s) {
  const bool zero = s.limit.is_zero(), inf = s.limit.is_inf();
  switch (a.rate) {
    case rate_bound::any:
      return;
    case rate_bound::above_zero:
      if (zero)
        refuse("--rate " + s.shown_rate() + " does not apply to " + std::string(a.name) + ": it must be above zero");
      return;
    case rate_bound::finite:
      if (inf) {
        refuse("--rate inf does not apply to " + std::string(a.name) + ": a window needs a finite limit");
      }
      return;
    case rate_bound::finite_above_zero:
      if (zero || inf) {
        refuse("--rate " + s.shown_rate() + " does not apply to " + std::string(a.name) +
               ": it must be finite and above zero");
      }
      return;
  }
}

}  // namespace

std::span<const algorithm_info> all_algorithms() noexcept { return table; }

const algorithm_info& info(algorithm a) noexcept {
  for (const auto& i : table) {
    if (i.algo == a) return i;
  }
  return table[0];
}

bool takes(algorithm a, parameter p) noexcept { return (info(a).takes & bit(p)) != 0; }

std::optional<algorithm> parse_algorithm(std::string_view name) noexcept {
  for (const auto& i : table) {
    if (i.name == name) return i.algo;
  }
  return std::nullopt;
}

std::string_view to_string(algorithm a) noexcept { return info(a).name; }

std::string_view to_string(replay_mode m) noexcept { return m == replay_mode::allow ? "allow" : "reserve"; }

std::string algorithm_names(bool distributed_only) {
  std::string out;
  for (const auto& i : table) {
    if (distributed_only && !i.distributed) continue;
    if (!out.empty()) out += '|';
    out += i.name;
  }
  return out;
}

bool is_window(algorithm a) noexcept { return takes(a, parameter::window); }

std::int64_t max_window_limit(algorithm a, std::chrono::nanoseconds window) noexcept {
  const auto bound = info(a).max_window_limit;
  return bound != nullptr ? bound(window) : 0;
}

std::string replay_settings::describe() const {
  std::string out(to_string(algo));
  out += " rate=" + shown_rate();
  if (takes(algo, parameter::burst)) out += " burst=" + std::to_string(burst);
  if (takes(algo, parameter::slack)) out += " slack=" + std::to_string(slack);
  if (takes(algo, parameter::window)) {
    out += " window=" + format_duration(window) + " limit=" + std::to_string(window_limit);
  }
  if (takes(algo, parameter::warmup)) {
    out += " warmup=" + format_duration(warmup);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", cold_factor);
    out += " cold-factor=";
    out += buf;
  }
  out += " mode=";
  out += to_string(mode);
  return out;
}

replay_settings resolve(const replay_config& c) {
  const algorithm_info& a = info(c.algo);
  const std::string name(a.name);
  replay_settings s;
  s.algo = c.algo;
  s.limit = c.limit;
  s.rate_text = c.rate_text;
  // Options that do not apply to the algorithm are refused first.
  const auto applies = [&](parameter p, bool given, const std::string& shown) {
    if (given && !takes(c.algo, p)) refuse(shown + " does not apply to " + name);
    return takes(c.algo, p);
  };
  const bool burst = applies(parameter::burst, c.burst.has_value(), "--burst " + std::to_string(c.burst.value_or(0)));
  const bool window = applies(parameter::window, c.window.has_value(),
                              "--window " + format_duration(c.window.value_or(std::chrono::nanoseconds(0))));
  const bool slack = applies(parameter::slack, c.slack.has_value(), "--slack " + std::to_string(c.slack.value_or(0)));
  const bool warmup = applies(parameter::warmup, c.warmup.has_value(),
                              "--warmup " + format_duration(c.warmup.value_or(std::chrono::nanoseconds(0))));
  if (c.cold_factor && !warmup) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", *c.cold_factor);
    refuse("--cold-factor " + std::string(shown) + " does not apply to " + name + " (only to warmup)");
  }

  // A count given (through resolve's own callers) outside [min, max_count].
  const auto count = [](const char* option, std::int64_t v, std::int64_t min) {
    if (v < min || v > max_count) {
      refuse("invalid " + std::string(option) + " " + std::to_string(v) + ": must be a whole number from " +
             std::to_string(min) + " to " + std::to_string(max_count));
    }
    return v;
  };
  if (burst) s.burst = count("--burst", c.burst.value_or(default_burst), 1);
  if (window) {
    s.window = c.window.value_or(default_window);
    if (s.window.count() <= 0) refuse("invalid --window " + format_duration(s.window) + ": must be positive");
  }
  check_rate(a, s);
  if (window) {
    s.window_limit = window_limit(c.limit, c.rate_text, s.window);
    // The bound each limiter's packed state imposes, checked here so that the message names the options.
    const std::int64_t most = a.max_window_limit(s.window);
    if (s.window_limit > most) {
      std::string why = "--rate " + s.shown_rate() + " with --window " + format_duration(s.window) +
                        " gives a per-window limit of " + std::to_string(s.window_limit) + ", above " + name +
                        "'s maximum of " + std::to_string(most);
      if (c.algo == algorithm::fixed_window) {
        why +=
            " for a " + format_duration(s.window) + " window (the window in nanoseconds must be larger than the limit)";
      }
      refuse(why);
    }
  }
  if (slack) s.slack = count("--slack", c.slack.value_or(default_slack), 0);
  if (warmup) {
    s.warmup = c.warmup.value_or(default_warmup);
    if (s.warmup.count() < 0) refuse("invalid --warmup " + format_duration(s.warmup) + ": must not be negative");
    s.cold_factor = c.cold_factor.value_or(default_cold_factor);
  }
  s.mode = c.mode.value_or(a.default_mode);
  if (s.mode == replay_mode::reserve && !a.can_reserve) {
    refuse("--mode reserve does not apply to " + name + ": it can only admit or reject (use --mode allow)");
  }
  return s;
}

replay_config to_config(const rate_limit_options& o, std::string_view known) {
  replay_config c;
  const auto algo = parse_algorithm(o.algorithm);
  if (!algo) throw usage_error("unknown --algorithm " + quote(o.algorithm) + ": expected one of " + std::string(known));
  c.algo = *algo;
  if (!o.rate) throw usage_error("--rate is required for " + std::string(to_string(*algo)));
  c.limit = parse_rate_option("--rate", *o.rate);
  c.rate_text = *o.rate;
  if (o.burst) c.burst = parse_count_option("--burst", *o.burst, 1, max_count);
  if (o.slack) c.slack = parse_count_option("--slack", *o.slack, 0, max_count);
  if (o.window) {
    c.window = parse_duration_option("--window", *o.window);
    if (c.window->count() == 0) throw usage_error("invalid --window " + quote(*o.window) + ": must be positive");
  }
  if (o.warmup) c.warmup = parse_duration_option("--warmup", *o.warmup);
  if (o.mode) {
    if (*o.mode == "allow") {
      c.mode = replay_mode::allow;
    } else if (*o.mode == "reserve") {
      c.mode = replay_mode::reserve;
    } else {
      throw usage_error("invalid --mode " + quote(*o.mode) + ": expected allow or reserve");
    }
  }
  return c;
}

}  // namespace admit::cli
