#include "cli/concurrency_replay.hpp"

#include <algorithm>
#include <istream>
#include <limits>
#include <queue>
#include <stdexcept>
#include <tuple>

#include "admit/detail/saturating.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/errc.hpp"
#include "cli/duration.hpp"

namespace admit::cli {

namespace {

constexpr std::int64_t ns_per_second = 1'000'000'000;

// Seconds field of a trace line: exact ns, at most max_trace_seconds.
std::int64_t parse_time_field(std::size_t line, std::string_view text, const char* what, const char* expected) {
  const auto t = parse_seconds(text);
  if (!t) {
    throw trace_error(line, std::string("invalid ") + what + " " + quote_excerpt(text) + ": expected " + expected +
                                ", a decimal with up to 9 fraction digits");
  }
  if (*t > max_trace_seconds * ns_per_second) {
    throw trace_error(line, std::string(what) + " " + quote_excerpt(text) + " is beyond the largest supported time, " +
                                std::to_string(max_trace_seconds) + " s");
  }
  return *t;
}

// The simulation: the engine, one node per request, a heap of timed events.
class simulation {
 public:
  simulation(const concurrency_settings& s, std::span<const request> trace)
      : settings_(s),
        trace_(trace),
        state_(s.limit,
               s.max_waiters ? static_cast<std::size_t>(*s.max_waiters) : std::numeric_limits<std::size_t>::max()),
        nodes_(trace.size()) {
    granted_.reserve(trace.size());  // notify appends without allocating
    result_.events.resize(trace.size());
    result_.series.push_back({0, 0, 0});
  }

  concurrency_result run() {
    std::size_t next = 0;
    while (next < trace_.size() || !timed_.empty()) {
      // Completions and deadlines at or before the next arrival come first (see the header for the order).
      if (!timed_.empty() && (next == trace_.size() || std::get<0>(timed_.top()) <= trace_[next].t_ns)) {
        const auto [t, kind, seq, index] = timed_.top();
        timed_.pop();
        now_ = t;
        if (kind == completion) {
          complete(index);
        } else {
          deadline(index);
        }
      } else {
        now_ = trace_[next].t_ns;
        arrive(next++);
      }
      sample();
    }
    if (state_.waiting() != 0 || in_flight_ != 0) throw std::logic_error("concurrency replay: requests left over");
    finish();
    return std::move(result_);
  }

 private:
  struct node : detail::semaphore_waiter {
    simulation* sim = nullptr;
    std::size_t index = 0;
    bool resolved = false;
  };
  enum kind_t : int { completion = 0, deadline_kind = 1 };
  // (time, kind, sequence, request index); the smallest first.
  using timed_event = std::tuple<std::int64_t, int, std::uint64_t, std::size_t>;

  static void on_notify(detail::semaphore_waiter* base) noexcept {
    auto* n = static_cast<node*>(base);
    n->sim->granted_.push_back(n->index);  // capacity reserved: never allocates
  }

  void schedule(std::int64_t t, int kind, std::size_t index) { timed_.emplace(t, kind, ++sequence_, index); }

  void arrive(std::size_t i) {
    const request& r = trace_[i];
    request_event& e = result_.events[i];
    e.t_ns = r.t_ns;
    e.duration_ns = r.duration_ns;
    e.n = r.n;
    ++result_.requests;
    result_.permits += r.n;
    if (settings_.timeout && settings_.timeout->count() == 0) {
      // An expired deadline: the limiter takes free permits if nobody waits, and never queues.
      if (state_.try_acquire(r.n)) {
        start(i, 0);
      } else {
        resolve_failed(i, r.n > state_.capacity() ? request_outcome::exceeds_capacity : request_outcome::timeout, 0);
      }
      return;
    }
    node& n = nodes_[i];
    n.sim = this;
    n.index = i;
    n.needed = r.n;
    n.notify = &on_notify;
    const auto begun = state_.begin_wait(n);
    if (begun.queued) {
      if (settings_.timeout) schedule(detail::sat_add(now_, settings_.timeout->count()), deadline_kind, i);
    } else if (begun.error == errc{}) {
      n.resolved = true;
      start(i, 0);
    } else {
      n.resolved = true;
      resolve_failed(
          i, begun.error == errc::queue_full ? request_outcome::queue_full : request_outcome::exceeds_capacity, 0);
    }
    handle_grants();
  }

  void complete(std::size_t i) {
    const std::int64_t n = trace_[i].n;
    in_flight_ -= n;
    state_.release(n);
    handle_grants();
  }

  void deadline(std::size_t i) {
    node& n = nodes_[i];
    if (n.resolved) return;  // granted before its deadline (or at it: the grant wins)
    if (!state_.cancel_wait(n)) throw std::logic_error("concurrency replay: a waiter was resolved without notify");
    n.resolved = true;
    resolve_failed(i, request_outcome::timeout, now_ - trace_[i].t_ns);
    handle_grants();  // permits it had been assigned went to the waiters behind it
  }

  void handle_grants() {
    for (std::size_t k = 0; k < granted_.size(); ++k) {
      const std::size_t i = granted_[k];
      node& n = nodes_[i];
      if (n.resolved) throw std::logic_error("concurrency replay: a waiter was resolved twice");
      n.resolved = true;
      if (n.outcome != errc{}) throw std::logic_error("concurrency replay: unexpected outcome from the queue");
      start(i, now_ - trace_[i].t_ns);
    }
    granted_.clear();
  }

  void start(std::size_t i, std::int64_t wait) {
    request_event& e = result_.events[i];
    e.outcome = request_outcome::admitted;
    e.wait_ns = wait;
    ++result_.admitted;
    ++(wait > 0 ? result_.admitted_after_wait : result_.admitted_at_once);
    waits_.push_back(wait);
    in_flight_ += trace_[i].n;
    if (in_flight_ > settings_.limit)
      throw std::logic_error("concurrency replay: more permits in flight than the limit");
    schedule(detail::sat_add(now_, trace_[i].duration_ns), completion, i);
  }

  void resolve_failed(std::size_t i, request_outcome o, std::int64_t waited) {
    request_event& e = result_.events[i];
    e.outcome = o;
    e.wait_ns = waited;
    switch (o) {
      case request_outcome::queue_full:
        ++result_.queue_full;
        break;
      case request_outcome::timeout:
        ++result_.timed_out;
        break;
      case request_outcome::exceeds_capacity:
        ++result_.exceeds_capacity;
        break;
      case request_outcome::admitted:
        break;
    }
  }

  void sample() {
    const auto waiting = static_cast<std::int64_t>(state_.waiting());
    if (state_.in_use() != in_flight_) throw std::logic_error("concurrency replay: the engine's count disagrees");
    result_.peak_in_flight = std::max(result_.peak_in_flight, in_flight_);
    result_.peak_waiting = std::max(result_.peak_waiting, waiting);
    auto& series = result_.series;
    if (series.back().t_ns == now_) {
      series.back().in_flight = in_flight_;
      series.back().waiting = waiting;
    } else if (series.back().in_flight != in_flight_ || series.back().waiting != waiting) {
      series.push_back({now_, in_flight_, waiting});
    }
    result_.end_ns = now_;
  }

  void finish() {
    if (!trace_.empty()) {
      result_.first_ns = trace_.front().t_ns;
      result_.last_ns = trace_.back().t_ns;
    }
    std::sort(waits_.begin(), waits_.end());
    if (!waits_.empty()) {
      result_.wait.p50 = nearest_rank(waits_, 50);
      result_.wait.p90 = nearest_rank(waits_, 90);
      result_.wait.p99 = nearest_rank(waits_, 99);
      result_.wait.max = waits_.back();
      double sum = 0;
      for (auto w : waits_) sum += static_cast<double>(w);
      result_.wait.mean = sum / static_cast<double>(waits_.size());
    }
  }

  const concurrency_settings& settings_;
  std::span<const request> trace_;
  detail::semaphore_state state_;
  std::vector<node> nodes_;  // never resized: the engine links them by address
  std::vector<std::size_t> granted_;
  std::priority_queue<timed_event, std::vector<timed_event>, std::greater<>> timed_;
  std::uint64_t sequence_ = 0;
  std::int64_t now_ = 0;
  std::int64_t in_flight_ = 0;
  std::vector<std::int64_t> waits_;
  concurrency_result result_;
};

}  // namespace

std::optional<request> request_trace_parser::feed(std::string_view line) {
  ++line_;
  std::string_view fields[4];
  const std::size_t count = split_trace_line(line, fields);
  if (count == 0) return std::nullopt;
  constexpr const char* shape = "`<arrival seconds> <duration seconds> [n]`";
  if (count > 3) throw trace_error(line_, "unexpected text " + quote_excerpt(fields[3]) + ": expected " + shape);
  const std::int64_t t = parse_time_field(line_, fields[0], "arrival time", "seconds since start");
  if (count == 1) {
    throw trace_error(line_, "missing duration after " + quote_excerpt(fields[0]) + ": expected " + shape);
  }
  const std::int64_t d = parse_time_field(line_, fields[1], "duration", "seconds");
  std::int64_t n = 1;
  if (count == 3) {
    const auto& f = fields[2];
    const auto parsed = f.size() <= 10 ? parse_whole_number(f) : std::nullopt;
    n = parsed.value_or(0);
    if (!parsed || n < 1 || n > max_tokens_per_arrival) {
      throw trace_error(line_, "invalid count " + quote_excerpt(f) + ": expected a whole number of permits from 1 to " +
                                   std::to_string(max_tokens_per_arrival));
    }
  }
  if (last_line_ != 0 && t < last_ns_) {
    throw trace_error(line_, "arrival time " + quote_excerpt(fields[0]) + " goes back in time (line " +
                                 std::to_string(last_line_) + " is at " + format_seconds(last_ns_) + ")");
  }
  last_ns_ = t;
  last_line_ = line_;
  return request{t, d, n, line_};
}

std::vector<request> read_requests(std::istream& in, std::size_t max_requests) {
  request_trace_parser parser;
  std::vector<request> out;
  std::string line;
  std::size_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    if (auto r = parser.feed(line)) {
      if (out.size() == max_requests) throw trace_error(lines, too_many_entries(max_requests, "requests"));
      out.push_back(*r);
    }
  }
  if (in.bad()) throw trace_error(lines + 1, "read error");
  return out;
}

std::vector<request> read_requests(std::string_view text) {
  request_trace_parser parser;
  std::vector<request> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    if (auto r = parser.feed(text.substr(0, nl))) out.push_back(*r);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::string concurrency_settings::describe() const {
  std::string out(concurrency_algorithm_name);
  out += " limit=" + std::to_string(limit);
  if (max_waiters) out += " max-waiters=" + std::to_string(*max_waiters);
  if (timeout) out += " timeout=" + format_duration(*timeout);
  return out;
}

std::string_view to_string(request_outcome o) noexcept {
  switch (o) {
    case request_outcome::admitted:
      return "admit";
    case request_outcome::queue_full:
      return "queue-full";
    case request_outcome::timeout:
      return "timeout";
    case request_outcome::exceeds_capacity:
      return "exceeds-capacity";
  }
  return "?";
}

concurrency_result replay_concurrency(const concurrency_settings& settings, std::span<const request> trace) {
  if (settings.limit < 1 || settings.limit > detail::semaphore_state::max_permits) {
    throw std::invalid_argument("invalid --limit " + std::to_string(settings.limit) + ": must be at least 1");
  }
  if (settings.max_waiters && *settings.max_waiters < 0) {
    throw std::invalid_argument("invalid --max-waiters " + std::to_string(*settings.max_waiters) +
                                ": must not be negative");
  }
  if (settings.timeout && settings.timeout->count() < 0) {
    throw std::invalid_argument("invalid --timeout " + std::to_string(settings.timeout->count()) +
                                "ns: must not be negative");
  }
  simulation sim(settings, trace);
  return sim.run();
}

}  // namespace admit::cli
