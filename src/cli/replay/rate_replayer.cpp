// The streaming engine of the rate replay (rate_replayer, replay() in cli/replay/replay.hpp): counts, the delay
// percentiles and the timeline, updated as each arrival is decided; with --per-key, one limiter per key.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "admit/detail/saturating.hpp"
#include "cli/replay/replay.hpp"

namespace admit::cli {

namespace {

// Heterogeneous lookup: a key read as a string_view finds its entry without building a std::string.
struct key_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
};

struct key_entry {
  std::unique_ptr<replay_limiter> limiter;
  std::int64_t arrivals = 0, tokens = 0, rejected = 0, rejected_tokens = 0;
};

}  // namespace

class rate_replayer::engine {
 public:
  engine(const replay_settings* settings, replay_limiter* shared, rate_replay_options options)
      : options_(std::move(options)), shared_(shared) {
    if (settings != nullptr) {
      settings_ = *settings;
      if (!options_.per_key) {
        owned_ = make_limiter(*settings);
        shared_ = owned_.get();
      } else {
        (void)make_limiter(*settings);  // refuse a bad configuration now, not on the first key
      }
    } else if (options_.per_key) {
      throw std::invalid_argument("rate replay: per_key needs settings to build a limiter per key");
    }
  }

  outcome add(const arrival& a, std::string_view key) {
    if (finished_) throw std::logic_error("rate replay: an arrival added after finish");
    if (r_.arrivals > 0 && a.t_ns < r_.last_ns) {
      throw std::invalid_argument("rate replay: arrival at " + std::to_string(a.t_ns) +
                                  " ns comes before the previous one");
    }
    key_entry* entry = nullptr;
    replay_limiter* limiter = shared_;
    if (options_.per_key) {
      auto it = keys_.find(key);
      if (it == keys_.end()) it = keys_.emplace(std::string(key), key_entry{make_limiter(settings_)}).first;
      entry = &it->second;
      limiter = entry->limiter.get();
    }
    const outcome o = limiter->offer(a.t_ns, a.n);
    if (o.beyond_clock) {
      throw clock_range_error(a.line,
                              "this request could start only about 292 years (2^63 ns) or more after the trace's "
                              "start, past the end of the replay's clock: its delay cannot be told (a higher rate or "
                              "a larger burst shortens the waits)");
    }
    if (r_.arrivals == 0) r_.first_ns = a.t_ns;
    r_.last_ns = a.t_ns;
    ++r_.arrivals;
    r_.tokens += a.n;
    r_.timeline.add_offered(a.t_ns, a.n, !o.admitted);
    if (o.admitted) {
      ++r_.admitted;
      r_.admitted_tokens += a.n;
      if (o.delay_ns > 0) ++r_.delayed;
      delays_.add(o.delay_ns);
      const std::int64_t at = detail::sat_add(a.t_ns, o.delay_ns);
      r_.last_admission_ns = std::max(r_.last_admission_ns, at);
      r_.timeline.add_admitted(at, a.n);
    } else {
      ++r_.rejected;
      r_.rejected_tokens += a.n;
    }
    if (entry != nullptr) {
      ++entry->arrivals;
      entry->tokens += a.n;
      if (!o.admitted) {
        ++entry->rejected;
        entry->rejected_tokens += a.n;
      }
    }
    if (options_.on_event) options_.on_event(event{a.t_ns, a.n, o.admitted, o.admitted ? o.delay_ns : 0}, key);
    return o;
  }

  replay_result finish() {
    if (finished_) throw std::logic_error("rate replay: finish called twice");
    finished_ = true;
    r_.delay = delays_.summarize();
    r_.delay_exact = delays_.exact();
    const auto note_stable = [&](const replay_limiter& l) {
      if (const auto since = l.stable_since()) {
        ++r_.stable_limiters;
        r_.stable_since = std::min(r_.stable_since.value_or(*since), *since);
      }
    };
    if (shared_ != nullptr) note_stable(*shared_);
    for (const auto& kv : keys_) note_stable(*kv.second.limiter);
    if (options_.per_key) r_.per_key = summarize_keys();
    return std::move(r_);
  }

 private:
  per_key_result summarize_keys() {
    per_key_result p;
    p.keys = static_cast<std::int64_t>(keys_.size());
    std::vector<const std::pair<const std::string, key_entry>*> limited;
    for (const auto& kv : keys_) {
      if (kv.second.rejected > 0) limited.push_back(&kv);
    }
    p.keys_with_rejections = static_cast<std::int64_t>(limited.size());
    const auto more_limited = [](const auto* a, const auto* b) {
      if (a->second.rejected != b->second.rejected) return a->second.rejected > b->second.rejected;
      if (a->second.arrivals != b->second.arrivals) return a->second.arrivals > b->second.arrivals;
      return a->first < b->first;
    };
    const std::size_t shown = std::min(options_.most_limited, limited.size());
    std::partial_sort(limited.begin(), limited.begin() + static_cast<std::ptrdiff_t>(shown), limited.end(),
                      more_limited);
    for (std::size_t i = 0; i < shown; ++i) {
      const auto& [key, e] = *limited[i];
      p.most_limited.push_back({key, e.arrivals, e.tokens, e.rejected, e.rejected_tokens});
    }
    return p;
  }

  rate_replay_options options_;
  replay_settings settings_;
  std::unique_ptr<replay_limiter> owned_;
  replay_limiter* shared_ = nullptr;
  std::unordered_map<std::string, key_entry, key_hash, std::equal_to<>> keys_;
  delay_percentiles delays_;
  replay_result r_;
  bool finished_ = false;
};

rate_replayer::rate_replayer(const replay_settings& settings, rate_replay_options options)
    : engine_(std::make_unique<engine>(&settings, nullptr, std::move(options))) {}

rate_replayer::rate_replayer(replay_limiter& limiter, rate_replay_options options)
    : engine_(std::make_unique<engine>(nullptr, &limiter, std::move(options))) {}

rate_replayer::~rate_replayer() = default;

outcome rate_replayer::add(const arrival& a, std::string_view key) { return engine_->add(a, key); }

replay_result rate_replayer::finish() { return engine_->finish(); }

replay_result replay(const replay_settings& settings, arrival_source& source, const rate_replay_options& options) {
  rate_replayer replayer(settings, options);
  keyed_arrival next;
  while (source.read(next)) (void)replayer.add(next.a, next.key);
  return replayer.finish();
}

namespace {

replay_result replay_keeping_events(rate_replayer& replayer, std::span<const arrival> trace,
                                    std::vector<event>& events) {
  for (const arrival& a : trace) (void)replayer.add(a);
  replay_result r = replayer.finish();
  r.events = std::move(events);
  return r;
}

}  // namespace

replay_result replay(replay_limiter& limiter, std::span<const arrival> trace) {
  std::vector<event> events;
  events.reserve(trace.size());
  rate_replay_options options;
  options.on_event = [&](const event& e, std::string_view) { events.push_back(e); };
  rate_replayer replayer(limiter, std::move(options));
  return replay_keeping_events(replayer, trace, events);
}

replay_result replay(const replay_settings& settings, std::span<const arrival> trace) {
  std::vector<event> events;
  events.reserve(trace.size());
  rate_replay_options options;
  options.on_event = [&](const event& e, std::string_view) { events.push_back(e); };
  rate_replayer replayer(settings, std::move(options));
  return replay_keeping_events(replayer, trace, events);
}

std::vector<bucket> bucketize(const replay_result& result, std::int64_t width_ns) {
  return result.timeline.buckets(width_ns);
}

}  // namespace admit::cli
