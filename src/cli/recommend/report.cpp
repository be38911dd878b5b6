#include "cli/recommend/report.hpp"

#include <cstdio>
#include <ostream>
#include <string_view>

#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/json.hpp"
#include "cli/common/text.hpp"

namespace admit::cli {

std::string shell_word(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-+=./,:@%") == std::string::npos;
  if (safe) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string percent(double fraction) {
  // Three significant digits, more where those would round a share short of all to "100%" (6658 of 6659: "99.98%").
  char buf[32];
  for (int digits = 3; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g%%", digits, fraction * 100);
    if (fraction >= 1 || std::string_view(buf) != "100%") break;
  }
  return buf;
}

namespace {

std::string rate_target(const rate_question& q) {
  std::string t;
  if (q.mode == replay_mode::reserve)
    t = "99th percentile of the delays at most " + human_duration(*q.max_delay_p99_ns);
  if (q.mode == replay_mode::allow || q.max_rejected.nano_percent > 0) {
    if (!t.empty()) t += ", ";
    t += "at most " + q.max_rejected.text() + " of the requests rejected";
  }
  return t;
}

std::string concurrency_target(const concurrency_question& q) {
  std::string t;
  const bool bounded = q.max_waiters || q.timeout_ns;
  if (q.max_wait_p99_ns) {
    // With a bounded queue the percentile is of the admitted requests (those turned away have their own share).
    t = (bounded ? "the 99th percentile of the admitted requests' waits at most "
                 : "at most 1% of the requests wait longer than ") +
        human_duration(*q.max_wait_p99_ns);
  }
  if (bounded) {
    if (!t.empty()) t += ", ";
    t += "at most " + q.max_turned_away.text() + " turned away";
  }
  return t;
}

std::string shape(const rate_question& q, std::optional<std::int64_t> burst) {
  std::string s(to_string(q.algo));
  if (is_window(q.algo)) s += ", window " + q.window;
  if (burst) s += ", burst " + std::to_string(*burst);
  s += ", " + std::string(to_string(q.mode));
  if (q.per_key) s += ", one limiter per key";
  return s;
}

// What a rate replay achieved: "rejected 0.98% (65 of 6659 requests)".
std::string achieved(const rate_question& q, const rate_point& p) {
  if (!p.refused.empty()) return "refused by the limiter (" + p.refused + ")";
  std::string s = "rejected " + percent(p.rejected_fraction()) + " (" + std::to_string(p.rejected) + " of " +
                  plural(p.requests, "request", "requests") + ")";
  if (q.mode == replay_mode::reserve) s += ", p99 delay " + human_duration(p.delay_p99_ns);
  if (q.per_key) s += ", " + plural(p.keys_with_rejections, "key", "keys") + " with rejections";
  return s;
}

std::string replay_command(const recommend_context& ctx, const rate_question& q, const rate_point& p) {
  std::string c = "admit replay --algorithm " + std::string(to_string(q.algo)) + " --rate " + p.rate;
  if (is_window(q.algo)) {
    c += " --window " + shell_word(q.window);
  } else {
    c += " --burst " + std::to_string(p.burst);
  }
  if (q.mode == replay_mode::reserve) c += " --mode reserve";
  return c + " " + ctx.replay_arguments;
}

std::string replay_command(const recommend_context& ctx, const concurrency_question& q, std::int64_t limit) {
  std::string c = "admit replay --algorithm concurrency --limit " + std::to_string(limit);
  if (q.max_waiters) c += " --max-waiters " + std::to_string(*q.max_waiters);
  if (q.timeout_ns) c += " --timeout " + format_duration(std::chrono::nanoseconds(*q.timeout_ns));
  return c + " " + ctx.replay_arguments;
}

void trace_line(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace) {
  out << "trace:      " << ctx.source << ": " << plural(trace.records(), "request", "requests") << ", "
      << plural(trace.tokens(), trace.has_durations() ? "permit" : "token",
                trace.has_durations() ? "permits" : "tokens")
      << ", " << format_seconds(trace.first_ns()) << "s to " << format_seconds(trace.last_ns()) << "s";
  if (trace.has_keys()) out << ", " << plural(trace.keys(), "key", "keys");
  out << "\n";
  if (trace.skipped_lines() > 0) {
    out << "            " << plural(trace.skipped_lines(), "line", "lines") << " skipped (--skip-bad-lines)\n";
  }
  if (trace.reordered() > 0) {
    out << "            " << plural(trace.reordered(), "record", "records")
        << " earlier than the one before, replayed at its time\n";
  }
}

nlohmann::ordered_json trace_json(const recommend_context& ctx, const recorded_trace& trace) {
  nlohmann::ordered_json j;
  j["source"] = ctx.source;
  j[trace.has_durations() ? "requests" : "arrivals"] = trace.records();
  j[trace.has_durations() ? "permits" : "tokens"] = trace.tokens();
  j["first_seconds"] = json_seconds(trace.first_ns());
  j["last_seconds"] = json_seconds(trace.last_ns());
  if (trace.has_keys()) j["keys"] = trace.keys();
  if (trace.skipped_lines() > 0) j["skipped_lines"] = trace.skipped_lines();
  if (trace.reordered() > 0) j["reordered"] = trace.reordered();
  return j;
}

nlohmann::ordered_json point_json(const rate_question& q, const rate_point& p) {
  nlohmann::ordered_json j;
  j["rate"] = p.rate;
  j["rate_per_second"] = json_number(p.rate_per_second);
  if (is_window(q.algo)) {
    j["limit_per_window"] = p.window_limit;
  } else {
    j["burst"] = p.burst;
  }
  if (!p.refused.empty()) {
    j["refused"] = p.refused;
    j["meets"] = false;
    return j;
  }
  j["rejected_arrivals"] = p.rejected;
  j["rejected_fraction"] = json_number(p.rejected_fraction());  // of the arrivals (requests), not of the tokens
  if (q.mode == replay_mode::reserve) j["delay_p99_seconds"] = json_seconds(p.delay_p99_ns);
  if (q.per_key) {
    j["keys_with_rejections"] = p.keys_with_rejections;
    auto keys = nlohmann::ordered_json::array();
    for (const key_counts& k : p.most_limited) {
      if (k.rejected == 0) break;
      keys.push_back({{"key", k.key},
                      {"arrivals", k.arrivals},
                      {"tokens", k.tokens},
                      {"rejected", {{"arrivals", k.rejected}, {"tokens", k.rejected_tokens}}}});
    }
    j["most_limited_keys"] = keys;  // as admit replay --json names them
  }
  j["meets"] = p.meets;
  return j;
}

nlohmann::ordered_json point_json(const concurrency_point& p) {
  nlohmann::ordered_json j;
  j["limit"] = p.limit;
  if (!p.refused.empty()) {
    j["refused"] = p.refused;
    j["meets"] = false;
    return j;
  }
  j["admitted_requests"] = p.admitted;
  j["queue_full"] = p.queue_full;
  j["timed_out"] = p.timed_out;
  j["exceeds_capacity"] = p.exceeds_capacity;
  j["turned_away_fraction"] = json_number(p.turned_away_fraction());
  j["wait_p99_seconds"] = json_seconds(p.wait_p99_ns);
  j["meets"] = p.meets;
  return j;
}

}  // namespace

void write_rate_recommendation(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                               const rate_question& q, const rate_recommendation& r) {
  out << "admit recommend: " << shape(q, q.burst) << "; target: " << rate_target(q) << "\n";
  trace_line(out, ctx, trace);
  if (!r.frontier.empty()) {
    out << "frontier:   the least rate for each burst\n";
    out << "      burst   least rate   rejected\n";
    for (const rate_point& p : r.frontier) {
      out << pad_left(std::to_string(p.burst), 11) << pad_left(p.rate, 13)
          << pad_left(percent(p.rejected_fraction()), 11);
      if (r.best && p.burst == r.best->burst) out << "   <- the knee: recommended";
      out << "\n";
    }
  }
  if (!r.unmet_bursts.empty()) {
    std::string list;
    for (const std::int64_t b : r.unmet_bursts) list += (list.empty() ? "" : ", ") + std::to_string(b);
    out << "            no rate meets the target with burst " << list
        << " (requests for more tokens, or arriving together beyond it, are rejected at any rate)\n";
  }
  if (!r.best) {
    out << "no rate meets the target";
    if (r.highest) {
      out << ": at " << r.highest->rate << " (the highest tried), " << achieved(q, *r.highest);
      if (!is_window(q.algo)) {
        out << ".\n            A request for more tokens than the burst, or one that arrives together with others "
               "beyond it, is "
               "rejected at any rate: raise --burst"
            << (q.burst ? ", or leave it out to see the least rate of each burst" : "");
      }
    }
    out << "\n";
  } else {
    const rate_point& b = *r.best;
    out << "least rate: " << b.rate;
    if (is_window(q.algo)) out << " (" << b.window_limit << " per " << q.window << " window)";
    if (!is_window(q.algo) && !q.burst) out << " with --burst " << b.burst;
    out << ": " << achieved(q, b) << "\n";
    if (r.tighter) {
      out << (is_window(q.algo) ? "one less:   " : "1% less:    ") << r.tighter->rate << ": " << achieved(q, *r.tighter)
          << (r.tighter->meets              ? " (meets it too: the search stopped chasing)"
              : !r.tighter->refused.empty() ? ""
                                            : ": misses the target")
          << "\n";
    } else {
      out << "            (the least rate tried: "
          << (b.rate_per_second == 0 ? "no refill at all" : "nothing lower is tried") << ")\n";
    }
    for (const key_counts& k : b.most_limited) {
      if (k.rejected == 0) break;
      out << (&k == &b.most_limited.front() ? "limited:    " : "            ") << k.key << ": " << k.rejected << " of "
          << plural(k.arrivals, "request", "requests") << " rejected\n";
    }
    out << "check:      " << replay_command(ctx, q, b) << "\n";
  }
  out << "searched:   " << plural(r.replays, "replay", "replays") << " of the trace\n";
}

void write_rate_recommendation_json(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                                    const rate_question& q, const rate_recommendation& r) {
  nlohmann::ordered_json j;
  j["algorithm"] = std::string(to_string(q.algo));
  j["mode"] = std::string(to_string(q.mode));
  if (is_window(q.algo)) j["window"] = q.window;
  j["per_key"] = q.per_key;
  j["trace"] = trace_json(ctx, trace);
  nlohmann::ordered_json target;
  target["max_rejected_fraction"] = json_number(q.max_rejected.fraction());
  if (q.max_delay_p99_ns) target["max_delay_p99_seconds"] = json_seconds(*q.max_delay_p99_ns);
  j["target"] = target;
  if (r.best) {
    j["rate"] = r.best->rate;
    j["rate_per_second"] = json_number(r.best->rate_per_second);
    if (is_window(q.algo)) {
      j["limit_per_window"] = r.best->window_limit;
    } else {
      j["burst"] = r.best->burst;
    }
    j["achieved"] = point_json(q, *r.best);
    j["tighter"] = r.tighter ? point_json(q, *r.tighter) : nlohmann::ordered_json();
    j["command"] = replay_command(ctx, q, *r.best);
  } else {
    // The same fields as a recommendation's, null: a reader finds them whether or not a rate meets.
    j["rate"] = nullptr;
    j["rate_per_second"] = nullptr;
    j[is_window(q.algo) ? "limit_per_window" : "burst"] = nullptr;
    j["highest_tried"] = r.highest ? point_json(q, *r.highest) : nlohmann::ordered_json();
  }
  if (!is_window(q.algo) && !q.burst) {
    auto frontier = nlohmann::ordered_json::array();
    for (const rate_point& p : r.frontier) frontier.push_back(point_json(q, p));
    j["frontier"] = frontier;
    j["bursts_without_rate"] = r.unmet_bursts;
  }
  j["replays"] = r.replays;
  write_json_document(out, j);
}

void write_concurrency_recommendation(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                                      const concurrency_question& q, const concurrency_recommendation& r) {
  std::string shape = "concurrency, FIFO";
  if (q.max_waiters) shape += ", max-waiters " + std::to_string(*q.max_waiters);
  if (q.timeout_ns) shape += ", timeout " + format_duration(std::chrono::nanoseconds(*q.timeout_ns));
  if (!q.max_waiters && !q.timeout_ns) shape += ", unbounded queue";
  out << "admit recommend: " << shape << "; target: " << concurrency_target(q) << "\n";
  trace_line(out, ctx, trace);
  const auto achieved = [&](const concurrency_point& p) {
    if (!p.refused.empty()) return "no answer (" + p.refused + ")";
    std::string s = "p99 wait " + human_duration(p.wait_p99_ns);
    if (p.requests != p.admitted) {
      s += ", turned away " + percent(p.turned_away_fraction()) + " (" + std::to_string(p.queue_full) +
           " queue full, " + std::to_string(p.timed_out) + " timed out, " + std::to_string(p.exceeds_capacity) +
           " needing more permits than the limit)";
    }
    return s;
  };
  if (!r.best) {
    out << "no limit meets the target";
    if (r.highest) out << ": with " << r.highest->limit << " permits, " << achieved(*r.highest);
    out << "\n";
  } else {
    out << "least limit: " << r.best->limit << ": " << achieved(*r.best) << "\n";
    if (r.tighter) {
      out << "one less:    " << r.tighter->limit << ": " << achieved(*r.tighter) << ": misses the target\n";
    } else {
      out << "             (the least limit there is)\n";
    }
    out << "check:       " << replay_command(ctx, q, r.best->limit) << "\n";
  }
  out << "searched:    " << plural(r.replays, "replay", "replays") << " of the trace\n";
}

void write_concurrency_recommendation_json(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                                           const concurrency_question& q, const concurrency_recommendation& r) {
  nlohmann::ordered_json j;
  j["algorithm"] = "concurrency";
  j["trace"] = trace_json(ctx, trace);
  nlohmann::ordered_json target;
  if (q.max_wait_p99_ns) target["max_wait_p99_seconds"] = json_seconds(*q.max_wait_p99_ns);
  if (q.max_waiters) target["max_waiters"] = *q.max_waiters;
  if (q.timeout_ns) target["timeout_seconds"] = json_seconds(*q.timeout_ns);
  target["max_turned_away_fraction"] = json_number(q.max_turned_away.fraction());
  j["target"] = target;
  if (r.best) {
    j["limit"] = r.best->limit;
    j["achieved"] = point_json(*r.best);
    j["tighter"] = r.tighter ? point_json(*r.tighter) : nlohmann::ordered_json();
    j["command"] = replay_command(ctx, q, r.best->limit);
  } else {
    j["limit"] = nullptr;
    j["highest_tried"] = r.highest ? point_json(*r.highest) : nlohmann::ordered_json();
  }
  j["replays"] = r.replays;
  write_json_document(out, j);
}

}  // namespace admit::cli
