#include "serve/engine/in_process_backend.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/floor_div.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/keyed.hpp"
#include "admit/keyed_concurrency_limiter.hpp"
#include "admit/keyed_policy.hpp"
#include "admit/rate.hpp"
#include "serve/engine/charging_policies.hpp"
#include "serve/engine/lease_table.hpp"
#include "serve/engine/snapshot_ptr.hpp"
#include "serve/engine/window_policies.hpp"

namespace admit::serve {

namespace {

constexpr std::int64_t ns_per_second = 1'000'000'000;

std::uint32_t clamp_u32(std::int64_t v) noexcept {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(v, 0, std::numeric_limits<std::uint32_t>::max()));
}

// Up to the next whole second: the service reports durations in seconds, as envoyproxy/ratelimit does.
std::chrono::nanoseconds ceil_seconds(std::chrono::nanoseconds d) noexcept {
  return std::chrono::ceil<std::chrono::seconds>(d);
}

hit_outcome failed(std::string why) {
  hit_outcome o;
  o.result = hit_outcome::state::failed;
  o.error = std::move(why);
  return o;
}

hit_outcome key_cap_reached(std::size_t max_keys) {
  return failed("key cap reached: the store of this rule holds max_keys = " + std::to_string(max_keys) + " busy keys");
}

// A rule's identity across reloads: what its counters mean. A fixed window that counts every hit counts hits, whatever
// its limit: a changed requests_per_unit keeps the count, as envoyproxy/ratelimit's and the Redis backend's keys (which
// do not name the limit) keep theirs. The other algorithms' state is in units of their rate (and a window under
// over_limit_hits: drop holds only what its limit admitted): a changed rate counts afresh.
std::string identity(const rate_limit_rule& r) {
  std::string id = r.full_key;
  id += '\x1f';
  id += to_string(r.algorithm);
  const bool counts_hits = r.algorithm == algorithm::fixed_window && over_limit_hits_of(r) == over_limit_hits::count;
  id += '\x1f' + (counts_hits ? std::string("-") : std::to_string(r.requests_per_unit)) + '\x1f' +
        std::string(to_string(r.per));
  id += '\x1f' + (r.burst ? std::to_string(*r.burst) : std::string("-"));
  id += '\x1f' + std::to_string(r.concurrency);
  id += '\x1f' + std::string(to_string(over_limit_hits_of(r)));
  id += r.unlimited ? "\x1fu" : "";
  return id;
}

// envoyproxy/ratelimit's fixed windows of every unit, each store created on first use. Every hit is counted, or
// (drop_above set: a rule's own counters under over_limit_hits: drop) only the hits that keep the count within it.
class fixed_counters {
 public:
  using store = keyed<upstream_fixed_window>;
  explicit fixed_counters(std::size_t max_keys, std::optional<std::uint32_t> drop_above = std::nullopt)
      : max_keys_(max_keys), drop_above_(drop_above) {}

  hit_outcome decide(std::string_view key, unit u, std::uint32_t limit, std::uint32_t n, std::int64_t now_ns) {
    const std::int64_t unit_s = unit_seconds(u);
    if (unit_s <= 0) return failed("no unit to count the limit in");
    const decision d = get(u).decide_at(key, unix_clock::time_point{std::chrono::nanoseconds{now_ns}}, n);
    if (is_key_limit_refusal(d)) return key_cap_reached(max_keys_);
    hit_outcome o;
    const auto count = static_cast<std::uint64_t>(d.remaining);
    o.limit = limit;
    o.count_after = count;
    if (count > limit) {
      o.result = hit_outcome::state::over_limit;
    } else {
      o.remaining = static_cast<std::uint32_t>(limit - count);
    }
    const std::int64_t now_s = admit::detail::floor_div(now_ns, ns_per_second);
    o.reset_after = std::chrono::seconds{unit_s - admit::detail::floor_mod(now_s, unit_s)};
    return o;
  }

  std::size_t keys() const {
    std::size_t n = 0;
    for (const auto& s : stores_) {
      if (const store* p = s.load()) n += p->size();
    }
    return n;
  }

 private:
  store& get(unit u) {
    const auto i = static_cast<std::size_t>(u);
    if (store* p = stores_[i].load()) return *p;
    const admit::detail::lock_guard lock(mutex_);
    if (!owned_[i]) {
      owned_[i] =
          std::make_unique<store>(upstream_fixed_window::config_type{unit_seconds(u) * ns_per_second,
                                                                     drop_above_.has_value(), drop_above_.value_or(0)},
                                  keyed_options{.max_keys = max_keys_});
      stores_[i].store(owned_[i].get());
    }
    return *owned_[i];
  }

  const std::size_t max_keys_;
  const std::optional<std::uint32_t> drop_above_;
  std::array<std::atomic<store*>, 8> stores_{};  // each set once, from owned_ (read without the mutex)
  admit::detail::mutex mutex_;
  std::array<std::unique_ptr<store>, 8> owned_ ADMIT_GUARDED_BY(mutex_);
};

struct rule_state {
  virtual ~rule_state() = default;
  virtual hit_outcome decide(const hit& h, std::int64_t now_ns) = 0;
  virtual std::size_t keys() const = 0;
  // The fixed-window counters of a fixed_window rule (overrides of its limit count there too); null otherwise.
  virtual fixed_counters* fixed() noexcept { return nullptr; }
};

// A fixed_window rule. Under over_limit_hits: drop its counter holds only the hits it admitted, so an override of its
// limit (which envoyproxy/ratelimit decides on a counter of every hit) is counted apart, with the overrides alone.
struct fixed_state final : rule_state {
  fixed_state(const rate_limit_rule& r, std::size_t max_keys)
      : per(r.per),
        limit(r.requests_per_unit),
        drop(over_limit_hits_of(r) == over_limit_hits::drop),
        c(max_keys, drop ? std::optional<std::uint32_t>(limit) : std::nullopt) {}
  // The limit is the hit's rule's: a reload that changed it keeps this state (see identity()).
  hit_outcome decide(const hit& h, std::int64_t now_ns) override {
    return c.decide(h.counter_key, per, h.rule->requests_per_unit, h.n, now_ns);
  }
  std::size_t keys() const override { return c.keys(); }
  fixed_counters* fixed() noexcept override { return drop ? nullptr : &c; }
  unit per;
  std::uint32_t limit;
  bool drop;
  fixed_counters c;
};

// admit's own algorithms: a refused hit counts nothing; or, with a charging policy (charging_policies.hpp), is
// charged all the same.
template <class Policy>
struct rate_state final : rule_state {
  template <class... Args>
  rate_state(std::uint32_t limit_, std::chrono::seconds per_, std::size_t max_keys_, Args&&... args)
      : limit(limit_),
        per(per_),
        max_keys(max_keys_),
        store(std::forward<Args>(args)..., keyed_options{.max_keys = max_keys_}) {}
  hit_outcome decide(const hit& h, std::int64_t now_ns) override {
    const decision d = store.decide_at(h.counter_key, unix_clock::time_point{std::chrono::nanoseconds{now_ns}}, h.n);
    if (is_key_limit_refusal(d)) return key_cap_reached(max_keys);
    hit_outcome o;
    o.limit = limit;
    if (!charging_verdict_over(d)) {
      o.reset_after = ceil_seconds(d.reset_after);
      o.remaining = clamp_u32(d.remaining);
      o.count_after = limit > o.remaining ? limit - o.remaining : 0;
    } else {
      o.result = hit_outcome::state::over_limit;
      o.reset_after = refused_reset_after(d, per);
      o.count_after = std::uint64_t{limit} + h.n;  // so that every refused hit counts as over the limit
    }
    return o;
  }
  std::size_t keys() const override { return store.size(); }
  std::uint32_t limit;
  std::chrono::seconds per;  // the rule's unit
  std::size_t max_keys;
  keyed<Policy> store;
};

// A rule that can admit nothing (requests_per_unit 0 under admit's algorithms, whose limiters need a positive rate;
// concurrency 0). A refused hit never passes: its reset is one `per` (0 for a concurrency rule, which has no unit).
struct deny_state final : rule_state {
  explicit deny_state(std::chrono::seconds per_ = std::chrono::seconds::zero()) : per(per_) {}
  hit_outcome decide(const hit& h, std::int64_t) override {
    hit_outcome o;
    o.result = h.n == 0 ? hit_outcome::state::ok : hit_outcome::state::over_limit;
    if (h.n > 0) o.reset_after = per;
    o.count_after = h.n;
    return o;
  }
  std::chrono::seconds per;
  std::size_t keys() const override { return 0; }
};

// At most `limit` permits per key held at once: the library's keyed_concurrency_limiter counts them (never waiting),
// and each admitted hit's permit is held in the lease table under the id the caller gets, until released or expired.
struct concurrency_state final : rule_state {
  concurrency_state(std::uint32_t limit_, std::size_t max_keys, lease_table& leases_, std::uint64_t owner_)
      : limit(limit_),
        // max_waiters 1 with a zero timeout: nothing ever waits, and a refusal says why — timeout (short),
        // exceeds_capacity (n above the limit) or queue_full (a new key refused for the store's cap).
        counts(std::make_shared<keyed_concurrency_limiter<>>(keyed_concurrency_options{
            .limit = limit_, .max_waiters = 1, .timeout = std::chrono::nanoseconds::zero(), .max_keys = max_keys})),
        leases(leases_),
        owner(owner_) {}
  ~concurrency_state() override { leases.drop_owner(owner); }
  hit_outcome decide(const hit& h, std::int64_t now_ns) override {
    leases.expire(now_ns);  // their permits are free from their expiry on
    hit_outcome o;
    o.limit = limit;
    if (h.n > 0) {
      auto p = counts->try_acquire_for(h.counter_key, std::chrono::nanoseconds::zero(), h.n);
      if (!p) {
        if (p.error() == errc::queue_full) return key_cap_reached(counts->max_keys());
        o.result = hit_outcome::state::over_limit;
        o.count_after = static_cast<std::uint64_t>(counts->in_flight(h.counter_key)) + h.n;
        o.reset_after = ceil_seconds(leases.ttl());  // the longest the permits in use can stay held
        return o;
      }
      auto id = leases.hold(owner, counts, std::move(*p), now_ns);
      if (!id) return failed("lease table full: max_leases leases are held");
      o.lease = std::move(*id);
    }
    const std::int64_t in_flight = counts->in_flight(h.counter_key);
    // As the Redis backend: while permits are held, the longest they can stay held; nothing to wait for when none is.
    if (in_flight > 0) o.reset_after = ceil_seconds(leases.ttl());
    o.count_after = static_cast<std::uint64_t>(in_flight);
    o.remaining = clamp_u32(limit - in_flight);
    return o;
  }
  std::size_t keys() const override { return counts->size(); }
  std::uint32_t limit;
  // Shared with the lease table's leases, which keep it alive until their permits are released.
  std::shared_ptr<keyed_concurrency_limiter<>> counts;
  lease_table& leases;
  std::uint64_t owner;
};

}  // namespace

struct in_process_backend::impl {
  // The states of one configuration: by rule index (with the rule they were made for, to tell a rule of another
  // configuration apart) and by identity (for decisions in flight on the previous configuration).
  struct table {
    std::vector<std::pair<const rate_limit_rule*, std::shared_ptr<rule_state>>> by_index;
    std::unordered_map<std::string, std::shared_ptr<rule_state>> by_identity;
  };

  explicit impl(const in_process_options& o)
      : opts(o), leases({.ttl = o.lease_ttl, .max_leases = o.max_leases}), overrides(o.max_keys) {
    if (o.max_keys == 0) throw std::invalid_argument("admit serve: max_keys must be at least 1, got 0");
    current.store(std::make_shared<const table>());
  }

  std::shared_ptr<rule_state> make_state(const rate_limit_rule& r) {
    const std::size_t k = opts.max_keys;
    const auto per = std::chrono::seconds{unit_seconds(r.per)};
    const std::uint32_t rpu = r.requests_per_unit;
    const std::int64_t burst = r.burst ? *r.burst : rpu;
    switch (r.algorithm) {
      case algorithm::fixed_window:
        return std::make_shared<fixed_state>(r, k);
      case algorithm::concurrency:
        if (r.concurrency == 0) return std::make_shared<deny_state>();  // no permit: every hit but a check refused
        return std::make_shared<concurrency_state>(r.concurrency, k, leases, next_owner++);
      case algorithm::sliding_window:
      case algorithm::gcra:
      case algorithm::token_bucket:
        break;
    }
    if (rpu == 0 || per.count() <= 0 || burst < 1) return std::make_shared<deny_state>(per);
    const rate rt = rate::per(static_cast<double>(rpu), per);
    switch (r.algorithm) {
      case algorithm::sliding_window:
        return std::make_shared<rate_state<keyed_sliding_window>>(
            rpu, per, k, keyed_sliding_window::config_type{rpu, std::chrono::nanoseconds{per}.count()});
      case algorithm::gcra:
        if (over_limit_hits_of(r) == over_limit_hits::count) {
          return std::make_shared<rate_state<charging_gcra>>(rpu, per, k, charging_gcra::base::make_config(rt, burst));
        }
        return std::make_shared<rate_state<keyed_gcra_policy<unix_clock>>>(
            rpu, per, k, keyed_gcra_policy<unix_clock>::make_config(rt, burst));
      case algorithm::token_bucket:
        if (over_limit_hits_of(r) == over_limit_hits::count) {
          return std::make_shared<rate_state<charging_token_bucket>>(
              rpu, per, k, charging_token_bucket::base::make_config(rt, burst));
        }
        return std::make_shared<rate_state<keyed_token_bucket_policy<unix_clock>>>(
            rpu, per, k, keyed_token_bucket_policy<unix_clock>::make_config(rt, burst));
      default:
        break;
    }
    return std::make_shared<deny_state>();
  }

  hit_outcome decide_one(const table& t, const hit& h, std::int64_t now_ns) {
    if (h.rule == nullptr) return failed("no rule");
    const rate_limit_rule& r = *h.rule;
    if (r.unlimited) return {};
    const bool own = r.index != no_rule_index;
    std::shared_ptr<rule_state> made;  // a rule of a configuration replaced while this decision was under way
    rule_state* s = nullptr;
    if (own) {
      if (r.index < t.by_index.size() && t.by_index[r.index].first == &r) {
        s = t.by_index[r.index].second.get();
      } else if (const auto it = t.by_identity.find(identity(r)); it != t.by_identity.end()) {
        s = it->second.get();
      } else if (r.algorithm == algorithm::concurrency) {
        // A lease of a state made for this one decision would be dropped with it at the end of the call, while the
        // answer carried its id: the decision is answered by the failure policy instead.
        return failed("the concurrency rule " + r.full_key + " was changed by a reload while this request was decided");
      } else {
        made = make_state(r);
        s = made.get();
      }
    }
    if (h.override_limit && r.algorithm != algorithm::concurrency) {
      fixed_counters* c = s != nullptr && s->fixed() != nullptr ? s->fixed() : &overrides;
      return c->decide(h.counter_key, h.override_limit->per, h.override_limit->requests_per_unit, h.n, now_ns);
    }
    if (s == nullptr) return failed("a rule made for one request without a limit override");
    return s->decide(h, now_ns);
  }

  // out[i] = the outcome of hits[i], all on the rules current at the call.
  void decide_all(std::span<const hit> hits, std::chrono::system_clock::time_point now, std::span<hit_outcome> out) {
    const std::int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    const std::shared_ptr<const table> t = current.load();
    for (std::size_t i = 0; i < hits.size(); ++i) out[i] = decide_one(*t, hits[i], now_ns);
  }

  const in_process_options opts;
  lease_table leases;  // before the states: a concurrency state drops its leases when destroyed
  fixed_counters overrides;
  std::atomic<std::uint64_t> next_owner{1};
  // Orders the configure calls (each reads `current` and replaces it): it guards no data, `current` being read
  // without it, so it is not annotated for clang's analysis.
  std::mutex configure_mutex;
  snapshot_ptr<const table> current;
};

in_process_backend::in_process_backend(in_process_options opts) : impl_(std::make_unique<impl>(opts)) {}
in_process_backend::~in_process_backend() = default;

std::vector<hit_outcome> in_process_backend::decide_at(std::span<const hit> hits,
                                                       std::chrono::system_clock::time_point now) {
  std::vector<hit_outcome> out(hits.size());
  impl_->decide_all(hits, now, out);
  return out;
}

void in_process_backend::decide(std::shared_ptr<pending_decision> call) {
  impl_->decide_all(call->hits, call->now, call->outcomes);
  call->complete();
}

bool in_process_backend::release_at(std::string_view lease, std::chrono::system_clock::time_point now) {
  return impl_->leases.release(lease,
                               std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
}

void in_process_backend::release(std::string lease, std::function<void(release_result)> done) {
  const bool released = release_at(lease, std::chrono::system_clock::now());
  done({released ? release_result::state::released : release_result::state::not_held, {}});
}

void in_process_backend::configure(const configuration& next) { configure_rules(next.rules()); }

void in_process_backend::configure_rules(std::span<const rate_limit_rule> rules) {
  std::lock_guard lock(impl_->configure_mutex);
  const std::shared_ptr<const impl::table> old = impl_->current.load();
  auto t = std::make_shared<impl::table>();
  t->by_index.resize(rules.size());
  for (const rate_limit_rule& r : rules) {
    if (r.index >= rules.size()) {
      throw std::invalid_argument("admit serve: rule " + r.full_key + " has index " + std::to_string(r.index) +
                                  ", beyond the " + std::to_string(rules.size()) + " rules");
    }
    std::string id = identity(r);
    std::shared_ptr<rule_state> s;
    if (const auto it = t->by_identity.find(id); it != t->by_identity.end()) {
      s = it->second;
    } else if (const auto was = old->by_identity.find(id); was != old->by_identity.end()) {
      s = was->second;
    } else {
      s = impl_->make_state(r);
    }
    t->by_index[r.index] = {&r, s};
    t->by_identity.emplace(std::move(id), std::move(s));
  }
  impl_->current.store(std::move(t));
}

std::size_t in_process_backend::keys() const {
  const std::shared_ptr<const impl::table> t = impl_->current.load();
  std::size_t n = impl_->overrides.keys();
  for (const auto& [id, s] : t->by_identity) n += s->keys();
  return n;
}

std::size_t in_process_backend::leases() const { return impl_->leases.size(); }

}  // namespace admit::serve
