#include "serve/engine/service.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "serve/engine/serve_metrics.hpp"
#include "serve/engine/snapshot_ptr.hpp"

namespace admit::serve {

namespace {

using steady = std::chrono::steady_clock;
constexpr std::uint32_t max_u32 = std::numeric_limits<std::uint32_t>::max();

// envoyproxy/ratelimit's descriptorKey: "domain.key_value.key2" (the value part only where it is not empty).
std::string descriptor_path(std::string_view domain, const rls_descriptor& d) {
  std::string s(domain);
  s += '.';
  for (std::size_t i = 0; i < d.entries.size(); ++i) {
    if (i > 0) s += '.';
    s += d.entries[i].key;
    if (!d.entries[i].value.empty()) s += '_' + d.entries[i].value;
  }
  return s;
}

// envoyproxy/ratelimit's detailed metric key: "domain.key_value.key2_value2" (key_value always).
std::string detailed_path(std::string_view domain, const rls_descriptor& d) {
  std::string s(domain);
  for (const descriptor_entry& e : d.entries) s += '.' + e.key + '_' + e.value;
  return s;
}

// envoyproxy/ratelimit's statistics key of a match (rule_match::metric_key, where the configuration gives one);
// else the detailed path for a rule with detailed_metric; empty for the rule's own full key.
template <class Match>
std::string metric_series(const Match& m, std::string_view domain, const rls_descriptor& d) {
  if constexpr (requires { m.metric_key; }) {
    if (!m.metric_key.empty()) return m.metric_key == m.rule->full_key ? std::string() : m.metric_key;
  }
  return m.rule->detailed_metric ? detailed_path(domain, d) : std::string();
}

// The counter key of an override: the request's entries, length-prefixed so no two requests collide (the format of
// rule_match::counter_key, so that an override shares a fixed-window rule's counter where envoyproxy/ratelimit does).
std::string override_counter_key(std::string_view domain, const rls_descriptor& d) {
  std::string s = std::to_string(domain.size()) + ':' + std::string(domain);
  for (const descriptor_entry& e : d.entries) {
    s += std::to_string(e.key.size()) + ':' + e.key + std::to_string(e.value.size()) + ':' + e.value;
  }
  return s;
}

struct header_names {
  std::string_view limit, remaining, reset;
};

header_names names_of(service_options::header_style h) {
  if (h == service_options::header_style::envoy)
    return {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"};
  return {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"};
}

}  // namespace

struct service::impl {
  impl(std::unique_ptr<backend> b, std::shared_ptr<const configuration> c, service_options o)
      : opts(o), store(std::move(b)) {
    if (!store) throw std::invalid_argument("admit serve: the service needs a backend, got none");
    if (!c) throw std::invalid_argument("admit serve: the service needs a configuration, got none");
    install(std::move(c));
  }

  void tell(const std::optional<backend_event>& e) const {
    if (e && opts.on_backend_event) opts.on_backend_event(*e);
  }

  void install(std::shared_ptr<const configuration> c) {
    std::lock_guard lock(reload_mutex);
    store->configure(*c);
    metrics.configure(c->rules());
    config.store(std::move(c));
    metrics.record_reload(true);
  }

  // Ends a lease through the backend; one the backend could not be asked about counts as a backend error (it stays
  // held until it expires, unless asked again).
  void release(std::string lease, std::function<void(release_result)> done) {
    store->release(std::move(lease), [this, done = std::move(done)](release_result r) {
      if (r.result == release_result::state::failed) metrics.record_backend_error();
      done(std::move(r));
    });
  }

  const service_options opts;
  serve_metrics metrics;
  backend_health health;
  // Orders the installs (backend, metrics and configuration replaced together, one install at a time): it guards no
  // data, each of those being read without it, so it is not annotated for clang's analysis.
  std::mutex reload_mutex;
  snapshot_ptr<const configuration> config;
  // Last, so destroyed first: a backend may complete the decisions it still holds as it is destroyed (the Redis
  // backend completes its queued hits as failed), and those completions record into the metrics above.
  std::unique_ptr<backend> store;
};

// One request under way, and its hits for the backend: kept alive until the backend answers. One allocation for a
// request of up to two descriptors (the plans, hits and outcomes inline).
struct service::request_state final : pending_decision {
  // What one descriptor turned into before the backend answers.
  struct plan {
    enum class kind : std::uint8_t { none, unlimited, limited } what = kind::none;
    const rate_limit_rule* rule = nullptr;  // limited: the rule applied (maybe `made`)
    std::unique_ptr<rate_limit_rule> made;  // an override's own limit
    std::string series;                     // metrics series when not the rule's own
    std::string counter_key;                // moved into the hit sent to the backend
    std::uint32_t n = 1;
    std::optional<limit_override> override_limit;
    std::size_t hit = 0;  // index in the hits sent to the backend
  };

  explicit request_state(impl& s) : self(s) {}
  // The backend's answers: the response, descriptor by descriptor (see service.hpp), recorded in the metrics.
  void complete() override;

  impl& self;
  service::completion done;
  std::atomic<bool> claimed{false};  // by complete() (done is called) or by a decide() that threw (done never is)
  std::shared_ptr<const configuration> config;  // the rules the plans point into
  rls_request request;
  boost::container::small_vector<plan, 2> plans;
  steady::time_point started;
};

service::service(std::unique_ptr<backend> store, std::shared_ptr<const configuration> initial, service_options opts)
    : impl_(std::make_unique<impl>(std::move(store), std::move(initial), opts)) {}
service::~service() = default;

void service::should_rate_limit(rls_request request, completion done) {
  start(std::move(request), std::chrono::system_clock::now(), std::move(done));
}

void service::should_rate_limit_at(rls_request request, std::chrono::system_clock::time_point now, completion done) {
  start(std::move(request), now, std::move(done));
}

// Both forms, with the request and the completion moved once more only (into the request's state).
void service::start(rls_request&& request, std::chrono::system_clock::time_point now, completion&& done) {
  using plan = request_state::plan;
  auto st = std::make_shared<request_state>(*impl_);
  st->started = steady::now();
  st->now = now;
  const auto refuse = [&](std::string message) {
    impl_->metrics.record_request(rls_code::unknown, true, steady::now() - st->started);
    rls_result r;
    r.failure = rls_failure{std::move(message)};
    done(std::move(r));
  };
  if (request.domain.empty()) return refuse("rate limit domain must not be empty");
  if (request.descriptors.empty()) return refuse("rate limit descriptor list must not be empty");
  for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
    const auto& l = request.descriptors[i].limit;
    if (l && unit_seconds(l->per) <= 0) {
      return refuse("descriptor " + std::to_string(i) + ": the limit override's unit " +
                    std::to_string(static_cast<int>(l->per)) +
                    " is unknown; use SECOND (1), MINUTE, HOUR, DAY, MONTH or YEAR (6)");
    }
  }
  st->config = impl_->config.load();
  st->request = std::move(request);
  const configuration& cfg = *st->config;
  const rls_request& req = st->request;
  const bool known = cfg.has_domain(req.domain);

  // Match every descriptor, collecting the names replaced.
  st->plans.resize(req.descriptors.size());
  std::unordered_set<std::string_view> replaced;
  for (std::size_t i = 0; i < req.descriptors.size(); ++i) {
    const rls_descriptor& d = req.descriptors[i];
    plan& p = st->plans[i];
    p.n = d.hits_addend ? *d.hits_addend : std::max<std::uint32_t>(1, req.hits_addend);
    if (!known) continue;
    std::optional<rule_match> m = cfg.find(req.domain, d.entries);
    if (d.limit) {  // the override alone, whatever matched
      const rate_limit_rule* r = m ? m->rule : nullptr;
      p.what = plan::kind::limited;
      p.override_limit = d.limit;
      p.series = descriptor_path(req.domain, d);
      // The request's own entries, as envoyproxy/ratelimit keys an override: its cache key holds the request's
      // values (a rule's share_threshold pattern is not applied: the override replaces that rule).
      p.counter_key = override_counter_key(req.domain, d);
      if (r != nullptr && !r->unlimited &&
          (r->algorithm == algorithm::fixed_window || r->algorithm == algorithm::concurrency)) {
        p.rule = r;  // a fixed window shares the rule's counter (as the Redis key is shared there)
        if (r->algorithm == algorithm::concurrency) {
          p.counter_key = m->counter_key;
          p.override_limit.reset();
          p.series.clear();
        }
      } else {
        p.made = std::make_unique<rate_limit_rule>();
        p.made->full_key = p.series;
        p.made->requests_per_unit = d.limit->requests_per_unit;
        p.made->per = d.limit->per;
        p.made->index = no_rule_index;
        p.rule = p.made.get();
      }
      continue;
    }
    if (!m) continue;  // whitelisted
    p.rule = m->rule;
    p.series = metric_series(*m, req.domain, d);
    p.counter_key = std::move(m->counter_key);
    for (const std::string& name : p.rule->replaces) replaced.insert(name);
    p.what = p.rule->unlimited ? plan::kind::unlimited : plan::kind::limited;
  }
  pending_decision::hit_list& hits = st->hits;
  for (plan& p : st->plans) {
    if (p.what != plan::kind::limited) continue;
    if (!p.override_limit && !p.rule->name.empty() && replaced.contains(p.rule->name)) {
      p.what = plan::kind::none;
      continue;
    }
    p.hit = hits.size();
    hits.push_back({p.rule, std::move(p.counter_key), p.n, p.override_limit});
  }

  st->done = std::move(done);
  st->outcomes.resize(hits.size());
  if (hits.empty()) return st->complete();
  try {
    impl_->store->decide(st);
  } catch (...) {
    if (!st->claimed.exchange(true)) throw;  // else it was answered: the backend threw after it completed the call
  }
}

void service::request_state::complete() {
  if (claimed.exchange(true)) return;  // the decide() that kept it threw: the caller was told by that exception
  const service_options& o = self.opts;
  const rls_request& rq = request;
  rls_result result;
  rls_response& resp = result.response;
  resp.statuses.resize(plans.size());
  const rls_descriptor_status* closest = nullptr;
  std::uint32_t least = max_u32;
  bool over = false;
  std::vector<std::string> leases;
  struct lease_taken {
    rls_descriptor_status* status;
    const hit* on;  // its rule and counter
  };
  std::vector<lease_taken> leased;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const plan& p = plans[i];
    rls_descriptor_status& s = resp.statuses[i];
    if (p.what == plan::kind::unlimited) {
      s.limit_remaining = max_u32;
      continue;
    }
    if (p.what != plan::kind::limited) continue;
    const rate_limit_rule& r = *p.rule;
    hit_outcome& out = outcomes[p.hit];
    s.current_limit = rls_current_limit{r.name, r.requests_per_unit, r.per};
    if (p.override_limit)
      s.current_limit = rls_current_limit{{}, p.override_limit->requests_per_unit, p.override_limit->per};
    if (r.algorithm == algorithm::concurrency)
      s.current_limit = rls_current_limit{r.name, r.concurrency, unit::unknown};
    const bool shadow = r.shadow_mode && !p.override_limit;
    descriptor_counts counts;
    switch (out.result) {
      case hit_outcome::state::failed:
        self.metrics.record_backend_error();
        self.tell(self.health.failed(out.error, o.fail_open, std::chrono::steady_clock::now()));
        counts.hits = p.n;
        s.code = o.fail_open ? rls_code::ok : rls_code::over_limit;
        break;
      case hit_outcome::state::over_limit:
        if (out.consulted && self.health.failing()) self.tell(self.health.answered(std::chrono::steady_clock::now()));
        counts = split_hits(out.limit, out.count_after, p.n, o.near_limit_ratio, shadow);
        s.code = shadow ? rls_code::ok : rls_code::over_limit;
        s.duration_until_reset = std::chrono::ceil<std::chrono::seconds>(out.reset_after);  // as envoyproxy/ratelimit
        break;
      case hit_outcome::state::ok:
        if (out.consulted && self.health.failing()) self.tell(self.health.answered(std::chrono::steady_clock::now()));
        counts = split_hits(out.limit, out.count_after, p.n, o.near_limit_ratio, shadow);
        s.limit_remaining = out.remaining;
        s.duration_until_reset = std::chrono::ceil<std::chrono::seconds>(out.reset_after);  // as envoyproxy/ratelimit
        if (!out.lease.empty()) {
          leases.push_back(std::move(out.lease));
          leased.push_back({&s, &hits[p.hit]});
        }
        break;
    }
    self.metrics.record_descriptor(r, rq.domain, p.series, counts);
    if (s.code == rls_code::over_limit) over = true;
    // (A status of the failure policy says nothing of the count, nor of when it resets: not in the headers.)
    if (out.result == hit_outcome::state::failed) continue;
    if (s.limit_remaining < least) {
      closest = &s;
      least = s.limit_remaining;
    }
    if (s.code == rls_code::over_limit) {
      closest = &s;
      least = 0;
    }
  }
  resp.overall_code = over ? rls_code::over_limit : rls_code::ok;
  if (over && !o.shadow_mode) {
    // The leases go back below: each concurrency status says what is held without them, as if the request had not
    // asked — the least remaining any status of its counter saw (the one decided last) plus every permit the request
    // took on that counter; no reset when nothing else is held (as a check that finds none held answers).
    std::vector<std::uint32_t> without(leased.size());
    for (std::size_t i = 0; i < leased.size(); ++i) {
      std::uint64_t back = 0;
      std::uint32_t least_seen = max_u32;
      for (const lease_taken& other : leased) {
        if (other.on->rule != leased[i].on->rule || other.on->counter_key != leased[i].on->counter_key) continue;
        back += other.on->n;
        least_seen = std::min(least_seen, other.status->limit_remaining);
      }
      const auto& limit = leased[i].status->current_limit;
      without[i] = static_cast<std::uint32_t>(
          std::min<std::uint64_t>(limit ? limit->requests_per_unit : max_u32, least_seen + back));
    }
    for (std::size_t i = 0; i < leased.size(); ++i) {
      rls_descriptor_status& s = *leased[i].status;
      s.limit_remaining = without[i];
      if (s.current_limit && without[i] == s.current_limit->requests_per_unit)
        s.duration_until_reset = std::chrono::nanoseconds{0};
    }
  }
  if (o.headers != service_options::header_style::none && closest != nullptr) {
    const header_names h = names_of(o.headers);
    const auto reset =
        std::chrono::ceil<std::chrono::seconds>(closest->duration_until_reset.value_or(std::chrono::nanoseconds{0}));
    resp.response_headers_to_add.push_back(
        {std::string(h.limit), std::to_string(closest->current_limit->requests_per_unit)});
    resp.response_headers_to_add.push_back({std::string(h.remaining), std::to_string(closest->limit_remaining)});
    resp.response_headers_to_add.push_back({std::string(h.reset), std::to_string(reset.count())});
  }
  if (over && o.shadow_mode) {
    resp.overall_code = rls_code::ok;
    self.metrics.record_global_shadow_mode();
  }
  if (resp.overall_code == rls_code::over_limit) {
    for (std::string& l : leases) self.release(std::move(l), [](const release_result&) {});
  } else {
    for (std::string& l : leases) resp.response_headers_to_add.push_back({"x-admit-lease", std::move(l)});
  }
  self.metrics.record_request(resp.overall_code, false, steady::now() - started);
  if (o.on_decision) o.on_decision(rq, resp);
  done(std::move(result));
}

void service::release(std::string lease, std::function<void(release_result)> done) {
  impl_->release(std::move(lease), std::move(done));
}

void service::abandon_waiting() { impl_->store->abandon(); }

void service::reload(std::shared_ptr<const configuration> next) {
  if (!next) throw std::invalid_argument("admit serve: reload needs a configuration, got none");
  impl_->install(std::move(next));
}

std::shared_ptr<const configuration> service::current() const { return impl_->config.load(); }

std::string service::metrics_text() const { return impl_->metrics.text(impl_->health.failing()); }

void service::record_reload_failure() { impl_->metrics.record_reload(false); }

void service::record_invalid_request(std::chrono::nanoseconds latency) {
  impl_->metrics.record_request(rls_code::unknown, true, latency);
}

void service::report_backend_health(std::chrono::steady_clock::time_point now) {
  impl_->tell(impl_->health.summary_due(now));
}

}  // namespace admit::serve
