// A stand-in for engine/service.cpp and the in-process backend (see ../CMakeLists.txt): enough of the service for the
// transports' end-to-end test — find, fixed windows, overall code, simple counters. Deleted once engine/ lands.
#include <atomic>
#include <map>
#include <mutex>
#include <sstream>

#include "serve/engine/service.hpp"
#include "serve/stand_in/backend.hpp"

namespace admit::serve {
namespace {

class fixed_window_backend final : public backend {
 public:
  void decide(std::vector<hit> hits, std::chrono::system_clock::time_point now, completion done) override {
    std::vector<hit_outcome> out;
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    const std::lock_guard lock(mutex_);
    for (const hit& h : hits) {
      const std::int64_t len = unit_seconds(h.rule->per);
      const std::int64_t window = secs / len;
      std::uint64_t& count = counts_[h.counter_key + "_" + std::to_string(window)];
      count += h.n;
      hit_outcome o;
      o.limit = h.rule->requests_per_unit;
      o.count_after = count;
      o.result = count > o.limit ? hit_outcome::state::over_limit : hit_outcome::state::ok;
      o.remaining = count > o.limit ? 0 : static_cast<std::uint32_t>(o.limit - count);
      o.reset_after = std::chrono::seconds((window + 1) * len - secs);
      out.push_back(o);
    }
    done(std::move(out));
  }
  void release(std::string, std::function<void(bool)> done) override { done(false); }
  void configure(const configuration&) override {}

 private:
  std::mutex mutex_;
  std::map<std::string, std::uint64_t> counts_;
};

struct state {
  std::unique_ptr<backend> store;
  service_options opts;
  mutable std::mutex mutex;
  std::shared_ptr<const configuration> config;
  std::map<std::pair<std::string, std::string>, std::pair<std::uint64_t, std::uint64_t>> counts;  // total, over
  std::atomic<std::uint64_t> reloads{0}, reload_failures{0};
};

std::map<const service*, std::unique_ptr<state>>& states() {
  static std::map<const service*, std::unique_ptr<state>> all;
  return all;
}
state& of(const service* s) { return *states().at(s); }

}  // namespace

std::unique_ptr<backend> stand_in::make_fixed_window_backend() { return std::make_unique<fixed_window_backend>(); }

service::service(std::unique_ptr<backend> store, std::shared_ptr<const configuration> initial, service_options opts) {
  auto st = std::make_unique<state>();
  st->store = std::move(store);
  st->config = std::move(initial);
  st->opts = opts;
  states()[this] = std::move(st);
}
service::~service() { states().erase(this); }

void service::should_rate_limit(rls_request request, completion done) {
  state& st = of(this);
  const auto cfg = current();
  if (request.domain.empty()) return done({rls_failure{"rate limit domain must not be empty"}, {}});
  if (request.descriptors.empty()) return done({rls_failure{"rate limit descriptor list must not be empty"}, {}});
  rls_response res;
  res.statuses.resize(request.descriptors.size());
  std::vector<hit> hits;
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
    const auto& d = request.descriptors[i];
    auto m = cfg->find(request.domain, d.entries);
    if (!m || m->rule->unlimited) continue;
    hit h;
    h.rule = m->rule;
    h.counter_key = m->counter_key;
    h.n = d.hits_addend.value_or(request.hits_addend == 0 ? 1 : request.hits_addend);
    hits.push_back(h);
    at.push_back(i);
  }
  st.store->decide(hits, std::chrono::system_clock::now(), [&](std::vector<hit_outcome> outs) {
    for (std::size_t k = 0; k < outs.size(); ++k) {
      auto& s = res.statuses[at[k]];
      const rate_limit_rule& r = *hits[k].rule;
      s.code = outs[k].result == hit_outcome::state::over_limit ? rls_code::over_limit : rls_code::ok;
      s.current_limit = rls_current_limit{r.name, r.requests_per_unit, r.per};
      s.limit_remaining = outs[k].remaining;
      s.duration_until_reset = outs[k].reset_after;
      if (s.code == rls_code::over_limit) res.overall_code = rls_code::over_limit;
      const std::lock_guard lock(st.mutex);
      auto& c = st.counts[{request.domain, r.full_key}];
      c.first += hits[k].n;
      if (s.code == rls_code::over_limit) c.second += hits[k].n;
    }
  });
  done({std::nullopt, std::move(res)});
}

void service::release(std::string lease, std::function<void(bool)> done) {
  of(this).store->release(std::move(lease), std::move(done));
}

void service::reload(std::shared_ptr<const configuration> next) {
  state& st = of(this);
  st.store->configure(*next);
  const std::lock_guard lock(st.mutex);
  st.config = std::move(next);
  ++st.reloads;
}

std::shared_ptr<const configuration> service::current() const {
  const state& st = *states().at(this);
  const std::lock_guard lock(st.mutex);
  return st.config;
}

std::string service::metrics_text() const {
  const state& st = *states().at(this);
  std::ostringstream out;
  const std::lock_guard lock(st.mutex);
  out << "# HELP admit_serve_hits_total Hits decided.\n# TYPE admit_serve_hits_total counter\n";
  for (const auto& [k, v] : st.counts) {
    out << "admit_serve_hits_total{domain=\"" << k.first << "\",key=\"" << k.second << "\"} " << v.first << "\n";
  }
  out << "# HELP admit_serve_over_limit_total Hits over the limit.\n# TYPE admit_serve_over_limit_total counter\n";
  for (const auto& [k, v] : st.counts) {
    out << "admit_serve_over_limit_total{domain=\"" << k.first << "\",key=\"" << k.second << "\"} " << v.second << "\n";
  }
  out << "# TYPE admit_serve_config_reloads_total counter\nadmit_serve_config_reloads_total " << st.reloads << "\n";
  out << "# TYPE admit_serve_config_reload_failures_total counter\nadmit_serve_config_reload_failures_total "
      << st.reload_failures << "\n";
  return out.str();
}

void service::record_reload_failure() { ++of(this).reload_failures; }

}  // namespace admit::serve
