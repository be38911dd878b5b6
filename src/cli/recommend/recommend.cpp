#include "cli/recommend/recommend.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <thread>
#include <utility>

#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"
#include "cli/common/values.hpp"

namespace admit::cli {

bool percentage::admits(std::int64_t part, std::int64_t whole) const noexcept {
  __extension__ typedef __int128 wide;
  return static_cast<wide>(part) * 100'000'000'000 <= static_cast<wide>(nano_percent) * whole;
}

std::string percentage::text() const { return format_seconds(nano_percent) + "%"; }

namespace {

constexpr std::int64_t max_frontier_points = 19;  // bursts 1 to 10^6

// A clock_range_error's words for a candidate: without its line (the recorded trace keeps no line numbers), of "a
// request" where the replay names "this request".
std::string without_line(const clock_range_error& e) {
  std::string w = e.message();
  if (w.starts_with("this request")) w.replace(0, 4, "a");
  return w;
}

// The bursts of the frontier: 1, 2, 5, 10, 20, 50, ...
std::int64_t frontier_burst(std::int64_t i) {
  static constexpr std::int64_t steps[] = {1, 2, 5};
  std::int64_t b = steps[i % 3];
  for (std::int64_t d = 0; d < i / 3; ++d) b *= 10;
  return b;
}

// The replays of one rate question, each candidate replayed once (a cache by burst and rate).
class rate_search {
 public:
  rate_search(const recorded_trace& trace, const rate_question& q, const replay_observer& replayed)
      : trace_(trace),
        q_(q),
        replayed_(replayed),
        window_(is_window(q.algo) ? format_duration(parse_duration_option("--window", q.window)) : "") {}

  std::int64_t replays() const noexcept { return replays_; }

  // A rate in requests per second (bucket algorithms).
  const rate_point& at(const decimal& rate, std::int64_t burst) {
    return replay(rate.text() + "/s", rate.value(), burst, 0);
  }
  // A whole number of requests per window (window algorithms).
  const rate_point& per_window(std::int64_t limit) {
    return replay(std::to_string(limit) + "/" + window_, 0, 0, limit);
  }

  // Every replayed candidate of `burst`, by rate.
  std::vector<rate_point> curve(std::int64_t burst) const {
    std::vector<rate_point> points;
    for (const auto& [key, point] : cache_) {
      if (key.first == burst && point.refused.empty()) points.push_back(point);
    }
    std::sort(points.begin(), points.end(),
              [](const rate_point& a, const rate_point& b) { return a.rate_per_second < b.rate_per_second; });
    return points;
  }

 private:
  const rate_point& replay(const std::string& rate_text, double per_second, std::int64_t burst,
                           std::int64_t window_limit) {
    auto [it, inserted] = cache_.try_emplace({burst, rate_text});
    if (!inserted) return it->second;
    ++replays_;
    rate_limit_options o;
    o.algorithm = std::string(to_string(q_.algo));
    o.rate = rate_text;
    if (is_window(q_.algo)) {
      o.window = q_.window;
    } else {
      o.burst = std::to_string(burst);
    }
    o.mode = std::string(to_string(q_.mode));
    rate_point& p = it->second;
    p.rate = rate_text;
    p.rate_per_second = per_second;
    p.burst = burst;
    p.window_limit = window_limit;
    replay_settings settings;
    replay_result r;
    try {
      settings = resolve(to_config(o, algorithm_names()));
      r = trace_.replay_rate(settings, q_.per_key);
    } catch (const std::invalid_argument& e) {
      // A configuration the limiter refuses (a large burst at a tiny rate would take centuries to refill): not an
      // answer, and nothing was replayed.
      --replays_;
      p.refused = without_cpp_name(e.what());
      return p;
    } catch (const clock_range_error& e) {
      // Waits past the end of the replay's clock (centuries at a tiny rate): no answer either.
      p.refused = without_line(e);
      if (replayed_) replayed_();
      return p;
    }
    if (replayed_) replayed_();
    if (window_limit > 0) p.rate_per_second = settings.limit.per_second();
    p.requests = r.arrivals;
    p.rejected = r.rejected;
    p.delay_p99_ns = r.delay.p99;
    if (r.per_key) {
      p.keys_with_rejections = r.per_key->keys_with_rejections;
      p.most_limited = r.per_key->most_limited;
    }
    p.meets = q_.max_rejected.admits(p.rejected, p.requests) &&
              (!q_.max_delay_p99_ns || p.delay_p99_ns <= *q_.max_delay_p99_ns);
    return p;
  }

  const recorded_trace& trace_;
  const rate_question& q_;
  const replay_observer& replayed_;
  const std::string window_;  // the window in a whole unit ("1500ms" for 1.5s), as a rate's period is written
  std::map<std::pair<std::int64_t, std::string>, rate_point> cache_;
  std::int64_t replays_ = 0;
};

// The plot's spread of limits around a whole-number answer, as multiples of it.
constexpr double window_spread[] = {0.25, 0.4, 0.55, 0.7, 0.85, 1.2, 1.5, 2.0, 3.0, 4.0};
constexpr double concurrency_spread[] = {0.25, 0.4, 0.55, 0.7, 0.85, 1.2, 1.5, 2.0, 3.0};

// The search over whole limits from 1 to `max` (requests per window, permits): into `out`, the least that meets and
// the one below it, or the highest when none meets; then the limits of `spread` times the answer (for --plot).
// `at(k)` replays limit k (once: the searches cache) and `limit_of` reads a point's limit back.
template <class Recommendation, class At, class LimitOf>
void least_whole(std::int64_t max, std::int64_t start, std::span<const double> spread, At at, LimitOf limit_of,
                 Recommendation& out) {
  const auto found = least_meeting({1, max, start, 1}, [&](std::int64_t k) { return at(k).meets; });
  if (!found.least) {
    out.highest = at(max);
    return;
  }
  out.best = at(*found.least);
  if (found.below_fails) out.tighter = at(*found.least - 1);
  const std::int64_t best = limit_of(*out.best);
  for (const double f : spread) {
    const auto k = static_cast<std::int64_t>(std::llround(static_cast<double>(best) * f));
    if (k >= 1 && k <= max) (void)at(k);
  }
}

// Where a search starts: the trace's mean rate in tokens per second (per key with per_key).
double mean_rate(const recorded_trace& trace, bool per_key) {
  const double span_s = std::max<double>(static_cast<double>(trace.last_ns() - trace.first_ns()) / 1e9, 1.0);
  double mean = static_cast<double>(trace.tokens()) / span_s;
  if (per_key && trace.keys() > 0) mean /= static_cast<double>(trace.keys());
  return mean;
}

// Past this many digits, a chase of a target that is not monotone (below) stops.
constexpr std::int64_t max_mantissa = 1'000'000'000'000'000;

// The least rate of `burst` that meets, and 99% of it, which does not: both replayed. Where 99% still meets (a target
// that is not monotone in the rate), the search goes on below it, on the grid and off it.
void least_rate(rate_search& search, std::int64_t burst, std::int64_t start, rate_recommendation& out) {
  out.best.reset();
  out.tighter.reset();
  const auto grid_meets = [&](std::int64_t p) { return search.at(rate_grid::at(p), burst).meets; };
  decimal best;
  search_range range{0, rate_grid::last, start, 32};
  for (int round = 0;; ++round) {
    const search_result found = least_meeting(range, grid_meets);
    if (found.least) {
      best = rate_grid::at(*found.least);
      if (!found.below_fails) {  // the grid's least rate meets: so may no refill at all
        if (search.at({0, 0}, burst).meets) best = {0, 0};
        out.best = search.at(best, burst);
        return;
      }
    } else if (round == 0) {
      out.highest = search.at(rate_grid::at(rate_grid::last), burst);
      return;
    }  // else best is still the rate off the grid that met, and the grid below it fails
    const decimal tighter = best.tighter();
    if (!search.at(tighter, burst).meets || tighter.mantissa > max_mantissa) {
      // A tighter rate the limiter refuses (a large burst takes centuries to refill at a tiny rate) is no answer
      // about the target: no refill at all may meet it, and is never refused.
      if (!search.at(tighter, burst).refused.empty() && search.at({0, 0}, burst).meets) {
        out.best = search.at({0, 0}, burst);
        return;
      }
      out.best = search.at(best, burst);
      out.tighter = search.at(tighter, burst);
      return;
    }
    best = tighter;
    const std::int64_t below = rate_grid::floor(best.value());
    range = {0, below, below, 1};
  }
}

}  // namespace

const rate_point* frontier_knee(const std::vector<rate_point>& frontier, std::int64_t trace_tokens) {
  // Only points with a positive rate have a place on a log scale; a burst that holds the whole trace needs no rate, so
  // the rate found for it is only the least one tried.
  std::vector<const rate_point*> points;
  for (const rate_point& p : frontier) {
    if (p.rate_per_second > 0 && p.burst < trace_tokens) points.push_back(&p);
  }
  if (points.empty()) return frontier.empty() ? nullptr : &frontier.front();  // every answer is 0/s
  if (points.size() < 3) return points.front();
  const auto x = [](const rate_point* p) { return std::log(static_cast<double>(p->burst)); };
  const auto y = [](const rate_point* p) { return std::log(p->rate_per_second); };
  const double x0 = x(points.front()), x1 = x(points.back()), y0 = y(points.front()), y1 = y(points.back());
  const rate_point* knee = points.front();
  double farthest = -1;
  for (const rate_point* p : points) {
    // How far below the chord the point lies, both axes scaled to [0, 1] (the chord falls from (0, 1) to (1, 0)).
    const double u = (x(p) - x0) / (x1 - x0);
    const double v = y0 == y1 ? 0 : (y(p) - y1) / (y0 - y1);
    if (1 - u - v > farthest) {
      farthest = 1 - u - v;
      knee = p;
    }
  }
  return knee;
}

rate_recommendation recommend_rate(const recorded_trace& trace, const rate_question& q,
                                   const replay_observer& replayed) {
  rate_recommendation out;
  rate_search search(trace, q, replayed);
  if (is_window(q.algo)) {
    const std::chrono::nanoseconds window = parse_duration_option("--window", q.window);
    const std::int64_t max = max_window_limit(q.algo, window);
    const auto start = static_cast<std::int64_t>(
        std::llround(mean_rate(trace, q.per_key) * static_cast<double>(window.count()) / 1e9));
    least_whole(
        max, start, q.curve ? std::span(window_spread) : std::span<const double>(),
        [&](std::int64_t k) -> const rate_point& { return search.per_window(k); },
        [](const rate_point& p) { return p.window_limit; }, out);
    out.curve = search.curve(0);
    out.replays = search.replays();
    return out;
  }

  std::int64_t start = rate_grid::floor(mean_rate(trace, q.per_key));
  rate_search* chosen = &search;                       // the search of the recommended burst
  std::vector<std::unique_ptr<rate_search>> searches;  // the frontier's: one per burst
  if (q.burst) {
    least_rate(search, *q.burst, start, out);
  } else {
    // The frontier, two bursts at a time (the second on another thread: passes read the recorded trace
    // independently); each pair starts from the least rate of the burst before it (a larger burst needs no more).
    std::vector<rate_recommendation> answers;  // of each burst on the frontier
    std::vector<rate_search*> answered_by;
    bool done = false;
    for (std::int64_t i = 0; i < max_frontier_points && !done; i += 2) {
      std::vector<std::int64_t> bursts;
      for (std::int64_t j = i; j < std::min(i + 2, max_frontier_points); ++j) {
        // Up to the first burst that holds every token of the trace (a larger one cannot do better).
        if (j > 0 && frontier_burst(j - 1) >= std::max<std::int64_t>(trace.tokens(), 1)) break;
        bursts.push_back(frontier_burst(j));
      }
      if (bursts.empty()) break;
      std::vector<rate_recommendation> found(bursts.size());
      const std::size_t first = searches.size();
      for (std::size_t k = 0; k < bursts.size(); ++k)
        searches.push_back(std::make_unique<rate_search>(trace, q, replayed));
      std::exception_ptr failed;
      std::thread second;
      if (bursts.size() == 2) {
        second = std::thread([&] {
          try {
            least_rate(*searches[first + 1], bursts[1], start, found[1]);
          } catch (...) {
            failed = std::current_exception();
          }
        });
      }
      try {
        least_rate(*searches[first], bursts[0], start, found[0]);
      } catch (...) {
        if (second.joinable()) second.join();
        throw;
      }
      if (second.joinable()) second.join();
      if (failed) std::rethrow_exception(failed);
      for (std::size_t k = 0; k < bursts.size() && !done; ++k) {
        if (!found[k].best) {
          out.highest = found[k].highest;
          out.unmet_bursts.push_back(bursts[k]);
          continue;
        }
        out.frontier.push_back(*found[k].best);
        answers.push_back(found[k]);
        answered_by.push_back(searches[first + k].get());
        start = rate_grid::floor(found[k].best->rate_per_second);
        // Stop at a rate of zero (the burst holds the trace), or once a tenfold burst (three steps back) lowered the
        // rate by less than 1%.
        const std::size_t n = out.frontier.size();
        done = found[k].best->rate_per_second == 0 ||
               (n >= 4 && out.frontier[n - 4].burst * 10 == bursts[k] &&
                out.frontier[n - 1].rate_per_second >= 0.99 * out.frontier[n - 4].rate_per_second);
      }
    }
    // (With --per-key, a burst holds every key's trace once it holds the busiest key's.)
    if (const rate_point* knee = frontier_knee(out.frontier, q.per_key ? trace.most_key_tokens() : trace.tokens())) {
      const auto at = static_cast<std::size_t>(knee - out.frontier.data());
      out.best = answers[at].best;
      out.tighter = answers[at].tighter;
      out.highest.reset();
      chosen = answered_by[at];
    }
  }
  const std::int64_t burst = out.best ? out.best->burst : q.burst.value_or(1);
  if (q.curve && out.best && out.best->rate_per_second > 0) {
    const std::int64_t p = rate_grid::floor(out.best->rate_per_second);
    for (const std::int64_t d : {-600, -400, -250, -150, -80, -40, 40, 80, 150, 250, 400, 600}) {
      if (p + d >= 0 && p + d <= rate_grid::last) (void)chosen->at(rate_grid::at(p + d), burst);
    }
  }
  out.curve = chosen->curve(burst);
  out.replays = search.replays();
  for (const auto& s : searches) out.replays += s->replays();
  return out;
}

namespace {

class concurrency_search {
 public:
  concurrency_search(const recorded_trace& trace, const concurrency_question& q, const replay_observer& replayed)
      : trace_(trace), q_(q), replayed_(replayed) {}
  std::int64_t replays() const noexcept { return static_cast<std::int64_t>(cache_.size()); }

  const concurrency_point& at(std::int64_t limit) {
    auto [it, inserted] = cache_.try_emplace(limit);
    if (!inserted) return it->second;
    concurrency_settings s;
    s.limit = limit;
    s.max_waiters = q_.max_waiters;
    if (q_.timeout_ns) s.timeout = std::chrono::nanoseconds(*q_.timeout_ns);
    concurrency_point& p = it->second;
    p.limit = limit;
    concurrency_result r;
    try {
      r = trace_.replay_concurrency(s);
    } catch (const clock_range_error& e) {
      p.refused = without_line(e);  // (fails: so few permits that requests end centuries on)
      if (replayed_) replayed_();
      return p;
    }
    if (replayed_) replayed_();
    p.requests = r.requests;
    p.admitted = r.admitted;
    p.queue_full = r.queue_full;
    p.timed_out = r.timed_out;
    p.exceeds_capacity = r.exceeds_capacity;
    p.wait_p99_ns = r.wait.p99;
    p.meets = q_.max_turned_away.admits(p.requests - p.admitted, p.requests) &&
              (!q_.max_wait_p99_ns || p.wait_p99_ns <= *q_.max_wait_p99_ns);
    return p;
  }

  std::vector<concurrency_point> curve() const {
    std::vector<concurrency_point> points;
    for (const auto& [limit, point] : cache_) {
      if (point.refused.empty()) points.push_back(point);  // (one without an answer has no place on the curve)
    }
    return points;
  }

 private:
  const recorded_trace& trace_;
  const concurrency_question& q_;
  const replay_observer& replayed_;
  std::map<std::int64_t, concurrency_point> cache_;
};

}  // namespace

concurrency_recommendation recommend_concurrency(const recorded_trace& trace, const concurrency_question& q,
                                                 const replay_observer& replayed) {
  concurrency_recommendation out;
  concurrency_search search(trace, q, replayed);
  // Little's law: the mean number of requests in flight if every one were admitted at once.
  const double span_ns = std::max<double>(static_cast<double>(trace.last_ns() - trace.first_ns()), 1e9);
  const auto start = static_cast<std::int64_t>(std::ceil(trace.permit_ns() / span_ns));
  least_whole(
      max_tokens_per_arrival, std::max<std::int64_t>(start, 1),
      q.curve ? std::span(concurrency_spread) : std::span<const double>(),
      [&](std::int64_t limit) -> const concurrency_point& { return search.at(limit); },
      [](const concurrency_point& p) { return p.limit; }, out);
  out.curve = search.curve();
  out.replays = search.replays();
  return out;
}

}  // namespace admit::cli
