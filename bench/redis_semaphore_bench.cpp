// admit_redis_semaphore_bench — acquire+release cycles per second and wake-up latency of admit::redis::semaphore (the
// distributed semaphore: FIFO queue in Redis, wake-ups by LPUSH/BLPOP). bench/redis_semaphore_compare.sh runs it next
// to the npm packages redis-semaphore and bottleneck (bench/reference/redis/node/semaphore_bench.js) on the same
// redis-server.
//
//   admit_redis_semaphore_bench --url redis://127.0.0.1:6379 --cycles 1:1,64:8 --duration 3 --wakeup-rounds 300
//
// It never starts Redis: give it the URL of a running server (--url, else $ADMIT_REDIS_URL, else
// redis://127.0.0.1:6379). It writes semaphore keys "{<name>-...}:..." on that server.
//
// A plain program rather than Google Benchmark, as admit_redis_bench (see bench/redis_bench.cpp): a measurement is a
// timed window of blocking contenders on network connections, and the wake-up latency is a sequence of hand-offs
// between two parties, neither of which is a repeatable iteration.
//
// The cases:
// - cycles C:K — C contenders (std::threads) share one admit::redis::semaphore of capacity K on one
//   admit::redis::connection (as threads of one process would), each looping try_acquire_for(10 s) then release()
//   with nothing in between. Variant "async" (--api): the same with C asynchronous contenders on the connection's
//   one io thread — async_acquire_for(10 s), then lease::async_release, each started from the previous one's
//   completion handler — as the contenders of an event loop (Node.js, a single-threaded Asio server) run. After
//   `--warmup`, a `--duration` window: a cycle counts when its release completes in the window; its acquire latency
//   (the call to its completion) is recorded when the acquire completes in the window. At the end the waits still
//   queued are cancelled (the threads' stop_token, the asynchronous contenders' cancellation slot): not errors.
// - minimal FIFO (impl minimal-fifo, variant async; --minimal off to skip) — each cycles case again with the least a
//   FIFO semaphore in Redis can do (redis_semaphore_minimal_fifo.cpp), asynchronous contenders as admit's.
// - wakeup — capacity 1, two parties with a semaphore object and a connection each (as two processes would): the
//   holder holds the permit; the waiter calls try_acquire_for(10 s); the holder waits until the waiter is queued in
//   Redis (inspect(): one waiter), then `--settle-ms` plus a uniformly random 0..`--jitter-ms` ms more (so that a
//   release lands at a random phase of any poll period), reads the clock and calls release(); the waiter reads the
//   clock when its try_acquire_for returns. The latency is the difference (one process, one steady clock): it
//   includes the release call itself, the hand-off in Redis and the wake-up through BLPOP, which carries the grant.
//   Then the waiter releases and the next round starts; `--wakeup-rounds` rounds.
// - the floor (impl redis-floor, variant lpush-blpop; --floor off to skip) — the wake-up case's parties and timing
//   with plain commands: the waiter blocks in BLPOP, the holder sends LPUSH. Not a semaphore: the least any wake-up
//   through Redis costs on this machine under its current load (one command, one blocked reply, the same threads).
// - crowd C:K:H (--crowd; none by default) — C contenders (threads) on one semaphore of capacity K, each holding
//   what it gets H ms: K hold, C − K wait, always. Latencies are the hand-offs (from the start of a release call to
//   the grant of the permit it freed, paired in order: the permit freed first is taken first), cycles/s the grants
//   per second; a '#' line gives Redis's CPU time per grant over the window (INFO cpu: what the waiters cost the
//   server, polls included).
// The semaphores have the default semaphore_options (poll_interval 1 s: the wake-up path is what is measured; lease
// 10 s, auto-renewal) unless --poll-interval-ms says otherwise (reported in the variant). The connections' I/O runs
// on one io_context thread of its own (tests/redis/io_thread.hpp's pattern); the contenders block on theirs.
//
// Output, one tab-separated line per case and repetition (lines starting with '#' are comments):
//   admit <variant> <cycles|wakeup> <contenders> <capacity> <repetition> <cycles/s> <p50 µs> <p99 µs> <mean µs>
//   <max µs> <samples> <errors> <fairness>
// cycles: samples are the cycles counted, latencies the acquire latencies; fairness = the fewest cycles of one
// contender ÷ the mean per contender (1 = evenly served); wakeup: cycles/s and fairness are "-", latencies are the
// release-to-waiter-running times, samples the rounds measured. errors: acquisitions that failed (timeout, Redis
// errors; not the cancellations at the end of a window) and releases that Redis did not take.
// A '#' line after each cycles case gives its releases' latency (p50, p99, mean µs: a round trip each; at
// C:K, each hand-off waits for one). Another counts its acquisitions that waited at least 0.9 × poll_interval: waits
// that ended only by the waiter's own poll, i.e. wake-ups that never came.
#include "redis_semaphore_bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admit/redis/admission.hpp"

namespace admit::bench::semaphore_bench {

using namespace std::chrono_literals;

namespace {

constexpr admit::bench::command_line command(
    "admit_redis_semaphore_bench",
    "usage: admit_redis_semaphore_bench [--url URL] [--cycles C:K,...] [--duration S] [--warmup S]\n"
    "                                   [--wakeup-rounds N] [--settle-ms MS] [--jitter-ms MS]\n"
    "                                   [--repetitions N] [--name NAME] [--timeout-ms MS]\n"
    "                                   [--poll-interval-ms MS] [--tag TEXT] [--floor on|off]\n"
    "                                   [--api blocking|async|both|none] [--rate R [--burst B]]\n"
    "                                   [--crowd C:K:HOLD_MS,...] [--idle-ttl-ms MS] [--minimal on|off]\n"
    "                                   [--progress FILE]\n"
    "--cycles C:K,...: cases of C contenders on a semaphore of capacity K (default 1:1,64:8); 'none' for\n"
    "  no cycles case. --wakeup-rounds 0: no wake-up case (default 300 rounds).\n"
    "--api both (default): each cycles case with blocking contenders (threads; variant 'default') and then\n"
    "  with asynchronous ones (one io thread; variant 'async'); none: neither (the minimal FIFO hand-off only).\n"
    "--minimal on (default): each cycles case also with the minimal FIFO hand-off (impl 'minimal-fifo',\n"
    "  variant 'async'): a function of acquire and release-to-the-head only, the least a FIFO semaphore costs.\n"
    "--floor on (default): after the wake-up case, the same rounds with LPUSH -> BLPOP instead of the\n"
    "  semaphore (impl redis-floor): the floor of a wake-up through Redis on this machine.\n"
    "--rate R: the blocking cycles through an admit::redis::admission of rate R (burst --burst, default\n"
    "  1000000) and the case's capacity (variant 'admission'): a rate decided with the permits.\n"
    "--crowd C:K:HOLD_MS: C contenders on capacity K, each holding HOLD_MS ms (default: none): Redis CPU\n"
    "  per grant and the hand-off from a release to the next grant.\n"
    "--idle-ttl-ms MS: the semaphores' idle_ttl (default 0: their keys stay).\n"
    "--progress FILE: the asynchronous cycles cases (admit's and the minimal hand-off's) write the cycles\n"
    "  completed so far in their window to FILE every 100 ms (a number and a newline, replaced whole).\n"
    "--timeout-ms is the connection's command timeout; the semaphores have the default semaphore_options\n"
    "  (poll_interval 1 s) unless --poll-interval-ms is given. --tag TEXT is appended to the variant.\n");

settings parse_arguments(int argc, char** argv) {
  settings s;
  command.for_each_flag(argc, argv, [&s](const std::string& flag, const std::string& value) {
    if (flag == "--url") {
      s.url = value;
    } else if (flag == "--cycles") {
      s.cycles.clear();
      if (value == "none") return;
      for (const auto& c : split(value)) {
        const auto parts = split(c, ':');
        if (parts.size() != 2) command.usage("--cycles takes CONTENDERS:CAPACITY pairs, got '" + c + "'");
        s.cycles.push_back(
            {static_cast<int>(command.to_integer(flag, parts[0], 1)), command.to_integer(flag, parts[1], 1)});
      }
    } else if (flag == "--crowd") {
      s.crowds.clear();
      if (value == "none") return;
      for (const auto& c : split(value)) {
        const auto parts = split(c, ':');
        if (parts.size() != 3) command.usage("--crowd takes CONTENDERS:CAPACITY:HOLD_MS triples, got '" + c + "'");
        s.crowds.push_back({static_cast<int>(command.to_integer(flag, parts[0], 1)),
                            command.to_integer(flag, parts[1], 1),
                            static_cast<int>(command.to_integer(flag, parts[2], 0))});
      }
    } else if (flag == "--duration") {
      s.duration_s = command.to_double(flag, value);
      if (s.duration_s <= 0) command.usage("--duration must be > 0");
    } else if (flag == "--warmup") {
      s.warmup_s = command.to_double(flag, value);
    } else if (flag == "--wakeup-rounds") {
      s.wakeup_rounds = static_cast<int>(command.to_integer(flag, value, 0));
    } else if (flag == "--settle-ms") {
      s.settle_ms = command.to_double(flag, value);
    } else if (flag == "--jitter-ms") {
      s.jitter_ms = command.to_double(flag, value);
    } else if (flag == "--repetitions") {
      s.repetitions = static_cast<int>(command.to_integer(flag, value, 1));
    } else if (flag == "--name") {
      if (value.empty() || value.find_first_of("{}") != std::string::npos)
        command.usage("--name must be non-empty, no {}");
      s.name = value;
    } else if (flag == "--timeout-ms") {
      s.timeout = std::chrono::milliseconds(command.to_integer(flag, value, 1));
    } else if (flag == "--progress") {
      s.progress_file = value;
    } else if (flag == "--idle-ttl-ms") {
      s.idle_ttl = std::chrono::milliseconds(command.to_integer(flag, value, 0));
    } else if (flag == "--poll-interval-ms") {
      s.poll_interval = std::chrono::milliseconds(command.to_integer(flag, value, 1));
    } else if (flag == "--floor") {
      if (value != "on" && value != "off") command.usage("--floor takes on or off, got '" + value + "'");
      s.floor = value == "on";
    } else if (flag == "--minimal") {
      if (value != "on" && value != "off") command.usage("--minimal takes on or off, got '" + value + "'");
      s.minimal = value == "on";
    } else if (flag == "--api") {
      if (value != "blocking" && value != "async" && value != "both" && value != "none")
        command.usage("--api takes blocking, async, both or none, got '" + value + "'");
      s.blocking = value == "blocking" || value == "both";
      s.async = value == "async" || value == "both";
    } else if (flag == "--tag") {
      s.tag = value;
    } else if (flag == "--rate") {
      try {
        s.rate = admit::rate::parse(value);
      } catch (const std::invalid_argument& e) {
        command.usage(std::string("--rate: ") + e.what());
      }
    } else if (flag == "--burst") {
      s.burst = command.to_integer(flag, value, 1);
    } else {
      command.usage("unknown argument " + flag);
    }
  });
  return s;
}

}  // namespace

summary summarize(std::vector<std::int64_t> ns) {
  summary s;
  if (ns.empty()) return s;
  s.p50 = percentile_us(ns, 0.50);
  s.p99 = percentile_us(ns, 0.99);
  double total = 0;  // exact in any order: whole nanoseconds, far below 2^53
  for (const auto v : ns) total += static_cast<double>(v);
  s.mean = total / static_cast<double>(ns.size()) / 1000.0;
  s.max = static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1000.0;
  return s;
}

admit::redis::semaphore_options semaphore_options(const settings& s) {
  admit::redis::semaphore_options o;
  if (s.poll_interval) o.poll_interval = *s.poll_interval;
  o.idle_ttl = s.idle_ttl;
  return o;
}

std::string variant(const settings& s, bool async) {
  const std::string poll = s.poll_interval ? "poll" + std::to_string(s.poll_interval->count()) + "ms" : "";
  if (async) return (poll.empty() ? "async" : "async-" + poll) + s.tag;
  return (poll.empty() ? "default" : poll) + s.tag;
}

admit::redis::connection_options connection_options(const settings& s) {
  admit::redis::connection_options options = admit::redis::parse_url(s.url);
  options.command_timeout = s.timeout;
  return options;
}

void connect_or_exit(admit::redis::connection& conn, const settings& s) {
  if (const auto ec = conn.connect()) {
    std::cerr << "admit_redis_semaphore_bench: cannot connect to " << s.url << ": " << ec.message() << " "
              << conn.last_error() << "\n";
    std::exit(1);
  }
}

std::string case_name(const settings& s, const std::string& what, int repetition) {
  return s.name + "-" + what + "-" + std::to_string(repetition) + "-" + std::to_string(::getpid());
}

void report_cycles(const settings& s, const cycles_case& c, int repetition, const std::string& variant_name,
                   const std::string& label, cycles_tally t, const std::string& impl) {
  std::vector<std::int64_t> all;
  std::uint64_t total = 0, fewest = ~std::uint64_t{0};
  for (std::size_t i = 0; i < t.acquire_ns.size(); ++i) {
    all.insert(all.end(), t.acquire_ns[i].begin(), t.acquire_ns[i].end());
    total += t.cycles[i];
    fewest = std::min(fewest, t.cycles[i]);
  }
  const auto k = static_cast<long long>(c.capacity);
  // Waits that ended only by the waiter's own poll (poll_interval after its last look): a wake-up that never came.
  const auto poll_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(semaphore_options(s).poll_interval).count();
  const auto slow = std::count_if(all.begin(), all.end(), [&](std::int64_t v) { return v >= poll_ns * 9 / 10; });
  if (slow > 0) {
    std::printf("# %s %d:%lld rep %d: %lld of %zu acquisitions waited >= 0.9 x poll_interval (%lld ms)\n",
                label.c_str(), c.contenders, k, repetition, static_cast<long long>(slow), all.size(),
                static_cast<long long>(poll_ns / 1'000'000));
  }
  if (!t.first_error.empty()) {
    std::printf("# %s %d:%lld rep %d: first error: %s\n", label.c_str(), c.contenders, k, repetition,
                t.first_error.c_str());
  }
  // The releases' own latency (a round trip; at C:K it is also each hand-off's share of a cycle).
  std::vector<std::int64_t> all_releases;
  for (const auto& r : t.release_ns) all_releases.insert(all_releases.end(), r.begin(), r.end());
  const summary rs = summarize(std::move(all_releases));
  std::printf("# %s %d:%lld rep %d: release p50 %.1f us, p99 %.1f us, mean %.1f us\n", label.c_str(), c.contenders, k,
              repetition, rs.p50, rs.p99, rs.mean);
  const summary sm = summarize(std::move(all));
  const double mean_per_contender = static_cast<double>(total) / c.contenders;
  std::printf("%s\t%s\tcycles\t%d\t%lld\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%llu\t%llu\t%.3f\n", impl.c_str(),
              variant_name.c_str(), c.contenders, k, repetition, static_cast<double>(total) / s.duration_s, sm.p50,
              sm.p99, sm.mean, sm.max, static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(t.errors),
              mean_per_contender > 0 ? static_cast<double>(fewest) / mean_per_contender : 0.0);
  std::fflush(stdout);
}
void run_cycles(const settings& s, const cycles_case& c, int repetition) {
  io_thread io;
  admit::redis::connection conn(io.executor(), connection_options(s));
  connect_or_exit(conn, s);
  const std::string name =
      case_name(s, "cycles-" + std::to_string(c.contenders) + "x" + std::to_string(c.capacity), repetition);
  std::optional<admit::redis::semaphore> sem;
  std::optional<admit::redis::admission> adm;
  if (s.rate) {
    adm.emplace(conn, name, admit::admission_options{.rate = *s.rate, .burst = s.burst, .max_in_flight = c.capacity},
                semaphore_options(s));
  } else {
    sem.emplace(conn, name, c.capacity, semaphore_options(s));
  }
  const auto acquire = [&](const std::stop_token& token) {
    return adm ? adm->try_acquire_for(10s, 0, 1, token) : sem->try_acquire_for(10s, 1, token);
  };

  const auto start = clock_type::now();
  const auto from = start + seconds(s.warmup_s);
  const auto until = from + seconds(s.duration_s);
  std::stop_source stop;
  std::atomic<std::uint64_t> errors{0};
  std::mutex error_mutex;
  std::string first_error;  // the first error's text, for a '#' line
  const auto error = [&](const std::string& what) {
    errors.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(error_mutex);
    if (first_error.empty()) first_error = what;
  };
  std::vector<std::vector<std::int64_t>> latencies(static_cast<std::size_t>(c.contenders));
  std::vector<std::vector<std::int64_t>> release_latencies(static_cast<std::size_t>(c.contenders));
  std::vector<std::uint64_t> cycles(static_cast<std::size_t>(c.contenders), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(c.contenders));
  for (int i = 0; i < c.contenders; ++i) {
    threads.emplace_back([&, i] {
      auto& lat = latencies[static_cast<std::size_t>(i)];
      auto& rel = release_latencies[static_cast<std::size_t>(i)];
      auto& done = cycles[static_cast<std::size_t>(i)];
      lat.reserve(1 << 16);
      rel.reserve(1 << 16);
      const std::stop_token token = stop.get_token();
      while (!token.stop_requested()) {
        const auto t0 = clock_type::now();
        auto r = acquire(token);
        const auto t1 = clock_type::now();
        if (!r) {
          if (r.error() != admit::errc::cancelled) error("acquire: " + r.error().message());
          continue;
        }
        if (t1 >= from && t1 < until)
          lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        const auto [status, ec] = r->release();
        const auto t2 = clock_type::now();
        const bool ok = status == admit::redis::lease::release_status::released;
        if (!ok) error("release: " + (ec ? ec.message() : std::string("not held")));
        if (ok && t2 >= from && t2 < until) {
          ++done;
          rel.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t2 - t1).count());
        }
      }
    });
  }
  std::this_thread::sleep_until(until);
  stop.request_stop();
  for (auto& t : threads) t.join();

  cycles_tally t(c.contenders);
  t.acquire_ns = std::move(latencies);
  t.release_ns = std::move(release_latencies);
  t.cycles = std::move(cycles);
  t.errors = errors.load();
  t.first_error = std::move(first_error);
  report_cycles(s, c, repetition, s.rate ? variant(s) + "+admission" : variant(s), "admit cycles", std::move(t));
}

}  // namespace admit::bench::semaphore_bench

int main(int argc, char** argv) {
  using namespace admit::bench::semaphore_bench;
  const settings s = parse_arguments(argc, argv);
  const auto o = semaphore_options(s);
  std::printf(
      "# admit::redis::semaphore, semaphore_options: poll_interval %lld ms, lease_ttl %lld ms, auto_renew %s, "
      "waiter_ttl %s; connection command timeout %lld ms; url %s\n",
      static_cast<long long>(o.poll_interval.count()), static_cast<long long>(o.lease_ttl.count()),
      o.auto_renew ? "on" : "off", o.waiter_ttl.count() == 0 ? "default" : std::to_string(o.waiter_ttl.count()).c_str(),
      static_cast<long long>(s.timeout.count()), s.url.c_str());
  std::printf(
      "# cycles: %.1f s window after %.1f s warm-up; wakeup: %d rounds, release %.1f ms + U(0, %.1f) ms after the "
      "waiter is queued\n",
      s.duration_s, s.warmup_s, s.wakeup_rounds, s.settle_ms, s.jitter_ms);
  std::printf(
      "# impl\tvariant\tcase\tcontenders\tcapacity\trep\tcycles_per_s\tp50_us\tp99_us\tmean_us\tmax_us\tsamples\t"
      "errors\tfairness\n");
  std::fflush(stdout);
  for (int rep = 1; rep <= s.repetitions; ++rep) {
    for (const auto& c : s.cycles) {
      if (s.blocking) run_cycles(s, c, rep);
      if (s.async) run_async_cycles(s, c, rep);
      if (s.minimal) run_minimal_fifo_cycles(s, c, rep);
    }
    for (const auto& c : s.crowds) run_crowd(s, c, rep);
    if (s.wakeup_rounds > 0) run_wakeup(s, rep);
    if (s.wakeup_rounds > 0 && s.floor) run_floor(s, rep);
  }
  return 0;
}
