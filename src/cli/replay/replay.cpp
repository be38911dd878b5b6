#include "cli/replay/replay.hpp"

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
inline constexpr bool warming = false;
template <>
inline constexpr bool warming<basic_warmup<replay_clock>> = true;

template <class L>
class adapter final : public replay_limiter {
 public:
  template <class... Args>
  adapter(replay_mode mode, std::int64_t base_ns, Args&&... args)
      : mode_(mode), base_ns_(base_ns), limiter_(make(base_ns, std::forward<Args>(args)...)) {}

  outcome offer(std::int64_t t_ns, std::int64_t n) override {
    const outcome o = decide(t_ns, n);
    if constexpr (warming<L>) {
      if (!stable_since_ && limiter_.stored_permits_at(at(base_ns_ + t_ns)) <= limiter_.threshold_permits()) {
        stable_since_ = t_ns;
      }
    }
    return o;
  }
  [[nodiscard]] bool warms_up() const noexcept override { return warming<L>; }
  [[nodiscard]] std::optional<std::int64_t> stable_since() const noexcept override { return stable_since_; }

 private:
  outcome decide(std::int64_t t_ns, std::int64_t n) {
    const std::int64_t now_ns = base_ns_ + t_ns;
    replay_clock::current_ns() = now_ns;
    const tp now = at(now_ns);
    if (mode_ == replay_mode::allow) {
      const decision d = limiter_.decide_at(now, n);
      return {d.admitted, 0};
    }
    if constexpr (can_reserve<L>) {
      std::optional<std::int64_t> delay;
      bool beyond = false;
      // (A reservation's time saturates at the end of the clock's range: one that comes there could come later.)
      const auto take = [&](const basic_reservation<replay_clock>& r) {
        beyond = r.ok() && r.ready_at() == tp::max();
        delay = reservation_delay(r, now);
      };
      if constexpr (can_reserve_n<L>) {
        take(limiter_.reserve_at(now, n));
      } else {
        // A limiter that reserves one slot at a time (a pacer): n tokens are n consecutive slots; the request may
        // start when the last one comes.
        for (std::int64_t i = 0; i < n && !beyond; ++i) {
          take(limiter_.reserve_at(now));
          if (!delay) break;
        }
      }
      if (beyond) return {false, 0, true};
      if (!delay) return {false, 0};
      return {true, *delay};
    } else if constexpr (reserves_by_deciding_later<L>) {
      const decision d = limiter_.decide_at(now, n);
      if (d.admitted) return {true, 0};
      if (d.retry_after == std::chrono::nanoseconds::max()) return {false, 0};
      // GCRA saturates at the end of the clock's range: a fit there may come only beyond it.
      const std::int64_t wait = d.retry_after.count();
      std::int64_t ready = 0;
      if (__builtin_add_overflow(now_ns, wait, &ready) || ready == std::numeric_limits<std::int64_t>::max()) {
        return {false, 0, true};
      }
      if (!limiter_.decide_at(at(ready), n).admitted) return {false, 0};  // cannot happen (see above)
      return {true, wait};
    } else {
      return {false, 0};  // resolve() refuses reserve mode for these
    }
  }

  template <class... Args>
  static L make(std::int64_t base_ns, Args&&... args) {
    replay_clock::current_ns() = base_ns;
    return L(std::forward<Args>(args)...);
  }

  replay_mode mode_;
  std::int64_t base_ns_;
  L limiter_;
  std::optional<std::int64_t> stable_since_;
};
template <class L>
constexpr bool reservable() {
  return can_reserve<L> || reserves_by_deciding_later<L>;
}

std::int64_t base_for(const replay_settings& s) noexcept {
  if (!is_window(s.algo) || s.window.count() <= 0) return replay_base_ns;
  const std::int64_t w = s.window.count();
  return (replay_base_ns + w - 1) / w * w;  // windows start with the trace
}

[[noreturn]] void refuse(const std::string& message) { throw std::invalid_argument(message); }

// The adapter of L for `s`. The table (cli/common/algorithms.hpp) says which algorithms can reserve; it must agree
// with what their limiters can do, checked here where both are known.
template <class L, class... Args>
std::unique_ptr<replay_limiter> make_adapter(const replay_settings& s, Args&&... args) {
  if (info(s.algo).can_reserve != reservable<L>()) {
    throw std::logic_error("the algorithm table says " + std::string(to_string(s.algo)) +
                           (reservable<L>() ? " cannot reserve; its limiter can" : " can reserve; its limiter cannot"));
  }
  return std::make_unique<adapter<L>>(std::forward<Args>(args)...);
}

}  // namespace

std::unique_ptr<replay_limiter> make_limiter(const replay_settings& s) {
  const std::int64_t base = base_for(s);
  const auto mode = s.mode;
  switch (s.algo) {
    case algorithm::token_bucket:
      return make_adapter<basic_token_bucket<replay_clock>>(s, mode, base, s.limit, s.burst);
    case algorithm::gcra:
      return make_adapter<basic_gcra<replay_clock>>(s, mode, base, s.limit, s.burst);
    case algorithm::pacer: {
      pacer_options options;
      options.slack = s.slack;
      return make_adapter<basic_pacer<replay_clock>>(s, mode, base, s.limit, options);
    }
    case algorithm::fixed_window:
      return make_adapter<basic_fixed_window<replay_clock>>(s, mode, base, s.window_limit, s.window);
    case algorithm::sliding_window:
      return make_adapter<basic_sliding_window<replay_clock>>(s, mode, base, s.window_limit, s.window);
    case algorithm::sliding_log:
      return make_adapter<basic_sliding_log<replay_clock>>(s, mode, base, s.window_limit, s.window);
    case algorithm::warmup:
      return make_adapter<basic_warmup<replay_clock>>(s, mode, base, s.limit, s.warmup, s.cold_factor);
  }
  refuse("unknown algorithm " + std::to_string(static_cast<int>(s.algo)));
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

}  // namespace admit::cli
