// admit/metrics/prometheus.hpp — a registry of named limiters that writes their metrics in the Prometheus text
// exposition format (version 0.0.4), for a GET /metrics endpoint.
//
//   admit::metrics::registry reg;
//   reg.add("api", {{"route", "/v1"}}, limiter);   // anything with metrics() -> admit::limiter_snapshot
//   std::string body = reg.text();                  // serve as "text/plain; version=0.0.4"
//
// Families. One family per metric, each with # HELP and # TYPE, every limiter a series in each, told apart by the
// label limiter="<name>" followed by its own labels in the order given:
//   admit_admitted_total                counter    acquisitions admitted (at once or after a wait)
//   admit_waited_total                  counter    of those, the ones that waited (wait > 0)
//   admit_rejected_total{reason="..."}  counter    refusals by reason: unavailable, queue_full, timeout, cancelled,
//                                                  closed, exceeds_capacity, failed (every reason is written, 0s too)
//   admit_limit, admit_in_flight, admit_waiting   gauges: the limiter's own (0 for a limiter without them)
//   admit_wait_seconds                  histogram  the waits of the admitted acquisitions (0 for immediate ones)
// So sum(rate(admit_rejected_total[1m])) is the refusal rate, and admitted + the rejected sum every decision.
//
// Histogram buckets. Fixed bounds (le, seconds): 1µs, 2.5µs, 5µs, 10µs, ... 1s, 2.5s, 5s, 10s (1, 2.5 and 5 in every
// decade), then +Inf; _sum is in seconds, _count the admissions. They are read from the limiter's wait_histogram
// (its wait_times()), whose buckets have bounded relative error: a bucket `le` never counts a wait above le, and
// counts every wait at or below le except those sharing a histogram bucket with waits above it (they are within
// 1/32 below le, and count from the next bound up). See wait_histogram::cumulative_counts. A limiter without
// wait_times() gets only the +Inf bucket, and a _sum of its mean wait times its count (the mean is rounded down to
// the nanosecond).
//
// Names. A limiter's name and its label names must match [a-zA-Z_][a-zA-Z0-9_]*, must not begin with "__", and
// label names must not be limiter, reason or le (the registry's own); otherwise add() throws std::invalid_argument
// naming the bad name and the pattern. Label values may be any text: backslash, double quote and newline are
// escaped as the format requires. The same name with the same labels (in any order) twice is refused too.
//
// Lifetime. A limiter added by reference must outlive its registration: remove() it first, or destroy the registry
// first. Or add a snapshot source (a std::function) that owns what it reads.
//
// Thread safety: every member may be called concurrently, and write()/text() while the limiters decide (snapshots
// are lock-free). A write holds the registry's mutex while it reads the snapshots (about a microsecond a limiter),
// not while it writes to the stream. Each series is read at some instant during the call.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admit/limiter_metrics.hpp"
#include "admit/wait_histogram.hpp"

namespace admit::metrics {

// A series' own labels, (name, value) pairs written in this order after limiter="<name>".
using labels = std::vector<std::pair<std::string, std::string>>;

// A limiter the registry can read: metrics() returning admit::limiter_snapshot.
template <class L>
concept snapshot_provider = requires(L& l) {
  { l.metrics() } -> std::same_as<limiter_snapshot>;
};

class registry {
 public:
  using snapshot_source = std::function<limiter_snapshot()>;
  // The histogram of the waits (may return null: then only the +Inf bucket is written).
  using histogram_source = std::function<const wait_histogram*()>;

  // The bucket bounds of admit_wait_seconds, ascending, without +Inf.
  static constexpr std::size_t bucket_bound_count = 22;
  static constexpr std::array<std::chrono::nanoseconds, bucket_bound_count> bucket_bounds() noexcept {
    std::array<std::chrono::nanoseconds, bucket_bound_count> b{};
    std::int64_t decade = 1000;  // 1 µs
    for (std::size_t i = 0; i + 1 < bucket_bound_count; i += 3, decade *= 10) {
      b[i] = std::chrono::nanoseconds{decade};
      b[i + 1] = std::chrono::nanoseconds{decade * 5 / 2};
      b[i + 2] = std::chrono::nanoseconds{decade * 5};
    }
    b[bucket_bound_count - 1] = std::chrono::seconds{10};
    return b;
  }

  // The `le` label values of those bounds (seconds, as written in the exposition).
  static constexpr std::array<std::string_view, bucket_bound_count> bucket_bound_labels() noexcept {
    return {"1e-06", "2.5e-06", "5e-06", "1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
            "0.005", "0.01",    "0.025", "0.05",  "0.1",     "0.25",  "0.5",    "1",       "2.5",    "5",     "10"};
  }

  // A label value escaped as the text format requires (backslash, double quote and newline), for exporters that
  // write their own families next to the registry's.
  static std::string escape_label_value(std::string_view v) { return escape(v); }
  // A number as the exposition writes it: integers in decimal, doubles in their shortest round-trip form (no locale).
  template <class T>
  static std::string format_number(T v) {
    return number(v);
  }

  registry() = default;
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // Registers `limiter` (held by reference: it must outlive the registration) under `name` with `extra` labels;
  // its wait_times() feeds the histogram's buckets when it has one. Throws std::invalid_argument for a bad name or
  // label name, or a name and labels already registered.
  template <snapshot_provider Limiter>
  void add(std::string name, labels extra, Limiter& limiter) {
    histogram_source waits;
    if constexpr (requires {
                    { limiter.wait_times() } -> std::same_as<const wait_histogram&>;
                  }) {
      waits = [&limiter]() -> const wait_histogram* { return &limiter.wait_times(); };
    }
    add(std::move(name), std::move(extra), snapshot_source([&limiter] { return limiter.metrics(); }), std::move(waits));
  }
  template <snapshot_provider Limiter>
  void add(std::string name, labels extra, Limiter&& limiter) = delete;  // a temporary would not outlive the entry

  // Registers a snapshot source (and optionally a histogram source) under `name` with `extra` labels. Throws as
  // above, and for an empty `snapshot`.
  void add(std::string name, labels extra, snapshot_source snapshot, histogram_source waits = {}) {
    check_name("limiter name", name);
    for (const auto& [label, value] : extra) {
      check_name("label name", label);
      if (label == "limiter" || label == "reason" || label == "le") {
        throw std::invalid_argument("admit::metrics::registry: label name \"" + label +
                                    "\" is the registry's own (limiter, reason, le); choose another");
      }
    }
    if (!snapshot)
      throw std::invalid_argument("admit::metrics::registry: the snapshot source of \"" + name + "\" is empty");
    entry e{std::move(name), std::move(extra), {}, std::move(snapshot), std::move(waits)};
    e.key = key_of(e.extra);
    for (std::size_t i = 1; i < e.key.size(); ++i) {
      if (e.key[i].first == e.key[i - 1].first) {
        throw std::invalid_argument("admit::metrics::registry: label \"" + e.key[i].first + "\" of \"" + e.name +
                                    "\" is given twice");
      }
    }
    std::lock_guard lock(mutex_);
    for (const auto& other : entries_) {
      if (other.name == e.name && other.key == e.key) {
        throw std::invalid_argument("admit::metrics::registry: \"" + e.name + "\" with labels " + describe(e.extra) +
                                    " is already registered");
      }
    }
    entries_.push_back(std::move(e));
  }

  // Unregisters `name` with these labels (in any order). True if it was registered.
  bool remove(std::string_view name, const labels& extra) {
    const auto key = key_of(extra);
    std::lock_guard lock(mutex_);
    const auto it =
        std::find_if(entries_.begin(), entries_.end(), [&](const entry& e) { return e.name == name && e.key == key; });
    if (it == entries_.end()) return false;
    entries_.erase(it);
    return true;
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

  // The exposition of every registered limiter (no family at all when none is registered).
  std::string text() const {
    std::vector<reading> r;
    {
      std::lock_guard lock(mutex_);
      r.reserve(entries_.size());
      for (const auto& e : entries_) r.push_back(read(e));
    }
    return format(r);
  }
  void write(std::ostream& out) const { out << text(); }

  // The Content-Type to serve text() with.
  static constexpr std::string_view content_type = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct entry {
    std::string name;
    labels extra;
    labels key;  // extra, sorted: for the duplicate check
    snapshot_source snapshot;
    histogram_source waits;
  };

  // One entry's values, read under the mutex.
  struct reading {
    std::string labels;  // limiter="...",k="v",... (escaped)
    limiter_snapshot s;
    bool has_buckets = false;
    std::array<std::uint64_t, bucket_bound_count> buckets{};
    std::uint64_t count = 0;
    double sum_seconds = 0;
  };

  static reading read(const entry& e) {
    reading r;
    r.labels = "limiter=\"" + escape(e.name) + "\"";
    for (const auto& [k, v] : e.extra) r.labels += "," + k + "=\"" + escape(v) + "\"";
    r.s = e.snapshot();
    const wait_histogram* h = e.waits ? e.waits() : nullptr;
    if (h != nullptr) {
      static constexpr auto bounds = bucket_bounds();
      r.has_buckets = true;
      r.count = h->cumulative_counts(bounds, r.buckets);
      r.sum_seconds = seconds(h->sum());
    } else {
      r.count = r.s.admitted;
      r.sum_seconds = seconds(r.s.wait.mean) * static_cast<double>(r.s.admitted);
    }
    return r;
  }

  static std::string format(const std::vector<reading>& rs) {
    std::string out;
    if (rs.empty()) return out;
    const auto family = [&](std::string_view name, std::string_view type, std::string_view help, auto&& each) {
      out.append("# HELP ").append(name).append(" ").append(help).append("\n");
      out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
      for (const auto& r : rs) each(r);
    };
    const auto line = [&](std::string_view name, const std::string& lbl, std::string_view value) {
      out.append(name).append("{").append(lbl).append("} ").append(value).append("\n");
    };
    family("admit_admitted_total", "counter", "Acquisitions admitted, at once or after a wait.",
           [&](const reading& r) { line("admit_admitted_total", r.labels, number(r.s.admitted)); });
    family("admit_waited_total", "counter", "Admitted acquisitions that had to wait.",
           [&](const reading& r) { line("admit_waited_total", r.labels, number(r.s.waited)); });
    family("admit_rejected_total", "counter", "Acquisitions refused, by reason.", [&](const reading& r) {
      const std::pair<std::string_view, std::uint64_t> reasons[] = {{"unavailable", r.s.unavailable},
                                                                    {"queue_full", r.s.rejected},
                                                                    {"timeout", r.s.timed_out},
                                                                    {"cancelled", r.s.cancelled},
                                                                    {"closed", r.s.closed},
                                                                    {"exceeds_capacity", r.s.exceeds_capacity},
                                                                    {"failed", r.s.failed}};
      for (const auto& [reason, n] : reasons) {
        line("admit_rejected_total", r.labels + ",reason=\"" + std::string(reason) + "\"", number(n));
      }
    });
    family("admit_limit", "gauge", "The concurrency limit now (0 for a limiter without one).",
           [&](const reading& r) { line("admit_limit", r.labels, number(r.s.limit)); });
    family("admit_in_flight", "gauge", "Permits held now.",
           [&](const reading& r) { line("admit_in_flight", r.labels, number(r.s.in_flight)); });
    family("admit_waiting", "gauge", "Requests waiting now.",
           [&](const reading& r) { line("admit_waiting", r.labels, number(r.s.waiting)); });
    if (std::any_of(rs.begin(), rs.end(), [](const reading& r) { return r.s.leases_lost.has_value(); })) {
      family("admit_leases_lost_total", "counter", "Leases granted and then found lost (expired before renewal).",
             [&](const reading& r) {
               if (r.s.leases_lost) line("admit_leases_lost_total", r.labels, number(*r.s.leases_lost));
             });
    }
    family("admit_wait_seconds", "histogram", "How long admitted acquisitions waited (0 for immediate ones).",
           [&](const reading& r) {
             static constexpr auto le = bucket_bound_labels();
             if (r.has_buckets) {
               for (std::size_t i = 0; i < bucket_bound_count; ++i) {
                 line("admit_wait_seconds_bucket", r.labels + ",le=\"" + std::string(le[i]) + "\"",
                      number(r.buckets[i]));
               }
             }
             line("admit_wait_seconds_bucket", r.labels + ",le=\"+Inf\"", number(r.count));
             line("admit_wait_seconds_sum", r.labels, number(r.sum_seconds));
             line("admit_wait_seconds_count", r.labels, number(r.count));
           });
    return out;
  }

  static double seconds(std::chrono::nanoseconds d) noexcept { return static_cast<double>(d.count()) / 1e9; }

  // Integers in decimal; doubles in their shortest round-trip form (std::to_chars: no locale).
  template <class T>
  static std::string number(T v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }

  // Label values: backslash, double quote and newline escaped (the text format's rules).
  static std::string escape(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (const char c : v) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '"') {
        out += "\\\"";
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    return out;
  }

  static void check_name(std::string_view what, std::string_view name) {
    const auto first = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    const auto rest = [&](char c) { return first(c) || (c >= '0' && c <= '9'); };
    const bool ok = !name.empty() && first(name.front()) && std::all_of(name.begin() + 1, name.end(), rest) &&
                    name.substr(0, 2) != "__";
    if (!ok) {
      throw std::invalid_argument("admit::metrics::registry: " + std::string(what) + " \"" + escape(name) +
                                  "\" must match [a-zA-Z_][a-zA-Z0-9_]* and not begin with \"__\"");
    }
  }

  static labels key_of(labels l) {
    std::sort(l.begin(), l.end());
    return l;
  }

  static std::string describe(const labels& l) {
    std::string s = "{";
    for (const auto& [k, v] : l) s += (s.size() > 1 ? "," : "") + k + "=\"" + escape(v) + "\"";
    return s + "}";
  }

  mutable std::mutex mutex_;
  std::vector<entry> entries_;
};

}  // namespace admit::metrics
