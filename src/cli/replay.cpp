#include "cli/replay.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/fixed_window.hpp"
#include "admit/gcra.hpp"
#include "admit/pacer.hpp"
#include "admit/reservation.hpp"
#include "admit/sliding_log.hpp"
#include "admit/sliding_window.hpp"
#include "admit/token_bucket.hpp"
#include "admit/warmup.hpp"
#include "cli/duration.hpp"
#include "cli/window_limit.hpp"

namespace admit::cli {

namespace {

// The virtual clock of a replay. Limiters are driven through their *_at members; now() answers the replay's current
// virtual time for the few places that read the clock (a constructor that notes its start, for instance). The time
// is per thread, so independent replays may run on different threads.
struct replay_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<replay_clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return time_point{duration{current_ns()}}; }
  static std::int64_t& current_ns() noexcept {
    thread_local std::int64_t ns = 0;
    return ns;
  }
};
static_assert(steady_clock_like<replay_clock>);

// Trace time zero on the replay clock: ten days in, far from the epoch (where some limiters keep "long ago").
constexpr std::int64_t replay_base_ns = 864'000LL * 1'000'000'000;

std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? std::numeric_limits<std::int64_t>::max() : 0;
  return r;
}

struct algorithm_info {
  algorithm algo;
  std::string_view name;
};

constexpr algorithm_info algorithms[] = {
    {algorithm::token_bucket, "token-bucket"},
    {algorithm::gcra, "gcra"},
    {algorithm::pacer, "pacer"},
    {algorithm::fixed_window, "fixed-window"},
    {algorithm::sliding_window, "sliding-window"},
    {algorithm::sliding_log, "sliding-log"},
    {algorithm::warmup, "warmup"},
};

const algorithm_info& info(algorithm a) noexcept {
  for (const auto& i : algorithms) {
    if (i.algo == a) return i;
  }
  return algorithms[0];
}

// --- Adapters: one replay_limiter over any limiter that follows the house conventions ------------------------------

using tp = replay_clock::time_point;

tp at(std::int64_t t_ns) noexcept { return tp{std::chrono::nanoseconds{t_ns}}; }

// The delay a reservation (a token bucket's, a pacer's or a warm-up limiter's) stands for, relative to `now`; nullopt
// when it can never be served.
std::optional<std::int64_t> reservation_delay(const basic_reservation<replay_clock>& r, tp now) {
  if (!r.ok()) return std::nullopt;
  const auto d = std::chrono::duration_cast<std::chrono::nanoseconds>(r.delay_from(now));
  if (d == std::chrono::nanoseconds::max()) return std::nullopt;
  return std::max<std::int64_t>(0, d.count());
}

template <class L>
concept can_reserve_n = requires(L& l, tp now, std::int64_t n) {
  l.reserve_at(now, n);
};
template <class L>
concept can_reserve_1 = requires(L& l, tp now) {
  l.reserve_at(now);
};
template <class L>
concept can_reserve = can_reserve_n<L> || can_reserve_1<L>;

// GCRA has no reserve_at, yet a reservation is exactly a decision at the time point the request will fit. Its whole
// state is s = TAT - tau (tau = burst*T), and a decision at t reads nothing but s and t: n (<= burst) fits iff
// max(s, t - tau) + n*T <= t, and admitting it sets s to max(s, t - tau) + n*T. A reservation at `now` would set s to
// r = max(s, now - tau) + n*T and let the request go at r (x/time/rate's ReserveN on a token bucket: the same). When
// n does not fit at `now`, decide_at(now) changes nothing and reports retry_after = r - now; at r the request fits
// (r - tau <= s, as n*T <= tau) and admitting it sets s to r: the state the reservation would leave. Later arrivals,
// at times before r, are then judged against that state exactly as against the reservation: GCRA keeps no memory of
// the latest time point seen. A request that can never fit (n > burst, or rate zero once spent) has retry_after ==
// max: rejected, as a reservation would be. (Queueing the arrival until r instead would let later arrivals take the
// capacity first: not a reservation. The windows have no such exact equivalent: they count per window.)
template <class L>
inline constexpr bool reserves_by_deciding_later = false;
template <>
inline constexpr bool reserves_by_deciding_later<basic_gcra<replay_clock>> = true;

template <class L>
class adapter final : public replay_limiter {
 public:
  template <class... Args>
  adapter(replay_mode mode, std::int64_t base_ns, Args&&... args)
      : mode_(mode), base_ns_(base_ns), limiter_(make(base_ns, std::forward<Args>(args)...)) {}

  outcome offer(std::int64_t t_ns, std::int64_t n) override {
    const std::int64_t now_ns = base_ns_ + t_ns;
    replay_clock::current_ns() = now_ns;
    const tp now = at(now_ns);
    if (mode_ == replay_mode::allow) {
      const decision d = limiter_.decide_at(now, n);
      return {d.admitted, 0};
    }
    if constexpr (can_reserve<L>) {
      std::optional<std::int64_t> delay;
      if constexpr (can_reserve_n<L>) {
        delay = reservation_delay(limiter_.reserve_at(now, n), now);
      } else {
        // A limiter that reserves one slot at a time (a pacer): n tokens are n consecutive slots; the request may
        // start when the last one comes.
        for (std::int64_t i = 0; i < n; ++i) {
          delay = reservation_delay(limiter_.reserve_at(now), now);
          if (!delay) break;
        }
      }
      if (!delay) return {false, 0};
      return {true, *delay};
    } else if constexpr (reserves_by_deciding_later<L>) {
      const decision d = limiter_.decide_at(now, n);
      if (d.admitted) return {true, 0};
      if (d.retry_after == std::chrono::nanoseconds::max()) return {false, 0};
      // GCRA saturates at the end of the clock's range: a fit there, or beyond, never comes.
      const std::int64_t wait = d.retry_after.count();
      std::int64_t ready = 0;
      if (__builtin_add_overflow(now_ns, wait, &ready) || ready == std::numeric_limits<std::int64_t>::max()) {
        return {false, 0};
      }
      if (!limiter_.decide_at(at(ready), n).admitted) return {false, 0};  // cannot happen (see above)
      return {true, wait};
    } else {
      return {false, 0};  // resolve() refuses reserve mode for these
    }
  }

 private:
  template <class... Args>
  static L make(std::int64_t base_ns, Args&&... args) {
    replay_clock::current_ns() = base_ns;
    return L(std::forward<Args>(args)...);
  }

  replay_mode mode_;
  std::int64_t base_ns_;
  L limiter_;
};
template <class L>
constexpr bool reservable() {
  return can_reserve<L> || reserves_by_deciding_later<L>;
}

bool algorithm_can_reserve(algorithm a) noexcept {
  switch (a) {
    case algorithm::token_bucket:
      return reservable<basic_token_bucket<replay_clock>>();
    case algorithm::gcra:
      return reservable<basic_gcra<replay_clock>>();
    case algorithm::pacer:
      return reservable<basic_pacer<replay_clock>>();
    case algorithm::fixed_window:
      return reservable<basic_fixed_window<replay_clock>>();
    case algorithm::sliding_window:
      return reservable<basic_sliding_window<replay_clock>>();
    case algorithm::sliding_log:
      return reservable<basic_sliding_log<replay_clock>>();
    case algorithm::warmup:
      return reservable<basic_warmup<replay_clock>>();
  }
  return false;
}

std::int64_t base_for(const replay_settings& s) noexcept {
  if (!is_window(s.algo) || s.window.count() <= 0) return replay_base_ns;
  const std::int64_t w = s.window.count();
  return (replay_base_ns + w - 1) / w * w;  // windows start with the trace
}

[[noreturn]] void refuse(const std::string& message) { throw std::invalid_argument(message); }

}  // namespace

std::optional<algorithm> parse_algorithm(std::string_view name) noexcept {
  for (const auto& i : algorithms) {
    if (i.name == name) return i.algo;
  }
  return std::nullopt;
}

std::string_view to_string(algorithm a) noexcept { return info(a).name; }

std::string_view to_string(replay_mode m) noexcept { return m == replay_mode::allow ? "allow" : "reserve"; }

std::string algorithm_names() {
  std::string out;
  for (const auto& i : algorithms) {
    if (!out.empty()) out += '|';
    out += i.name;
  }
  return out;
}

bool is_window(algorithm a) noexcept {
  return a == algorithm::fixed_window || a == algorithm::sliding_window || a == algorithm::sliding_log;
}

std::int64_t max_window_limit(algorithm a, std::chrono::nanoseconds window) noexcept {
  switch (a) {
    case algorithm::fixed_window: {
      // basic_fixed_window stores k*(limit + 1) + count for the window index k of every time point of the clock:
      // both floor(min/w)*(limit + 1) and floor(max/w)*(limit + 1) + limit must fit in an int64 (its constructor
      // checks exactly this). With c = ceil(2^63 / w) and q = floor((2^63 - 1) / w) that is
      // (limit + 1)*c <= 2^63 and limit*(q + 1) <= 2^63 - 1 - q.
      if (window.count() <= 0) return 0;
      const auto w = static_cast<std::uint64_t>(window.count());
      constexpr std::uint64_t two63 = std::uint64_t{1} << 63;
      const std::uint64_t c = two63 / w + (two63 % w != 0 ? 1 : 0);
      const std::uint64_t q = (two63 - 1) / w;
      const std::uint64_t low = two63 / c - 1;
      const std::uint64_t high = (two63 - 1 - q) / (q + 1);
      return static_cast<std::int64_t>(std::min(low, high));
    }
    case algorithm::sliding_window:
      return basic_sliding_window<replay_clock>::max_limit;
    case algorithm::sliding_log:
      return basic_sliding_log<replay_clock>::max_limit;
    case algorithm::token_bucket:
    case algorithm::gcra:
    case algorithm::pacer:
    case algorithm::warmup:
      break;
  }
  return 0;
}

std::string replay_settings::describe() const {
  std::string out(to_string(algo));
  out += " rate=" + shown_rate();
  switch (algo) {
    case algorithm::token_bucket:
    case algorithm::gcra:
      out += " burst=" + std::to_string(burst);
      break;
    case algorithm::pacer:
      out += " slack=" + std::to_string(slack);
      break;
    case algorithm::fixed_window:
    case algorithm::sliding_window:
    case algorithm::sliding_log:
      out += " window=" + format_duration(window) + " limit=" + std::to_string(window_limit);
      break;
    case algorithm::warmup: {
      out += " warmup=" + format_duration(warmup);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", cold_factor);
      out += " cold-factor=";
      out += buf;
      break;
    }
  }
  out += " mode=";
  out += to_string(mode);
  return out;
}

replay_settings resolve(const replay_config& c) {
  replay_settings s;
  s.algo = c.algo;
  s.limit = c.limit;
  s.rate_text = c.rate_text;
  const std::string name(to_string(c.algo));
  const bool bursty = c.algo == algorithm::token_bucket || c.algo == algorithm::gcra;
  // Options that do not apply to the algorithm are refused first.
  if (c.burst && !bursty) refuse("--burst " + std::to_string(*c.burst) + " does not apply to " + name);
  if (c.window && !is_window(c.algo)) refuse("--window " + format_duration(*c.window) + " does not apply to " + name);
  if (c.slack && c.algo != algorithm::pacer)
    refuse("--slack " + std::to_string(*c.slack) + " does not apply to " + name);
  if (c.warmup && c.algo != algorithm::warmup) {
    refuse("--warmup " + format_duration(*c.warmup) + " does not apply to " + name);
  }
  if (c.cold_factor && c.algo != algorithm::warmup) refuse("a cold factor does not apply to " + name);

  if (bursty) {
    s.burst = c.burst.value_or(1);
    if (s.burst < 1 || s.burst > max_tokens_per_arrival) {
      refuse("invalid --burst " + std::to_string(s.burst) + ": must be a whole number from 1 to " +
             std::to_string(max_tokens_per_arrival));
    }
  }
  if (is_window(c.algo)) {
    s.window = c.window.value_or(std::chrono::seconds(1));
    if (s.window.count() <= 0) refuse("invalid --window " + format_duration(s.window) + ": must be positive");
    if (c.limit.is_inf()) refuse("--rate inf does not apply to " + name + ": a window needs a finite limit");
    s.window_limit = window_limit(c.limit, c.rate_text, s.window);
    // The bound each limiter's packed state imposes, checked here so that the message names the options.
    const std::int64_t most = max_window_limit(c.algo, s.window);
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
  if (c.algo == algorithm::pacer) {
    s.slack = c.slack.value_or(10);
    if (s.slack < 0 || s.slack > max_tokens_per_arrival) {
      refuse("invalid --slack " + std::to_string(s.slack) + ": must be a whole number from 0 to " +
             std::to_string(max_tokens_per_arrival));
    }
    if (c.limit.is_zero()) refuse("--rate " + s.shown_rate() + " does not apply to pacer: it must be above zero");
  }
  if (c.algo == algorithm::warmup) {
    s.warmup = c.warmup.value_or(std::chrono::seconds(10));
    if (s.warmup.count() < 0) refuse("invalid --warmup " + format_duration(s.warmup) + ": must not be negative");
    s.cold_factor = c.cold_factor.value_or(3.0);
    if (c.limit.is_zero() || c.limit.is_inf()) {
      refuse("--rate " + s.shown_rate() + " does not apply to warmup: it must be finite and above zero");
    }
  }
  s.mode = c.mode.value_or(c.algo == algorithm::pacer ? replay_mode::reserve : replay_mode::allow);
  if (s.mode == replay_mode::reserve && !algorithm_can_reserve(c.algo)) {
    refuse("--mode reserve does not apply to " + name + ": it can only admit or reject (use --mode allow)");
  }
  return s;
}

std::unique_ptr<replay_limiter> make_limiter(const replay_settings& s) {
  const std::int64_t base = base_for(s);
  const auto mode = s.mode;
  switch (s.algo) {
    case algorithm::token_bucket:
      return std::make_unique<adapter<basic_token_bucket<replay_clock>>>(mode, base, s.limit, s.burst);
    case algorithm::gcra:
      return std::make_unique<adapter<basic_gcra<replay_clock>>>(mode, base, s.limit, s.burst);
    case algorithm::pacer: {
      pacer_options options;
      options.slack = s.slack;
      return std::make_unique<adapter<basic_pacer<replay_clock>>>(mode, base, s.limit, options);
    }
    case algorithm::fixed_window:
      return std::make_unique<adapter<basic_fixed_window<replay_clock>>>(mode, base, s.window_limit, s.window);
    case algorithm::sliding_window:
      return std::make_unique<adapter<basic_sliding_window<replay_clock>>>(mode, base, s.window_limit, s.window);
    case algorithm::sliding_log:
      return std::make_unique<adapter<basic_sliding_log<replay_clock>>>(mode, base, s.window_limit, s.window);
    case algorithm::warmup:
      return std::make_unique<adapter<basic_warmup<replay_clock>>>(mode, base, s.limit, s.warmup, s.cold_factor);
  }
  refuse("unknown algorithm " + std::to_string(static_cast<int>(s.algo)));
}

replay_result replay(replay_limiter& limiter, std::span<const arrival> trace) {
  replay_result r;
  r.events.reserve(trace.size());
  std::vector<std::int64_t> delays;
  delays.reserve(trace.size());
  double delay_sum = 0;
  for (const arrival& a : trace) {
    const outcome o = limiter.offer(a.t_ns, a.n);
    r.events.push_back({a.t_ns, a.n, o.admitted, o.admitted ? o.delay_ns : 0});
    ++r.arrivals;
    r.tokens += a.n;
    if (o.admitted) {
      ++r.admitted;
      r.admitted_tokens += a.n;
      if (o.delay_ns > 0) ++r.delayed;
      delays.push_back(o.delay_ns);
      delay_sum += static_cast<double>(o.delay_ns);
      r.last_admission_ns = std::max(r.last_admission_ns, sat_add(a.t_ns, o.delay_ns));
    } else {
      ++r.rejected;
      r.rejected_tokens += a.n;
    }
  }
  if (!trace.empty()) {
    r.first_ns = trace.front().t_ns;
    r.last_ns = trace.back().t_ns;
  }
  std::sort(delays.begin(), delays.end());
  if (!delays.empty()) {
    r.delay.p50 = nearest_rank(delays, 50);
    r.delay.p90 = nearest_rank(delays, 90);
    r.delay.p99 = nearest_rank(delays, 99);
    r.delay.max = delays.back();
    r.delay.mean = delay_sum / static_cast<double>(delays.size());
  }
  return r;
}

replay_result replay(const replay_settings& settings, std::span<const arrival> trace) {
  const auto limiter = make_limiter(settings);
  return replay(*limiter, trace);
}

std::vector<bucket> bucketize(const replay_result& result, std::int64_t width_ns) {
  if (width_ns <= 0) throw std::invalid_argument("bucketize: width must be positive, got " + std::to_string(width_ns));
  const std::int64_t end = std::max(result.last_ns, result.last_admission_ns);
  const std::int64_t count = end / width_ns + 1;
  // Delays can be huge (a slow rate in reserve mode); cap the series so that memory stays bounded.
  constexpr std::int64_t max_buckets = 1'000'000;
  std::vector<bucket> out(static_cast<std::size_t>(std::min(count, max_buckets)));
  for (std::size_t i = 0; i < out.size(); ++i) out[i].start_ns = static_cast<std::int64_t>(i) * width_ns;
  const auto index = [&](std::int64_t t) {
    return static_cast<std::size_t>(std::min<std::int64_t>(t / width_ns, static_cast<std::int64_t>(out.size()) - 1));
  };
  for (const event& e : result.events) {
    out[index(e.t_ns)].offered += e.n;
    if (e.admitted) {
      out[index(sat_add(e.t_ns, e.delay_ns))].admitted += e.n;
    } else {
      out[index(e.t_ns)].rejected += e.n;
    }
  }
  return out;
}

std::int64_t choose_bucket_width(std::int64_t span_ns, std::int64_t max_buckets) {
  if (max_buckets < 1) max_buckets = 1;
  constexpr std::int64_t ms = 1'000'000;
  constexpr std::int64_t s = 1000 * ms;
  constexpr std::int64_t steps[] = {ms,       2 * ms,   5 * ms,    10 * ms,   20 * ms,  50 * ms, 100 * ms,
                                    200 * ms, 500 * ms, s,         2 * s,     5 * s,    10 * s,  15 * s,
                                    30 * s,   60 * s,   120 * s,   300 * s,   600 * s,  900 * s, 1800 * s,
                                    3600 * s, 7200 * s, 21600 * s, 43200 * s, 86400 * s};
  for (std::int64_t w : steps) {
    if (span_ns / w + 1 <= max_buckets) return w;
  }
  std::int64_t w = 86400 * s;
  while (span_ns / w + 1 > max_buckets && w < std::numeric_limits<std::int64_t>::max() / 2) w *= 2;
  return w;
}

std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, int percent) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<std::int64_t>(sorted.size());
  const std::int64_t rank = (percent * n + 99) / 100;  // ceil(p/100 * n), >= 1
  return sorted[static_cast<std::size_t>(std::max<std::int64_t>(rank, 1) - 1)];
}

}  // namespace admit::cli
