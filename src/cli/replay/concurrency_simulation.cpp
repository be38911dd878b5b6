// The streaming simulation of `admit replay --algorithm concurrency` (concurrency_replayer, replay_concurrency in
// cli/replay/concurrency_replay.hpp): the real engine, one node per waiting request, a heap of timed events, and a
// reorder buffer that hands the events out in arrival order.
#include <algorithm>
#include <deque>
#include <istream>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/detail/saturating.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/errc.hpp"
#include "cli/common/decimal.hpp"
#include "cli/replay/concurrency_replay.hpp"

namespace admit::cli {

class concurrency_replayer::simulation {
 public:
  simulation(const concurrency_settings& s, event_sink sink)
      : settings_(s),
        sink_(std::move(sink)),
        state_(s.limit,
               s.max_waiters ? static_cast<std::size_t>(*s.max_waiters) : std::numeric_limits<std::size_t>::max()) {}

  void add(const request& r) {
    if (finished_) throw std::logic_error("concurrency replay: a request added after finish");
    if (ordinal_ != 0 && r.t_ns < result_.last_ns) {
      throw std::invalid_argument("concurrency replay: request at " + std::to_string(r.t_ns) +
                                  " ns arrives before the previous one");
    }
    run_until(r.t_ns, /*inclusive=*/true);
    now_ = r.t_ns;
    arrive(r);
    sample();
  }

  concurrency_result finish() {
    if (finished_) throw std::logic_error("concurrency replay: finish called twice");
    finished_ = true;
    run_until(0, /*inclusive=*/false);
    if (state_.waiting() != 0 || in_flight_ != 0 || live_ != 0 || !pending_.empty()) {
      throw std::logic_error("concurrency replay: requests left over");
    }
    result_.wait = waits_.summarize();
    result_.wait_exact = waits_.exact();
    return std::move(result_);
  }

  footprint memory() const noexcept { return footprint_with(pool_.size(), timed_.size(), pending_.size()); }

  // A simulation left by an error (clock_range_error) may still have requests queued: the engine, which must not be
  // destroyed with waiters, closes first (its notifications reach nodes still alive: pool_ goes after this body).
  ~simulation() { state_.close(); }
  simulation(const simulation&) = delete;
  simulation& operator=(const simulation&) = delete;

 private:
  struct node : detail::semaphore_waiter {
    simulation* sim = nullptr;
    std::uint64_t ordinal = 0;  // the request's place in the trace, from 1
    std::int64_t t_ns = 0, duration_ns = 0;
    std::size_t line = 0;
    bool resolved = false;
    node* link = nullptr;  // in the free list, or in the list of grants to handle
  };
  enum class kind : int { completion = 0, deadline = 1 };
  struct timed_event {
    std::int64_t t_ns;
    kind k;
    std::uint64_t sequence;  // ties broken in scheduling order
    std::uint64_t ordinal;   // the request's
    std::int64_t n;          // completion: permits to release
    node* waiter;            // deadline: the node, if it still belongs to `ordinal`
    friend bool operator>(const timed_event& a, const timed_event& b) {
      return std::tie(a.t_ns, a.k, a.sequence) > std::tie(b.t_ns, b.k, b.sequence);
    }
  };
  struct pending_event {
    request_event e;
    bool decided = false;
  };

  footprint footprint_with(std::size_t nodes, std::size_t timed, std::size_t pending) const noexcept {
    footprint f;
    f.nodes = nodes;
    f.peak_nodes = nodes;  // the pool never shrinks
    f.timed = timed;
    f.peak_timed = peak_timed_;
    f.pending = pending;
    f.peak_pending = peak_pending_;
    f.waits = waits_.kept();
    return f;
  }

  // Completions and deadlines before `until` (or at it, when inclusive: they come before an arrival at that
  // instant); all of them when !inclusive.
  void run_until(std::int64_t until, bool inclusive) {
    while (!timed_.empty()) {
      const timed_event ev = timed_.top();
      if (inclusive && ev.t_ns > until) break;
      timed_.pop();
      now_ = ev.t_ns;
      if (ev.k == kind::completion) {
        in_flight_ -= ev.n;
        state_.release(ev.n);
        handle_grants();
      } else {
        deadline(ev);
      }
      sample();
    }
  }

  static void on_notify(detail::semaphore_waiter* base) noexcept {
    auto* n = static_cast<node*>(base);
    simulation& sim = *n->sim;
    n->link = nullptr;
    (sim.granted_tail_ ? sim.granted_tail_->link : sim.granted_head_) = n;
    sim.granted_tail_ = n;
  }

  void schedule(std::int64_t t, kind k, std::uint64_t ordinal, std::int64_t n, node* waiter) {
    timed_.push({t, k, ++sequence_, ordinal, n, waiter});
    peak_timed_ = std::max(peak_timed_, timed_.size());
  }

  node* allocate() {
    node* n = free_;
    if (n) {
      free_ = n->link;
      *n = node{};
    } else {
      n = &pool_.emplace_back();
    }
    ++live_;
    return n;
  }

  void release_node(node* n) {
    n->resolved = true;
    n->link = free_;
    free_ = n;
    --live_;
  }

  void arrive(const request& r) {
    const std::uint64_t ordinal = ++ordinal_;
    if (ordinal == 1) result_.first_ns = r.t_ns;
    result_.last_ns = r.t_ns;
    ++result_.requests;
    result_.permits += r.n;
    result_.total_duration_ns += static_cast<double>(r.duration_ns);
    if (sink_) {
      pending_.push_back({request_event{r.t_ns, r.duration_ns, r.n, request_outcome::admitted, 0}, false});
      peak_pending_ = std::max(peak_pending_, pending_.size());
    }
    if (settings_.timeout && settings_.timeout->count() == 0) {
      // An expired deadline: the limiter takes free permits if nobody waits, and never queues.
      if (state_.try_acquire(r.n)) {
        start(ordinal, r.line, r.t_ns, r.duration_ns, r.n);
      } else {
        decide(ordinal, r.t_ns, r.n > state_.capacity() ? request_outcome::exceeds_capacity : request_outcome::timeout,
               0);
      }
      return;
    }
    node* n = allocate();
    n->sim = this;
    n->ordinal = ordinal;
    n->t_ns = r.t_ns;
    n->line = r.line;
    n->duration_ns = r.duration_ns;
    n->needed = r.n;
    n->notify = &on_notify;
    const auto begun = state_.begin_wait(*n);
    if (begun.queued) {
      if (settings_.timeout) {
        schedule(detail::sat_add(now_, settings_.timeout->count()), kind::deadline, ordinal, 0, n);
      }
    } else {
      release_node(n);
      if (begun.error == errc{}) {
        start(ordinal, r.line, r.t_ns, r.duration_ns, r.n);
      } else {
        decide(ordinal, r.t_ns,
               begun.error == errc::queue_full ? request_outcome::queue_full : request_outcome::exceeds_capacity, 0);
      }
    }
    handle_grants();
  }

  void deadline(const timed_event& ev) {
    node* n = ev.waiter;
    // Granted before its deadline (or at it: the grant wins), and the node maybe reused since.
    if (n->ordinal != ev.ordinal || n->resolved) return;
    if (!state_.cancel_wait(*n)) throw std::logic_error("concurrency replay: a waiter was resolved without notify");
    n->resolved = true;
    decide(n->ordinal, n->t_ns, request_outcome::timeout, now_ - n->t_ns);
    release_node(n);
    handle_grants();  // permits it had been assigned went to the waiters behind it
  }

  void handle_grants() {
    while (node* n = granted_head_) {
      granted_head_ = n->link;
      if (!granted_head_) granted_tail_ = nullptr;
      if (n->resolved) throw std::logic_error("concurrency replay: a waiter was resolved twice");
      n->resolved = true;
      if (n->outcome != errc{}) throw std::logic_error("concurrency replay: unexpected outcome from the queue");
      start(n->ordinal, n->line, n->t_ns, n->duration_ns, n->needed);
      release_node(n);
    }
  }

  void start(std::uint64_t ordinal, std::size_t line, std::int64_t arrival, std::int64_t duration, std::int64_t n) {
    const std::int64_t wait = now_ - arrival;
    std::int64_t end = 0;
    if (__builtin_add_overflow(now_, duration, &end) || end == std::numeric_limits<std::int64_t>::max()) {
      throw clock_range_error(line,
                              "this request would end about 292 years (2^63 ns) or more after the trace's start "
                              "(it waited " +
                                  format_seconds(wait) +
                                  " s for its permits), past the end of the "
                                  "replay's clock: its numbers cannot be told (a higher limit shortens the waits)");
    }
    ++result_.admitted;
    waits_.add(wait);
    if (wait > 0) {
      ++result_.admitted_after_wait;
    } else {
      ++result_.admitted_at_once;
    }
    in_flight_ += n;
    if (in_flight_ > settings_.limit) {
      throw std::logic_error("concurrency replay: more permits in flight than the limit");
    }
    schedule(end, kind::completion, ordinal, n, nullptr);
    emit(ordinal, request_outcome::admitted, wait);
  }

  void decide(std::uint64_t ordinal, std::int64_t arrival, request_outcome o, std::int64_t waited) {
    switch (o) {
      case request_outcome::queue_full:
        ++result_.queue_full;
        result_.timeline.mark_queue_full(arrival);
        break;
      case request_outcome::timeout:
        ++result_.timed_out;
        result_.timeline.mark_timeout(arrival);
        break;
      case request_outcome::exceeds_capacity:
        ++result_.exceeds_capacity;
        break;
      case request_outcome::admitted:
        break;
    }
    emit(ordinal, o, waited);
  }

  // Records the outcome in the reorder buffer and hands out every event now decided at its front.
  void emit(std::uint64_t ordinal, request_outcome o, std::int64_t wait) {
    if (!sink_) return;
    pending_event& p = pending_[static_cast<std::size_t>(ordinal - first_pending_)];
    if (p.decided) throw std::logic_error("concurrency replay: a request decided twice");
    p.e.outcome = o;
    p.e.wait_ns = wait;
    p.decided = true;
    while (!pending_.empty() && pending_.front().decided) {
      sink_(pending_.front().e);
      pending_.pop_front();
      ++first_pending_;
    }
  }

  void sample() {
    const auto waiting = static_cast<std::int64_t>(state_.waiting());
    if (state_.in_use() != in_flight_) throw std::logic_error("concurrency replay: the engine's count disagrees");
    result_.peak_in_flight = std::max(result_.peak_in_flight, in_flight_);
    result_.peak_waiting = std::max(result_.peak_waiting, waiting);
    result_.timeline.record(now_, {in_flight_, waiting});
    result_.end_ns = now_;
  }

  const concurrency_settings settings_;
  event_sink sink_;
  detail::semaphore_state state_;
  std::deque<node> pool_;  // stable addresses: the engine links nodes by address
  node* free_ = nullptr;
  std::size_t live_ = 0;
  node* granted_head_ = nullptr;  // grants made by the engine, handled after each engine call
  node* granted_tail_ = nullptr;
  std::priority_queue<timed_event, std::vector<timed_event>, std::greater<>> timed_;
  std::size_t peak_timed_ = 0;
  std::deque<pending_event> pending_;  // from request first_pending_ on
  std::uint64_t first_pending_ = 1;
  std::size_t peak_pending_ = 0;
  std::uint64_t sequence_ = 0;
  std::uint64_t ordinal_ = 0;
  std::int64_t now_ = 0;
  std::int64_t in_flight_ = 0;
  // The waits above zero: a deque grows by blocks, where a vector's doubling would briefly need twice the memory.
  delay_percentiles waits_;  // of the admitted requests, zeros included
  bool finished_ = false;
  concurrency_result result_;
};

namespace {

void check_settings(const concurrency_settings& settings) {
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
}

}  // namespace

concurrency_replayer::concurrency_replayer(const concurrency_settings& settings, event_sink on_event) {
  check_settings(settings);
  sim_ = std::make_unique<simulation>(settings, std::move(on_event));
}

concurrency_replayer::~concurrency_replayer() = default;

void concurrency_replayer::add(const request& r) { sim_->add(r); }

concurrency_result concurrency_replayer::finish() { return sim_->finish(); }

concurrency_replayer::footprint concurrency_replayer::memory() const noexcept { return sim_->memory(); }

concurrency_result replay_concurrency(const concurrency_settings& settings, std::istream& trace,
                                      const concurrency_replayer::event_sink& on_event) {
  concurrency_replayer replayer(settings, on_event);
  request_trace_parser parser;
  std::string line;
  std::size_t lines = 0;
  while (std::getline(trace, line)) {
    ++lines;
    if (auto r = parser.feed(line)) replayer.add(*r);
  }
  if (trace.bad()) throw trace_error(lines + 1, "read error");
  return replayer.finish();
}

concurrency_result replay_concurrency(const concurrency_settings& settings, std::span<const request> trace) {
  std::vector<request_event> events;
  events.reserve(trace.size());
  concurrency_replayer replayer(settings, [&](const request_event& e) { events.push_back(e); });
  for (const auto& r : trace) replayer.add(r);
  auto result = replayer.finish();
  result.events = std::move(events);
  return result;
}

}  // namespace admit::cli
