// admit_redis_bench — decisions/s and latency of admit::redis::gcra over ONE admit::redis::connection, with 1, 64 and
// 512 concurrent callers, on one hot key and on many keys (issue 5, "Performance"). bench/redis_compare.sh runs it
// next to redis-benchmark, rate-limiter-flexible and Python `limits` on the same redis-server.
//
//   admit_redis_bench --url redis://127.0.0.1:6379 --callers 1,64,512 --keys hot,many --duration 3
//   admit_redis_bench --metrics on    # the same with limiter metrics enabled (variant "-m"): their cost
//
// It never starts Redis: give it the URL of a running server (--url, else $ADMIT_REDIS_URL, else
// redis://127.0.0.1:6379). It writes limiter keys "{<name>}:..." on that server (they expire by themselves).
//
// A plain program rather than Google Benchmark: one measurement is a timed window of many concurrent asynchronous
// decisions on a network connection, not a repeatable iteration. Google Benchmark would cut the run into batches of
// iterations whose boundaries drain the in-flight window to zero (512 callers ramp down and up again at each batch,
// which is not the steady state being measured), and the latency percentiles need every decision's latency of the
// whole window, which its per-iteration counters do not carry. Repetitions and their medians are the script's job.
//
// Each case: a `--warmup` period (connection, SCRIPT LOAD after the first NOSCRIPT, steady state), then a
// `--duration` window; every decision that completes inside the window counts, with its latency (from the
// async_decide call to its completion handler). Callers are callback chains (default) or C++20 coroutines
// (--style coroutine), each looping async_decide; all of them, the connection's I/O and the completions run on one
// io_context thread (the main thread), so the client uses one core, as redis-benchmark and Node do.
//
// Output, one tab-separated line per case and repetition (lines starting with '#' are comments):
//   admit <variant> <hot|many> <callers> <repetition> <decisions/s> <p50 µs> <p99 µs> <admitted share> <errors>
//   <commands per write> <client CPU µs per decision>
// (impl "admit-lease" with --lease; variant: the caller style, "-lsd" appended with --lost-state-detection on, "-bN"
// with a --max-batch N other than the default, "-m" with --metrics on, then --tag's text)
// "errors" are decisions Redis did not make (timeouts, connection errors): they are not counted as decisions.
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "admit/rate.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "redis_bench_common.hpp"

namespace {

namespace asio = boost::asio;
using admit::bench::clock_type;
using admit::bench::percentile_us;
using admit::bench::seconds;
using admit::bench::split;

struct settings {
  std::string url = admit::bench::default_url();
  std::vector<std::string> key_modes = {"hot", "many"};
  std::vector<int> callers = {1, 64, 512};
  std::size_t key_count = 100'000;
  double duration_s = 3.0;
  double warmup_s = 0.5;
  int repetitions = 1;
  std::string style = "callback";
  std::string tag;  // appended to the variant (to tell apart cases with other limiter parameters)
  double rate_per_second = 1000.0;
  std::int64_t burst = 1000;
  std::string name = "admit-bench";
  std::chrono::milliseconds timeout{1000};
  bool lost_state_detection = false;  // limiter_options::detect_lost_state (off by default)
  std::int64_t lease = 0;             // limiter_options::lease (0: off, the default)
  std::size_t max_batch = admit::redis::limiter_options{}.max_batch;  // limiter_options::max_batch
  bool metrics = false;                                               // limiter::enable_metrics (off by default)
};

constexpr admit::bench::command_line command(
    "admit_redis_bench",
    "usage: admit_redis_bench [--url URL] [--keys hot,many] [--callers 1,64,512] [--key-count N]\n"
    "                         [--duration S] [--warmup S] [--repetitions N] [--style callback|coroutine]\n"
    "                         [--rate PER_SECOND] [--burst N] [--name NAME] [--timeout-ms MS]\n"
    "                         [--lost-state-detection on|off] [--tag TEXT] [--lease K] [--max-batch N]\n"
    "                         [--metrics on|off]\n"
    "--timeout-ms is the connection's command timeout; each decision has the limiter's default deadline.\n"
    "--lease K > 1 turns on local token leasing (reported as impl admit-lease).\n"
    "--tag TEXT is appended to the reported variant.\n");

settings parse_arguments(int argc, char** argv) {
  settings s;
  command.for_each_flag(argc, argv, [&s](const std::string& flag, const std::string& value) {
    if (flag == "--url") {
      s.url = value;
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
    } else if (flag == "--style") {
      if (value != "callback" && value != "coroutine")
        command.usage("--style takes callback or coroutine, got '" + value + "'");
      s.style = value;
    } else if (flag == "--rate") {
      s.rate_per_second = command.to_double(flag, value);
    } else if (flag == "--burst") {
      s.burst = command.to_integer(flag, value, 1);
    } else if (flag == "--name") {
      s.name = value;
    } else if (flag == "--lost-state-detection") {
      if (value != "on" && value != "off") command.usage("--lost-state-detection takes on or off, got '" + value + "'");
      s.lost_state_detection = value == "on";
    } else if (flag == "--metrics") {
      if (value != "on" && value != "off") command.usage("--metrics takes on or off, got '" + value + "'");
      s.metrics = value == "on";
    } else if (flag == "--tag") {
      s.tag = value;
    } else if (flag == "--lease") {
      s.lease = command.to_integer(flag, value, 0);
    } else if (flag == "--max-batch") {
      s.max_batch = static_cast<std::size_t>(command.to_integer(flag, value, 1));
    } else if (flag == "--timeout-ms") {
      s.timeout = std::chrono::milliseconds(command.to_integer(flag, value, 1));
    } else {
      command.usage("unknown argument " + flag);
    }
  });
  return s;
}

// The keys one case draws from: one hot key, or `count` keys picked uniformly at random (xorshift64*).
class key_source {
 public:
  key_source(bool hot, std::size_t count) {
    if (hot) {
      keys_.emplace_back("hot");
      return;
    }
    keys_.reserve(count);
    // "k" and 12 digits, as redis-benchmark's __rand_int__ writes them (bench/redis_compare.sh uses the same keys).
    char buffer[32];
    for (std::size_t i = 0; i < count; ++i) {
      std::snprintf(buffer, sizeof buffer, "k%012zu", i);
      keys_.emplace_back(buffer);
    }
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

// What one case measures. Everything runs on the one io_context thread: no synchronization.
struct measurement {
  clock_type::time_point from, until;
  bool stopping = false;
  int active = 0;  // callers still looping
  std::uint64_t decisions = 0, admitted = 0, errors = 0;
  std::vector<std::uint32_t> latency_ns;

  // Records one completion; returns whether the caller should issue another decision.
  bool record(clock_type::time_point started, const boost::system::error_code& ec, bool admitted_now) {
    const auto end = clock_type::now();
    if (end >= from && end < until) {
      if (ec) {
        ++errors;
      } else {
        ++decisions;
        if (admitted_now) ++admitted;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - started).count();
        latency_ns.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(ns, 0xFFFFFFFF)));
      }
    }
    if (end >= until) stopping = true;
    if (stopping) --active;
    return !stopping;
  }
};

// A callback chain: async_decide, and from its completion the next async_decide.
class callback_caller {
 public:
  callback_caller(const admit::redis::gcra& limiter, key_source& keys, measurement& m)
      : limiter_(&limiter), keys_(&keys), m_(&m) {}
  void next() {
    const auto started = clock_type::now();
    limiter_->async_decide(keys_->next(), 1, [this, started](boost::system::error_code ec, admit::decision d) {
      if (m_->record(started, ec, d.admitted)) next();
    });
  }

 private:
  const admit::redis::gcra* limiter_;
  key_source* keys_;
  measurement* m_;
};

asio::awaitable<void> coroutine_caller(const admit::redis::gcra& limiter, key_source& keys, measurement& m) {
  for (;;) {
    const auto started = clock_type::now();
    auto [ec, d] = co_await limiter.async_decide(keys.next(), 1, asio::as_tuple(asio::use_awaitable));
    if (!m.record(started, ec, d.admitted)) co_return;
  }
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

void run_case(const settings& s, asio::io_context& io, admit::redis::connection& conn,
              const admit::redis::gcra& limiter, const std::string& impl, const std::string& variant,
              const std::string& key_mode, int callers, int repetition) {
  key_source keys(key_mode == "hot", s.key_count);
  measurement m;
  m.latency_ns.reserve(1 << 20);
  const auto start = clock_type::now();
  m.from = start + seconds(s.warmup_s);
  m.until = m.from + seconds(s.duration_s);
  m.active = callers;

  std::vector<std::unique_ptr<callback_caller>> chains;
  for (int i = 0; i < callers; ++i) {
    if (s.style == "callback") {
      chains.push_back(std::make_unique<callback_caller>(limiter, keys, m));
      chains.back()->next();
    } else {
      asio::co_spawn(io, coroutine_caller(limiter, keys, m), asio::detached);
    }
  }
  // Statistics and CPU time at the start of the window (the first completion at or after `from`).
  while (clock_type::now() < m.from) io.run_one();
  const auto stats_before = conn.statistics();
  const double cpu_before = cpu_seconds();
  const auto window_start = clock_type::now();
  while (clock_type::now() < m.until && m.active > 0) io.run_one();
  const auto stats_after = conn.statistics();
  const double cpu_after = cpu_seconds();
  const auto window_end = clock_type::now();
  while (m.active > 0) io.run_one();  // let the callers finish their last decision

  const double window = std::chrono::duration<double>(m.until - m.from).count();
  const double writes = static_cast<double>(stats_after.writes - stats_before.writes);
  const double written = static_cast<double>(stats_after.commands_written - stats_before.commands_written);
  // CPU over the part of the window between the two readings, per decision completed in it (approximately).
  const double cpu_window = std::chrono::duration<double>(window_end - window_start).count();
  const double decisions_in_cpu_window =
      static_cast<double>(m.decisions) * (window > 0 ? std::min(1.0, cpu_window / window) : 1.0);
  const double cpu_us = decisions_in_cpu_window > 0 ? (cpu_after - cpu_before) * 1e6 / decisions_in_cpu_window : 0;
  const double p50 = percentile_us(m.latency_ns, 0.50);
  const double p99 = percentile_us(m.latency_ns, 0.99);
  std::printf("%s\t%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.4f\t%llu\t%.1f\t%.2f\n", impl.c_str(), variant.c_str(),
              key_mode.c_str(), callers, repetition, static_cast<double>(m.decisions) / window, p50, p99,
              m.decisions > 0 ? static_cast<double>(m.admitted) / static_cast<double>(m.decisions) : 0.0,
              static_cast<unsigned long long>(m.errors), writes > 0 ? written / writes : 0.0, cpu_us);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const settings s = parse_arguments(argc, argv);
  asio::io_context io(1);
  admit::redis::connection_options options = admit::redis::parse_url(s.url);
  options.command_timeout = s.timeout;
  admit::redis::connection conn(io.get_executor(), options);

  bool connected = false;
  boost::system::error_code connect_error;
  conn.async_connect([&](boost::system::error_code ec) {
    connected = true;
    connect_error = ec;
  });
  while (!connected) io.run_one();
  if (connect_error) {
    std::cerr << "admit_redis_bench: cannot connect to " << s.url << ": " << connect_error.message() << " "
              << conn.last_error() << "\n";
    return 1;
  }

  // The limiter's default options (deadline, failure policy, lost-state detection: what a user gets without asking),
  // unless told otherwise.
  admit::redis::limiter_options lopts;
  lopts.detect_lost_state = s.lost_state_detection;
  lopts.lease = s.lease;
  lopts.max_batch = s.max_batch;
  admit::redis::gcra limiter(conn, s.name, admit::rate::per_second(s.rate_per_second), s.burst, lopts);
  if (s.metrics) limiter.enable_metrics();
  const std::string impl = s.lease > 1 ? "admit-lease" : "admit";
  const std::string variant =
      s.style + (s.lost_state_detection ? "-lsd" : "") +
      (s.max_batch == admit::redis::limiter_options{}.max_batch ? "" : "-b" + std::to_string(s.max_batch)) +
      (s.metrics ? "-m" : "") + s.tag;
  std::printf(
      "# admit::redis::gcra \"%s\" rate %s burst %lld (emission interval %lld us), %s callers, lost-state detection "
      "%s, lease %lld, max_batch %zu, url %s\n",
      s.name.c_str(), limiter.get_rate().to_string().c_str(), static_cast<long long>(s.burst),
      static_cast<long long>(limiter.emission_interval().count()), s.style.c_str(),
      s.lost_state_detection ? "on" : "off", static_cast<long long>(s.lease), s.max_batch, s.url.c_str());
  std::printf(
      "# impl\tvariant\tkeys\tcallers\trep\tdecisions_per_s\tp50_us\tp99_us\tadmitted\terrors\tcmds_per_write\t"
      "client_cpu_us\n");
  for (int rep = 1; rep <= s.repetitions; ++rep) {
    for (const auto& key_mode : s.key_modes) {
      for (const int callers : s.callers) run_case(s, io, conn, limiter, impl, variant, key_mode, callers, rep);
    }
  }
  conn.close();
  io.run_for(std::chrono::milliseconds(100));
  return 0;
}
