// admit_serve_load — a load generator for `admit serve` (Envoy's RLS v3, ShouldRateLimit over gRPC): N concurrent
// outstanding calls for a duration, decisions/s and latency percentiles; bench/serve_compare.sh runs it.
//
//   admit_serve_load --target 127.0.0.1:8081 --streams 16 --descriptor 'user={rand}' --key-count 100000
//   admit_serve_load --target 127.0.0.1:8081 --streams 1 --descriptor user=hot --json
//   admit_serve_load --mode library --config bench/serve_config --streams 1 --descriptor 'user={rand}'
//   admit_serve_load --mode redis-incr-expire --url redis://127.0.0.1:6379 --streams 16 --descriptor 'user={rand}'
//
// Modes:
// - grpc (default): gRPC's asynchronous client API (a CompletionQueue per client thread), --streams calls always
//   outstanding, spread over --channels HTTP/2 connections.
// - library: the decision `admit serve` makes for each call, without gRPC: admit::serve::service::should_rate_limit on
//   the configuration of --config, in process or on --redis (the same backend `admit serve` builds), --streams calls
//   outstanding. Its latency is the library call the service makes; grpc minus library is what the transport adds.
// - redis-incr-expire: the Redis work envoyproxy/ratelimit does per decision, without any service: per descriptor an
//   INCRBY of its counter key and an EXPIRE of it, written together (pipelined) on one admit::redis::connection,
//   --streams decisions outstanding; the decision is its own when both replies are in.
//
// Every answer is checked: decisions/s counts only answers (overall code OK or OVER_LIMIT, one status per descriptor,
// each with the limit it was decided against unless --allow-unlimited); failed calls (by gRPC status or Redis error)
// and wrong answers are counted apart and make the exit status 1, so that an error storm is never reported as
// throughput. Latency is per call, from issuing it to its completion; percentiles are exact (nearest rank over every
// call completing in the window).
//
// Each run: --warmup seconds (calls issued, not counted), then a --duration window: every call that completes inside
// it counts. Then no new call is issued and those outstanding are awaited.
//
// Output: one tab-separated line
//   <label> <mode> <streams> <decisions/s> <p50 µs> <p90 µs> <p99 µs> <max µs> <ok> <over_limit> <errors>
//   <unlimited> <bad answers> <answered in all (warm-up and drain too)> <client CPU µs per decision>
// or with --json one JSON object with the same values (and the errors by kind).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "serve_load.hpp"

namespace admit::bench::serve_load {

window make_window(const settings& s) {
  window w;
  w.start = clock_type::now();
  w.measure_from =
      w.start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s.warmup_s));
  w.measure_to =
      w.measure_from + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s.duration_s));
  return w;
}

void recorder::merge(const recorder& o) {
  latencies_ns.insert(latencies_ns.end(), o.latencies_ns.begin(), o.latencies_ns.end());
  ok += o.ok;
  over_limit += o.over_limit;
  unlimited += o.unlimited;
  bad_answers += o.bad_answers;
  for (const auto& [k, n] : o.errors) errors[k] += n;
  answered_total += o.answered_total;
}

std::uint64_t recorder::error_count() const {
  std::uint64_t n = 0;
  for (const auto& e : errors) n += e.second;
  return n;
}

void record_answer(recorder& r, const window& w, clock_type::time_point done, std::chrono::nanoseconds latency,
                   answer a) {
  ++r.answered_total;
  if (!w.counts(done)) return;
  switch (a) {
    case answer::ok:
      ++r.ok;
      break;
    case answer::over_limit:
      ++r.over_limit;
      break;
    case answer::unlimited:
      ++r.unlimited;
      return;
    case answer::bad:
      ++r.bad_answers;
      return;
  }
  r.latencies_ns.push_back(latency.count());
}

void record_error(recorder& r, const window& w, clock_type::time_point done, const std::string& kind) {
  if (w.counts(done)) ++r.errors[kind];
}

value_source::value_source(const settings& s, std::uint64_t seed)
    : key_count_(s.key_count), state_(seed * 0x9E3779B97F4A7C15ULL | 1U) {}

std::string value_source::value(const std::string& pattern) {
  static constexpr std::string_view marker = "{rand}";
  std::string out;
  std::size_t from = 0;
  for (;;) {
    const auto at = pattern.find(marker, from);
    out.append(pattern, from, at == std::string::npos ? std::string::npos : at - from);
    if (at == std::string::npos) return out;
    state_ ^= state_ >> 12U;
    state_ ^= state_ << 25U;
    state_ ^= state_ >> 27U;
    out += std::to_string((state_ * 0x2545F4914F6CDD1DULL) % key_count_);
    from = at + marker.size();
  }
}

}  // namespace admit::bench::serve_load

namespace {

using namespace admit::bench::serve_load;

// The percentile q of `ns` (sorted) in µs by nearest rank; 0 without a sample.
double percentile_us(const std::vector<std::int64_t>& ns, double q) {
  if (ns.empty()) return 0;
  auto rank = static_cast<std::size_t>(q * static_cast<double>(ns.size()));
  if (static_cast<double>(rank) < q * static_cast<double>(ns.size())) ++rank;
  const std::size_t index = std::min(ns.size() - 1, rank == 0 ? 0 : rank - 1);
  return static_cast<double>(ns[index]) / 1000.0;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

// "user={rand}" or "user=hot,path=/a" -> {{"user", "{rand}"}, ...}
std::vector<std::pair<std::string, std::string>> parse_descriptor(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::size_t from = 0;
  while (from <= text.size()) {
    const auto comma = text.find(',', from);
    const std::string entry = text.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw CLI::ValidationError("--descriptor", "expected KEY=VALUE[,KEY=VALUE...], got '" + text + "'");
    }
    entries.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return entries;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app{"admit_serve_load: N concurrent ShouldRateLimit calls for a duration; decisions/s and latency.",
               "admit_serve_load"};
  app.add_option("--mode", s.mode, "grpc, library or redis-incr-expire")
      ->check(CLI::IsMember({"grpc", "library", "redis-incr-expire"}));
  app.add_option("--target", s.target, "grpc: the server, HOST:PORT")->capture_default_str();
  app.add_option("--channels", s.channels, "grpc: HTTP/2 connections")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--config", s.config_dir, "library: the configuration directory")->check(CLI::ExistingDirectory);
  app.add_option("--redis", s.redis_url, "library: decide on Redis at this URL (default: in process)");
  app.add_option("--streams", s.streams, "concurrent outstanding calls")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--threads", s.threads, "client threads")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--duration", s.duration_s, "seconds measured")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", s.warmup_s, "seconds before, not measured")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--domain", s.domain, "the request's domain")->capture_default_str();
  std::vector<std::string> descriptors;
  app.add_option("--descriptor", descriptors,
                 "a descriptor KEY=VALUE[,KEY=VALUE...], repeatable; \"{rand}\" in a value is drawn per call from "
                 "[0, --key-count)")
      ->required();
  app.add_option("--key-count", s.key_count, "the range of {rand}")
      ->check(CLI::Range(std::uint64_t{1}, ~std::uint64_t{0}))
      ->capture_default_str();
  app.add_option("--hits-addend", s.hits_addend, "the request's hits_addend (0: not sent)");
  bool allow_unlimited = false;
  app.add_flag("--allow-unlimited", allow_unlimited, "do not count a status without a limit as an error");
  bool allow_errors = false;
  app.add_flag("--allow-errors", allow_errors, "exit 0 even when calls failed");
  app.add_option("--timeout-ms", s.timeout_ms, "each call's deadline")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  app.add_option("--url", s.url, "redis-incr-expire: the Redis server")->capture_default_str();
  app.add_option("--expire", s.expire_s, "redis-incr-expire: EXPIRE's seconds")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_option("--limit", s.limit, "redis-incr-expire: a count above this is OVER_LIMIT")->capture_default_str();
  app.add_option("--label", s.label, "the output's first field (default: the mode)");
  app.add_flag("--json", s.json, "one JSON object instead of the tab-separated line");
  try {
    app.parse(argc, argv);
    for (const auto& d : descriptors) s.descriptors.push_back(parse_descriptor(d));
    if (s.mode == "library" && s.config_dir.empty()) throw CLI::RequiredError("--config (with --mode library)");
    if (s.streams < s.threads) throw CLI::ValidationError("--threads", "cannot exceed --streams");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help; else a usage error (exit 2, as the admit tool)
  }
  s.require_limit = !allow_unlimited;
  if (s.label.empty()) s.label = s.mode;

  recorder r;
  const double cpu_before = cpu_seconds();
  try {
    if (s.mode == "grpc") {
      r = run_grpc(s);
    } else if (s.mode == "library") {
      r = run_library(s);
    } else {
      r = run_redis_incr_expire(s);
    }
  } catch (const std::exception& e) {
    std::cerr << "admit_serve_load: " << e.what() << "\n";
    return 1;
  }
  const double cpu = cpu_seconds() - cpu_before;

  std::sort(r.latencies_ns.begin(), r.latencies_ns.end());
  const auto decisions = static_cast<double>(r.ok + r.over_limit);
  const double dps = decisions / s.duration_s;
  const double p50 = percentile_us(r.latencies_ns, 0.50), p90 = percentile_us(r.latencies_ns, 0.90),
               p99 = percentile_us(r.latencies_ns, 0.99), max = percentile_us(r.latencies_ns, 1.0);
  const std::uint64_t errors = r.error_count();
  // Client CPU over every answered call (the warm-up's too: the CPU time covers the whole run).
  const double cpu_us = r.answered_total > 0 ? cpu * 1e6 / static_cast<double>(r.answered_total) : 0.0;
  if (s.json) {
    nlohmann::json j = {{"label", s.label},
                        {"mode", s.mode},
                        {"streams", s.streams},
                        {"threads", s.threads},
                        {"channels", s.channels},
                        {"duration_s", s.duration_s},
                        {"decisions", r.ok + r.over_limit},
                        {"decisions_per_s", dps},
                        {"ok", r.ok},
                        {"over_limit", r.over_limit},
                        {"errors", errors},
                        {"errors_by_kind", r.errors},
                        {"unlimited", r.unlimited},
                        {"bad_answers", r.bad_answers},
                        {"answered_total", r.answered_total},
                        {"latency_us", {{"p50", p50}, {"p90", p90}, {"p99", p99}, {"max", max}}},
                        {"client_cpu_us_per_decision", cpu_us}};
    std::cout << j.dump() << "\n";
  } else {
    std::printf("%s\t%s\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%.2f\n", s.label.c_str(),
                s.mode.c_str(), s.streams, dps, p50, p90, p99, max, static_cast<unsigned long long>(r.ok),
                static_cast<unsigned long long>(r.over_limit), static_cast<unsigned long long>(errors),
                static_cast<unsigned long long>(r.unlimited), static_cast<unsigned long long>(r.bad_answers),
                static_cast<unsigned long long>(r.answered_total), cpu_us);
  }
  bool failed = false;
  for (const auto& [kind, n] : r.errors) {
    std::cerr << "admit_serve_load: " << n << " call(s) failed: " << kind << "\n";
    failed = true;
  }
  if (s.require_limit && r.unlimited > 0) {
    std::cerr << "admit_serve_load: " << r.unlimited
              << " answer(s) matched no rule (no current_limit): wrong --domain or --descriptor for the "
                 "configuration? (--allow-unlimited to accept)\n";
    failed = true;
  }
  if (r.bad_answers > 0) {
    std::cerr << "admit_serve_load: " << r.bad_answers
              << " answer(s) malformed (statuses do not match the descriptors, or an UNKNOWN code)\n";
    failed = true;
  }
  if (decisions == 0) {
    std::cerr << "admit_serve_load: no decision completed in the window\n";
    return 1;
  }
  return failed && !allow_errors ? 1 : 0;
}
