// admit_serve_redis_bench — the Redis work of one `admit serve` fixed-window decision next to envoyproxy/ratelimit's,
// on the same redis-server, at the same concurrency:
//   envoy   what envoyproxy/ratelimit sends per descriptor: INCRBY key n and EXPIRE key unit, pipelined (two
//           commands, one write), over one admit::redis::connection
//   admit   admit::serve::redis_backend::decide with one fixed-window hit: the hits of the decisions asked for at
//           about the same time leave as one script call (src/serve/engine/redis_backend.hpp, "Batching")
//
//   admit_serve_redis_bench --url redis://127.0.0.1:6379 --callers 1,16,256 --keys hot,many --duration 3
//
// It never starts Redis: give it the URL of a running server (--url, else $ADMIT_REDIS_URL, else
// redis://127.0.0.1:6379). It writes keys "bench_..." (envoy) and "admit:serve:fw:{bench_...}:..." (admit) that
// expire after a minute.
//
// As bench/redis_bench.cpp (which says why this is a plain program): callers are callback chains, each issuing the
// next decision from the completion of the previous one; they, the client's I/O and the completions run on one
// io_context thread (the main thread). Each case: a --warmup period, then a --duration window; every decision that
// completes inside the window counts, with its latency. The server's counters are read around the window through a
// separate connection: its CPU time (INFO cpu) and the commands it ran (INFO commandstats, commands called by scripts
// included) per decision.
//
// Output, one tab-separated line per case and repetition (lines starting with '#' are comments):
//   <impl> <hot|many> <callers> <repetition> <decisions/s> <p50 µs> <p99 µs> <over-limit share> <errors>
//   <server commands per decision> <server round trips per decision> <server CPU µs per decision>
// ("round trips": the EVALSHA calls for admit, the INCRBY calls for envoy; errors: decisions Redis did not make).
#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "redis_bench_common.hpp"
#include "serve/engine/redis_backend.hpp"

namespace {

namespace asio = boost::asio;
using admit::bench::clock_type;
using admit::bench::percentile_us;
using admit::bench::seconds;
using admit::bench::split;

struct settings {
  std::string url = admit::bench::default_url();
  std::vector<std::string> impls = {"envoy", "admit"};
  std::vector<std::string> key_modes = {"hot", "many"};
  std::vector<int> callers = {1, 16, 256};
  std::size_t key_count = 10'000;
  double duration_s = 3.0;
  double warmup_s = 0.5;
  int repetitions = 1;
  std::uint32_t limit = 1'000'000;  // per minute: decisions are over it or not, the work is the same
};

constexpr admit::bench::command_line command(
    "admit_serve_redis_bench",
    "usage: admit_serve_redis_bench [--url URL] [--impls envoy,admit] [--keys hot,many] [--callers 1,16,256]\n"
    "                               [--key-count N] [--duration S] [--warmup S] [--repetitions N] [--limit N]\n");

settings parse_arguments(int argc, char** argv) {
  settings s;
  command.for_each_flag(argc, argv, [&s](const std::string& flag, const std::string& value) {
    if (flag == "--url") {
      s.url = value;
    } else if (flag == "--impls") {
      s.impls = split(value);
      for (const auto& i : s.impls) {
        if (i != "envoy" && i != "admit") command.usage("--impls takes envoy and/or admit, got '" + i + "'");
      }
    } else if (flag == "--keys") {
      s.key_modes = split(value);
      for (const auto& k : s.key_modes) {
        if (k != "hot" && k != "many") command.usage("--keys takes hot and/or many, got '" + k + "'");
      }
    } else if (flag == "--callers") {
      s.callers.clear();
      for (const auto& c : split(value)) s.callers.push_back(static_cast<int>(command.to_integer(flag, c, 1)));
    } else if (flag == "--key-count") {
      s.key_count = static_cast<std::size_t>(command.to_integer(flag, value, 1));
    } else if (flag == "--duration") {
      s.duration_s = command.to_double(flag, value);
      if (s.duration_s <= 0) command.usage("--duration must be > 0");
    } else if (flag == "--warmup") {
      s.warmup_s = command.to_double(flag, value);
    } else if (flag == "--repetitions") {
      s.repetitions = static_cast<int>(command.to_integer(flag, value, 1));
    } else if (flag == "--limit") {
      s.limit = static_cast<std::uint32_t>(command.to_integer(flag, value, 1));
    } else {
      command.usage("unknown argument " + flag);
    }
  });
  return s;
}

// The counter keys of one case ("bench_k_<n>_": a descriptor's key as envoyproxy/ratelimit builds it, without the
// window), drawn uniformly at random (xorshift64*), or one hot key.
class key_source {
 public:
  key_source(bool hot, std::size_t count) {
    const std::size_t n = hot ? 1 : count;
    for (std::size_t i = 0; i < n; ++i) keys_.push_back("bench_k_" + std::to_string(i) + "_");
  }
  const std::string& next() {
    if (keys_.size() == 1) return keys_.front();
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return keys_[(state_ * 0x2545F4914F6CDD1DULL) % keys_.size()];
  }

 private:
  std::vector<std::string> keys_;
  std::uint64_t state_ = 0x9E3779B97F4A7C15ULL;
};

// What one case measures; everything runs on the io_context thread.
struct measurement {
  clock_type::time_point from, until;
  bool stopping = false;
  int active = 0;
  std::uint64_t decisions = 0, over = 0, errors = 0;
  std::vector<std::uint32_t> latency_ns;

  bool record(clock_type::time_point started, bool failed, bool over_limit) {
    const auto end = clock_type::now();
    if (end >= from && end < until) {
      if (failed) {
        ++errors;
      } else {
        ++decisions;
        if (over_limit) ++over;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - started).count();
        latency_ns.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(ns, 0xFFFFFFFF)));
      }
    }
    if (end >= until) stopping = true;
    if (stopping) --active;
    return !stopping;
  }
};

// A chain of decisions: the next one starts from the completion of the previous one.
struct chain {
  const settings* s;
  key_source* keys;
  measurement* m;
  admit::redis::connection* conn;        // envoy
  admit::serve::redis_backend* backend;  // admit
  const admit::serve::rate_limit_rule* rule;

  void next() {
    const auto started = clock_type::now();
    const std::string& key = keys->next();
    if (backend != nullptr) {
      admit::serve::hit h;
      h.rule = rule;
      h.counter_key = key;
      admit::serve::decide(*backend, {std::move(h)}, std::chrono::system_clock::now(),
                           [this, started](std::vector<admit::serve::hit_outcome> o) {
                             using st = admit::serve::hit_outcome::state;
                             if (m->record(started, o.at(0).result == st::failed, o.at(0).result == st::over_limit))
                               next();
                           });
      return;
    }
    // envoyproxy/ratelimit: the window's key, INCRBY and EXPIRE pipelined; done when both replied.
    const auto now = std::chrono::floor<std::chrono::minutes>(std::chrono::system_clock::now());
    const std::string window_key = key + std::to_string(now.time_since_epoch().count() * 60);
    auto count = std::make_shared<std::int64_t>(-1);
    auto replies = std::make_shared<int>(0);
    auto failed = std::make_shared<bool>(false);
    auto both = [this, started, count, replies, failed] {
      if (++*replies < 2) return;
      if (m->record(started, *failed, *count > static_cast<std::int64_t>(s->limit))) next();
    };
    conn->async_execute("INCRBY", window_key, 1,
                        [count, failed, both](boost::system::error_code ec, const admit::redis::reply& r) {
                          if (ec || !r.is_integer()) *failed = true;
                          *count = r.integer();
                          both();
                        });
    conn->async_execute("EXPIRE", window_key, 60,
                        [failed, both](boost::system::error_code ec, const admit::redis::reply& r) {
                          if (ec || r.is_error()) *failed = true;
                          both();
                        });
  }
};

// The server's counters, read through a blocking connection of its own (its own io_context thread).
struct server_counters {
  double cpu_s = 0;
  long long calls = 0, evalsha = 0, incrby = 0;
};
double info_number(const std::string& info, const std::string& field) {
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::atof(info.c_str() + at + field.size());
}
server_counters read_counters(admit::redis::connection& admin) {
  server_counters c;
  const std::string cpu = admin.execute("INFO", "cpu").value.str();
  c.cpu_s = info_number(cpu, "used_cpu_sys:") + info_number(cpu, "used_cpu_user:");
  const std::string stats = admin.execute("INFO", "commandstats").value.str();
  for (std::size_t at = stats.find(":calls="); at != std::string::npos; at = stats.find(":calls=", at + 1)) {
    c.calls += std::atoll(stats.c_str() + at + 7);
  }
  c.evalsha = static_cast<long long>(info_number(stats, "cmdstat_evalsha:calls="));
  c.incrby = static_cast<long long>(info_number(stats, "cmdstat_incrby:calls="));
  c.calls -= 2;  // the two INFO calls of this reading
  return c;
}

void run_case(const settings& s, asio::io_context& io, admit::redis::connection& admin, admit::redis::connection& conn,
              admit::serve::redis_backend& backend, const admit::serve::rate_limit_rule& rule, const std::string& impl,
              const std::string& key_mode, int callers, int repetition) {
  key_source keys(key_mode == "hot", s.key_count);
  measurement m;
  m.latency_ns.reserve(1 << 20);
  m.from = clock_type::now() + seconds(s.warmup_s);
  m.until = m.from + seconds(s.duration_s);
  m.active = callers;
  std::vector<std::unique_ptr<chain>> chains;
  for (int i = 0; i < callers; ++i) {
    chains.push_back(std::make_unique<chain>(chain{&s, &keys, &m, &conn, impl == "admit" ? &backend : nullptr, &rule}));
    chains.back()->next();
  }
  while (clock_type::now() < m.from) io.run_one();
  const server_counters before = read_counters(admin);
  const std::uint64_t decisions_before = m.decisions;
  while (clock_type::now() < m.until && m.active > 0) io.run_one();
  const std::uint64_t decisions_read = m.decisions - decisions_before;
  const server_counters after = read_counters(admin);
  while (m.active > 0) io.run_one();

  const double window = std::chrono::duration<double>(m.until - m.from).count();
  const double per = decisions_read > 0 ? 1.0 / static_cast<double>(decisions_read) : 0.0;
  const long long trips = impl == "admit" ? after.evalsha - before.evalsha : after.incrby - before.incrby;
  std::printf("%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.4f\t%llu\t%.2f\t%.3f\t%.2f\n", impl.c_str(), key_mode.c_str(),
              callers, repetition, static_cast<double>(m.decisions) / window, percentile_us(m.latency_ns, 0.50),
              percentile_us(m.latency_ns, 0.99),
              m.decisions > 0 ? static_cast<double>(m.over) / static_cast<double>(m.decisions) : 0.0,
              static_cast<unsigned long long>(m.errors), static_cast<double>(after.calls - before.calls) * per,
              static_cast<double>(trips) * per, (after.cpu_s - before.cpu_s) * 1e6 * per);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const settings s = parse_arguments(argc, argv);
  // The server's counters: a connection on an io_context thread of its own (its calls block the main thread).
  asio::io_context admin_io(1);
  auto admin_guard = asio::make_work_guard(admin_io);
  std::thread admin_thread([&admin_io] { admin_io.run(); });
  auto admin = std::make_unique<admit::redis::connection>(admin_io.get_executor(), s.url);
  if (const std::error_code ec = admin->connect()) {
    std::cerr << "admit_serve_redis_bench: cannot connect to " << s.url << ": " << ec.message() << "\n";
    admin.reset();
    admin_guard.reset();
    admin_thread.join();
    return 1;
  }

  asio::io_context io(1);
  auto conn = std::make_unique<admit::redis::connection>(io.get_executor(), s.url);
  admit::serve::redis_backend_options options;
  options.url = s.url;
  options.timeout = std::chrono::milliseconds(1000);
  auto backend = std::make_unique<admit::serve::redis_backend>(io.get_executor(), options);
  admit::serve::rate_limit_rule rule;
  rule.full_key = "bench";
  rule.per = admit::serve::unit::minute;
  rule.requests_per_unit = s.limit;

  std::printf("# fixed window %u per minute, url %s\n", s.limit, s.url.c_str());
  std::printf(
      "# impl\tkeys\tcallers\trep\tdecisions_per_s\tp50_us\tp99_us\tover_limit\terrors\tserver_cmds_per_decision\t"
      "round_trips_per_decision\tserver_cpu_us\n");
  for (int rep = 1; rep <= s.repetitions; ++rep) {
    for (const auto& impl : s.impls) {
      for (const auto& key_mode : s.key_modes) {
        for (const int callers : s.callers) {
          run_case(s, io, *admin, *conn, *backend, rule, impl, key_mode, callers, rep);
        }
      }
    }
  }
  // The clients close while a thread runs their executor (closing delivers what is left through it).
  auto guard = asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  backend.reset();
  conn.reset();
  guard.reset();
  io_thread.join();
  admin.reset();
  admin_guard.reset();
  admin_thread.join();
  return 0;
}
