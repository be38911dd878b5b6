#include "serve/engine/serve_metrics.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/metrics/prometheus.hpp"
#include "serve/engine/backend.hpp"
#include "serve/engine/snapshot_ptr.hpp"

namespace admit::serve {

descriptor_counts split_hits(std::uint64_t limit, std::uint64_t count_after, std::uint64_t n, double near_limit_ratio,
                             bool shadow) noexcept {
  descriptor_counts c;
  c.hits = n;
  const std::uint64_t before = count_after >= n ? count_after - n : 0;
  const auto near = static_cast<std::uint64_t>(
      std::floor(static_cast<double>(static_cast<float>(limit) * static_cast<float>(near_limit_ratio))));
  if (count_after > limit) {
    if (before >= limit) {
      c.over_limit = n;
    } else {
      c.over_limit = count_after - limit;
      c.near_limit = limit - std::max(near, before);
    }
    if (shadow) c.shadow_mode = c.over_limit;
  } else {
    c.within_limit = n;
    if (count_after > near) c.near_limit = before >= near ? n : count_after - near;
  }
  return c;
}

namespace {

using registry = admit::metrics::registry;

struct slot {
  std::string domain;
  std::string rule;
  std::atomic<std::uint64_t> decisions{0}, hits{0}, over_limit{0}, near_limit{0}, within_limit{0}, shadow_mode{0};
};

constexpr std::memory_order relaxed = std::memory_order_relaxed;

// The text format is UTF-8: a request's value that is not (a detailed metric's series carries it) has each byte of
// an invalid sequence replaced by U+FFFD, so that /metrics always parses.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && len > 1) {  // no overlong forms, surrogates or code points above U+10FFFF
      std::uint32_t cp = c & (0x7Fu >> len);
      for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
      static constexpr std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= least[len] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

struct serve_metrics::impl {
  // The rules installed now, each with its series once it has been found.
  struct fast_entry {
    const rate_limit_rule* rule = nullptr;
    std::atomic<slot*> series{nullptr};
  };
  struct fast_table {
    std::size_t size = 0;
    std::unique_ptr<fast_entry[]> entries;
  };

  impl(std::size_t max_extra, std::size_t max_bytes) : max_extra_series(max_extra), max_extra_bytes(max_bytes) {
    fast.store(std::make_shared<const fast_table>());
  }

  // The series (domain, name), created when new; extra: bounded by max_extra_series and max_extra_bytes (null beyond
  // either).
  slot* find_or_add(std::string_view domain, std::string_view name, bool extra) {
    std::string key(domain);
    key += '\0';
    key += name;
    const admit::detail::lock_guard lock(mutex);
    if (const auto it = slots.find(key); it != slots.end()) return it->second.get();
    if (extra && (extra_series >= max_extra_series || key.size() > max_extra_bytes - extra_bytes)) return nullptr;
    if (extra) {
      ++extra_series;
      extra_bytes += key.size();
    }
    auto s = std::make_unique<slot>();
    s->domain = valid_utf8(domain);
    s->rule = valid_utf8(name);
    slot* p = s.get();
    slots.emplace(std::move(key), std::move(s));
    return p;
  }

  slot* rule_series(const rate_limit_rule& rule, std::string_view domain) {
    const std::shared_ptr<const fast_table> t = fast.load();
    if (rule.index < t->size && t->entries[rule.index].rule == &rule) {
      fast_entry& e = t->entries[rule.index];
      if (slot* s = e.series.load()) return s;
      slot* s = find_or_add(domain, rule.full_key, false);
      e.series.store(s);
      return s;
    }
    return find_or_add(domain, rule.full_key, false);  // a rule of a configuration replaced meanwhile
  }

  const std::size_t max_extra_series;
  const std::size_t max_extra_bytes;
  snapshot_ptr<const fast_table> fast;
  mutable admit::detail::mutex mutex;
  // By domain '\0' series name; never removed.
  std::map<std::string, std::unique_ptr<slot>> slots ADMIT_GUARDED_BY(mutex);
  std::size_t extra_series ADMIT_GUARDED_BY(mutex) = 0;
  // Of the extra series' keys (domain, name): at most max_extra_bytes.
  std::size_t extra_bytes ADMIT_GUARDED_BY(mutex) = 0;

  std::array<std::atomic<std::uint64_t>, registry::bucket_bound_count + 1> latency_buckets{};  // not cumulative
  std::atomic<std::uint64_t> latency_sum_ns{0};
  std::atomic<std::uint64_t> requests_ok{0}, requests_over{0}, requests_invalid{0};
  std::atomic<std::uint64_t> global_shadow{0}, backend_errors{0}, reloads_ok{0}, reloads_failed{0};
};

serve_metrics::serve_metrics(std::size_t max_extra_series, std::size_t max_extra_bytes)
    : impl_(std::make_unique<impl>(max_extra_series, max_extra_bytes)) {}
serve_metrics::~serve_metrics() = default;

void serve_metrics::configure(std::span<const rate_limit_rule> rules) {
  auto t = std::make_shared<impl::fast_table>();
  t->size = rules.size();
  t->entries = std::make_unique<impl::fast_entry[]>(rules.size());
  for (const rate_limit_rule& r : rules) {
    if (r.index < rules.size()) t->entries[r.index].rule = &r;
  }
  impl_->fast.store(std::move(t));
}

void serve_metrics::record_descriptor(const rate_limit_rule& rule, std::string_view domain, std::string_view series,
                                      const descriptor_counts& c) {
  slot* s = nullptr;
  if (!series.empty()) s = impl_->find_or_add(domain, series, true);
  if (s == nullptr) {
    s = rule.index == no_rule_index ? impl_->find_or_add(domain, "_other", false) : impl_->rule_series(rule, domain);
  }
  s->decisions.fetch_add(1, relaxed);
  s->hits.fetch_add(c.hits, relaxed);
  if (c.over_limit != 0) s->over_limit.fetch_add(c.over_limit, relaxed);
  if (c.near_limit != 0) s->near_limit.fetch_add(c.near_limit, relaxed);
  if (c.within_limit != 0) s->within_limit.fetch_add(c.within_limit, relaxed);
  if (c.shadow_mode != 0) s->shadow_mode.fetch_add(c.shadow_mode, relaxed);
}

void serve_metrics::record_request(rls_code overall, bool failure, std::chrono::nanoseconds latency) {
  if (failure) {
    impl_->requests_invalid.fetch_add(1, relaxed);
  } else if (overall == rls_code::over_limit) {
    impl_->requests_over.fetch_add(1, relaxed);
  } else {
    impl_->requests_ok.fetch_add(1, relaxed);
  }
  static constexpr auto bounds = registry::bucket_bounds();
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), latency);  // the first bound >= latency
  impl_->latency_buckets[static_cast<std::size_t>(at - bounds.begin())].fetch_add(1, relaxed);
  impl_->latency_sum_ns.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, latency.count())), relaxed);
}

void serve_metrics::record_backend_error(std::uint64_t n) { impl_->backend_errors.fetch_add(n, relaxed); }
void serve_metrics::record_global_shadow_mode() { impl_->global_shadow.fetch_add(1, relaxed); }
void serve_metrics::record_reload(bool success) {
  (success ? impl_->reloads_ok : impl_->reloads_failed).fetch_add(1, relaxed);
}

std::string serve_metrics::text(bool backend_failing) const {
  struct row {
    std::string labels;
    std::uint64_t v[6];
  };
  std::vector<row> rows;
  {
    const admit::detail::lock_guard lock(impl_->mutex);
    rows.reserve(impl_->slots.size());
    for (const auto& [key, s] : impl_->slots) {
      rows.push_back({"domain=\"" + registry::escape_label_value(s->domain) + "\",rule=\"" +
                          registry::escape_label_value(s->rule) + "\"",
                      {s->decisions.load(relaxed), s->hits.load(relaxed), s->over_limit.load(relaxed),
                       s->near_limit.load(relaxed), s->within_limit.load(relaxed), s->shadow_mode.load(relaxed)}});
    }
  }
  std::string out;
  const auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  };
  const auto line = [&](std::string_view name, std::string_view labels, std::uint64_t value) {
    out.append(name);
    if (!labels.empty()) out.append("{").append(labels).append("}");
    out.append(" ").append(registry::format_number(value)).append("\n");
  };
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> per_rule = {{
      {"admit_serve_decisions_total", "Descriptors decided against the rule."},
      {"admit_serve_hits_total", "Hits (hits_addend) counted against the rule."},
      {"admit_serve_over_limit_total", "Hits over the rule's limit."},
      {"admit_serve_near_limit_total", "Hits above the near-limit share of the rule's limit (0.8), up to the limit."},
      {"admit_serve_within_limit_total", "Hits within the rule's limit."},
      {"admit_serve_shadow_mode_total", "Over-limit hits answered OK by the rule's shadow mode."},
  }};
  for (std::size_t f = 0; f < per_rule.size(); ++f) {
    family(per_rule[f].first, "counter", per_rule[f].second);
    for (const row& r : rows) line(per_rule[f].first, r.labels, r.v[f]);
  }
  family("admit_serve_requests_total", "counter",
         "Requests answered, by overall code (invalid: refused as malformed).");
  line("admit_serve_requests_total", "code=\"ok\"", impl_->requests_ok.load(relaxed));
  line("admit_serve_requests_total", "code=\"over_limit\"", impl_->requests_over.load(relaxed));
  line("admit_serve_requests_total", "code=\"invalid\"", impl_->requests_invalid.load(relaxed));
  family("admit_serve_global_shadow_mode_total", "counter", "Over-limit answers turned OK by the global shadow mode.");
  line("admit_serve_global_shadow_mode_total", {}, impl_->global_shadow.load(relaxed));
  family("admit_serve_backend_errors_total", "counter",
         "Descriptors the backend failed to count, and lease releases it could not be asked about.");
  line("admit_serve_backend_errors_total", {}, impl_->backend_errors.load(relaxed));
  family("admit_serve_backend_failing", "gauge", "1 while the backend fails to count (the failure policy answers).");
  line("admit_serve_backend_failing", {}, backend_failing ? 1 : 0);
  family("admit_serve_config_reloads_total", "counter", "Configurations installed (success) or refused (failure).");
  line("admit_serve_config_reloads_total", "result=\"success\"", impl_->reloads_ok.load(relaxed));
  line("admit_serve_config_reloads_total", "result=\"failure\"", impl_->reloads_failed.load(relaxed));

  family("admit_serve_decision_seconds", "histogram", "Time from a request to its answer.");
  static constexpr auto le = registry::bucket_bound_labels();
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < le.size(); ++i) {
    cumulative += impl_->latency_buckets[i].load(relaxed);
    line("admit_serve_decision_seconds_bucket", "le=\"" + std::string(le[i]) + "\"", cumulative);
  }
  cumulative += impl_->latency_buckets[le.size()].load(relaxed);
  line("admit_serve_decision_seconds_bucket", "le=\"+Inf\"", cumulative);
  out.append("admit_serve_decision_seconds_sum ")
      .append(registry::format_number(static_cast<double>(impl_->latency_sum_ns.load(relaxed)) / 1e9))
      .append("\n");
  line("admit_serve_decision_seconds_count", {}, cumulative);
  return out;
}

}  // namespace admit::serve
