// Google Benchmark: nanoseconds per `try_acquire` of every admit rate limiter, on the admit path and the reject path,
// with a caller-supplied time (`try_acquire_at(now)`) and with the clock read (`try_acquire()`), on 1, 2 and 8 threads
// sharing one limiter; plus the bare clock reads, so that "with the clock" can be read as "clock read + X ns".
//
//   cmake --preset release && cmake --build --preset release --target admit_bench
//   build/release/bench/admit_bench --benchmark_filter='token_bucket/'
//
// bench/compare.sh runs this next to the reference implementations and writes docs/PERFORMANCE.md.
//
// Names: <algorithm>/<path>/<time>[/process_time/real_time/threads:<n>]
//   path: admit  — a finite, huge rate and burst (or window limit): every call is admitted;
//         reject — a slow rate (or a long window) with the limiter drained before timing: every call is refused.
//   time: at     — `try_acquire_at(now)` with a time the caller already has (read once, before the loop; on the admit
//                  path of the algorithms that need time to pass, advanced by a fixed step per call);
//         now    — `try_acquire()`, which reads the limiter's clock (std::chrono::steady_clock);
//         coarse — `try_acquire()` on a `basic_x<admit::coarse_steady_clock>` (CLOCK_MONOTONIC_COARSE).
// Every case is timed in wall-clock time (UseRealTime): with n threads the time per operation is the wall time
// divided by the operations of all threads — the inverse of the throughput, as Go's b.RunParallel reports it. The
// threaded cases also measure the process CPU time, so a spinning retry loop shows up in the CPU column.
//
// Metrics: <algorithm>/<path>/at/metrics:off and .../metrics:on (token bucket and GCRA, 1 and 2 threads) time
// try_acquire_at with the opt-in metrics (enable_metrics) off — one null-pointer test per decision — and on — one
// relaxed increment of a shared counter per decision.
//
// Every call's answer is checked against the path's expectation; a case that times the wrong path (a misconfigured
// limiter) stops with an error instead of reporting a number.
#include <benchmark/benchmark.h>

#include <admit/clock.hpp>
#include <admit/fixed_window.hpp>
#include <admit/gcra.hpp>
#include <admit/pacer.hpp>
#include <admit/rate.hpp>
#include <admit/sliding_log.hpp>
#include <admit/sliding_window.hpp>
#include <admit/token_bucket.hpp>
#include <admit/warmup.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace {

using namespace std::chrono_literals;

// The admit path: 1e9 tokens a second (one a nanosecond), finite, so that the limiter runs its arithmetic rather than
// an "infinite rate" shortcut; a bucket (or window) so large that no benchmark run can empty it.
constexpr double huge_rate = 1e9;
constexpr std::int64_t huge_burst = 1'000'000'000'000;  // 1e12 tokens: ~17 minutes of calls at 1 ns each

// The reject path: one token an hour (or one per 1000-hour window), drained before timing.
const admit::rate slow_rate = admit::rate::every(1h);

enum class path { admit, reject };
enum class timing { at, now, coarse };

// One case per algorithm: how to build its limiter for each path (`make`), and how its "at" admit path is driven.
// `make(path)` returns a fresh limiter; the reject path's limiter is drained by the harness (try_acquire until refused)
// before timing.
//   admit_at_step — 0: the "at" cases pass one constant time (as x/time/rate's own BenchmarkAllowN does). Otherwise
//     the admit path needs time to pass (a pacer or a warm-up limiter admits a caller only once its slot has begun; a
//     log or a window counter fills up at a constant time), and each thread's time advances by this much per call.
//   admit_at_threads — false when threads that each advance their own time would disagree on "now" so much that a
//     refusal is the right answer (the slowest thread's time is behind slots others already took): the "at" admit
//     path then runs on one thread only.
//   coarse_admit — false when a clock that stands still for a whole tick makes refusals the right answer on the admit
//     path (a warm-up limiter admits one request per instant, whatever the rate).
// What most cases share; a case overrides a member by declaring its own.
struct case_defaults {
  static constexpr std::int64_t admit_at_step = 0;
  static constexpr bool admit_at_threads = true;
  static constexpr bool coarse_admit = true;
};

// Limiters built from a rate and a burst: the token bucket and GCRA.
template <template <class> class Limiter>
struct rate_and_burst_case : case_defaults {
  template <class Clock>
  using limiter = Limiter<Clock>;
  template <class Clock>
  static std::unique_ptr<limiter<Clock>> make(path p) {
    if (p == path::admit) return std::make_unique<limiter<Clock>>(admit::rate::per_second(huge_rate), huge_burst);
    return std::make_unique<limiter<Clock>>(slow_rate, 1);
  }
};
using token_bucket_case = rate_and_burst_case<admit::basic_token_bucket>;
using gcra_case = rate_and_burst_case<admit::basic_gcra>;

struct pacer_case : case_defaults {
  template <class Clock>
  using limiter = admit::basic_pacer<Clock>;
  template <class Clock>
  static std::unique_ptr<limiter<Clock>> make(path p) {
    // Admit: slots 1 ns apart and a slack of 1e12 slots (~17 minutes). The pacer is primed with a call an hour ago
    // (pacing starts at the first call), so it has banked its whole slack, as a pacer in use after an idle spell has:
    // 1e12 callers may then pass at one instant, and callers whose clock reads race are all within the slack.
    // Reject: one slot an hour, no slack.
    if (p == path::admit) {
      admit::pacer_options options;
      options.slack = huge_burst;
      auto pacer = std::make_unique<limiter<Clock>>(admit::rate::per_second(huge_rate), options);
      (void)pacer->try_acquire_at(Clock::now() - std::chrono::hours(1));
      return pacer;
    }
    return std::make_unique<limiter<Clock>>(slow_rate, admit::pacer_options::without_slack());
  }
};

struct fixed_window_case : case_defaults {
  template <class Clock>
  using limiter = admit::basic_fixed_window<Clock>;
  template <class Clock>
  static std::unique_ptr<limiter<Clock>> make(path p) {
    // The packing needs the window in ns above the limit: 1e12 requests per 10,000 s window.
    if (p == path::admit) return std::make_unique<limiter<Clock>>(huge_burst, std::chrono::seconds(10'000));
    return std::make_unique<limiter<Clock>>(1, std::chrono::hours(1000));
  }
};

struct sliding_window_case : case_defaults {
  template <class Clock>
  using limiter = admit::basic_sliding_window<Clock>;
  static constexpr std::int64_t admit_at_step = 1;  // 1 ns per call: at most 1,000 calls in a 1 us window
  static constexpr bool admit_at_threads = true;    // a stale time is judged in the newest window: still far below
  template <class Clock>
  static std::unique_ptr<limiter<Clock>> make(path p) {
    // Admit: the largest limit the packing allows (2^24 - 1) per 1 us window — far above any call rate.
    if (p == path::admit)
      return std::make_unique<limiter<Clock>>(limiter<Clock>::max_limit, std::chrono::microseconds(1));
    return std::make_unique<limiter<Clock>>(1, std::chrono::hours(1000));
  }
};

struct sliding_log_case : case_defaults {
  template <class Clock>
  using limiter = admit::basic_sliding_log<Clock>;
  static constexpr std::int64_t admit_at_step = 1;  // 1 ns per call: at most 1,000 calls in a 1 us window
  static constexpr bool admit_at_threads = false;   // the log is exact: a thread far behind sees a full window
  template <class Clock>
  static std::unique_ptr<limiter<Clock>> make(path p) {
    // Admit: 2^20 requests (a 16 MiB log) per 1 us window — far above any call rate, and deep enough that a clock
    // read preempted for a few milliseconds before its decision is still admitted.
    if (p == path::admit) return std::make_unique<limiter<Clock>>(std::int64_t{1} << 20, std::chrono::microseconds(1));
    return std::make_unique<limiter<Clock>>(1, std::chrono::hours(1000));
  }
};

struct warmup_case : case_defaults {
  template <class Clock>
  using limiter = admit::basic_warmup<Clock>;
  static constexpr std::int64_t admit_at_step = 1000;  // 1 us per call, far above the 1-3 ns cost of a request
  static constexpr bool admit_at_threads = false;
  static constexpr bool coarse_admit = false;
  template <class Clock>
  static std::unique_ptr<limiter<Clock>> make(path p) {
    // Admit: 1e9/s stable, 1 s warm-up, cold factor 3 (a request costs 1 to 3 ns). Reject: one an hour, cold.
    if (p == path::admit) {
      return std::make_unique<limiter<Clock>>(admit::rate::per_second(huge_rate), std::chrono::seconds(1));
    }
    return std::make_unique<limiter<Clock>>(slow_rate, std::chrono::hours(1));
  }
};

// The limiter shared by the threads of the running case. Built by `setup` on the main thread before the case's
// threads start (Google Benchmark's Setup hook), so every thread sees it without further synchronization.
template <class Case, class Clock>
struct shared {
  static inline std::unique_ptr<typename Case::template limiter<Clock>> limiter;
  static inline typename Clock::time_point start{};
};

template <class Case, class Clock, path P>
void setup(const benchmark::State&) {
  using S = shared<Case, Clock>;
  S::limiter = Case::template make<Clock>(P);
  S::start = Clock::now();
  if (P == path::reject) {
    // Drain at the time the "at" cases will use; the clock cases read a clock that only moves forward, and a slow
    // rate refills nothing during a run.
    for (int i = 0; i < 1'000'000 && S::limiter->try_acquire_at(S::start); ++i) {
    }
  }
}

template <class Case, class Clock, path P, timing T>
void bench_try_acquire(benchmark::State& state) {
  using S = shared<Case, Clock>;
  auto& limiter = *S::limiter;
  auto now = S::start;
  constexpr bool want = P == path::admit;
  constexpr std::int64_t step = P == path::admit ? Case::admit_at_step : 0;
  std::int64_t wrong = 0;
  for (auto _ : state) {
    bool admitted = false;
    if constexpr (T == timing::at) {
      admitted = limiter.try_acquire_at(now);
      if constexpr (step != 0) now += std::chrono::nanoseconds{step};
    } else {
      admitted = limiter.try_acquire();
    }
    wrong += admitted != want ? 1 : 0;
  }
  if (wrong != 0) {
    state.SkipWithError((std::to_string(wrong) + " calls did not return " + (want ? "true" : "false")).c_str());
  }
}

template <class Case, class Clock, path P, timing T>
void register_one(const std::string& algorithm, std::initializer_list<int> threads) {
  const std::string name = algorithm + (P == path::admit ? "/admit/" : "/reject/") +
                           (T == timing::at    ? "at"
                            : T == timing::now ? "now"
                                               : "coarse");
  for (int n : threads) {
    auto* b = benchmark::RegisterBenchmark(name.c_str(), &bench_try_acquire<Case, Clock, P, T>);
    b->Setup(&setup<Case, Clock, P>)->UseRealTime()->Threads(n);
    if (n > 1) b->MeasureProcessCPUTime();
  }
}

// try_acquire_at with the metrics off and on: the same limiter, metrics enabled before timing for "on".
template <class Case, path P, bool Metrics>
void setup_metrics(const benchmark::State& state) {
  setup<Case, std::chrono::steady_clock, P>(state);
  if constexpr (Metrics) shared<Case, std::chrono::steady_clock>::limiter->enable_metrics();
}
template <class Case>
void register_metrics(const std::string& algorithm) {
  using steady = std::chrono::steady_clock;
  auto one = [&](const std::string& name, auto* fn, auto* setup_fn) {
    for (int n : {1, 2}) {
      auto* b = benchmark::RegisterBenchmark(name.c_str(), fn);
      b->Setup(setup_fn)->UseRealTime()->Threads(n);
      if (n > 1) b->MeasureProcessCPUTime();
    }
  };
  one(algorithm + "/admit/at/metrics:off", &bench_try_acquire<Case, steady, path::admit, timing::at>,
      &setup_metrics<Case, path::admit, false>);
  one(algorithm + "/admit/at/metrics:on", &bench_try_acquire<Case, steady, path::admit, timing::at>,
      &setup_metrics<Case, path::admit, true>);
  one(algorithm + "/reject/at/metrics:off", &bench_try_acquire<Case, steady, path::reject, timing::at>,
      &setup_metrics<Case, path::reject, false>);
  one(algorithm + "/reject/at/metrics:on", &bench_try_acquire<Case, steady, path::reject, timing::at>,
      &setup_metrics<Case, path::reject, true>);
}

// Registers the at/now cases (1, 2, 8 threads) and the coarse-clock cases (1, 2 threads) of one algorithm.
template <class Case>
void register_algorithm(const std::string& algorithm) {
  using steady = std::chrono::steady_clock;
  using coarse = admit::coarse_steady_clock;
  if constexpr (Case::admit_at_threads) {
    register_one<Case, steady, path::admit, timing::at>(algorithm, {1, 2, 8});
  } else {
    register_one<Case, steady, path::admit, timing::at>(algorithm, {1});
  }
  register_one<Case, steady, path::reject, timing::at>(algorithm, {1, 2, 8});
  register_one<Case, steady, path::admit, timing::now>(algorithm, {1, 2, 8});
  register_one<Case, steady, path::reject, timing::now>(algorithm, {1, 2, 8});
  if constexpr (Case::coarse_admit) register_one<Case, coarse, path::admit, timing::coarse>(algorithm, {1, 2});
  register_one<Case, coarse, path::reject, timing::coarse>(algorithm, {1, 2});
}

// The bare clock reads: what "with the clock read" pays on top of the decision.
template <class Clock>
void bench_clock(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(Clock::now());
  }
}

// The floor of any limiter that commits a decision with one compare-and-swap: an uncontended (1 thread) or contended
// (2 threads) CAS loop on one cache-line-aligned atomic, with nothing else in the loop.
alignas(64) std::atomic<std::int64_t> cas_word{0};

void bench_cas(benchmark::State& state) {
  for (auto _ : state) {
    std::int64_t expected = cas_word.load(std::memory_order_relaxed);
    while (
        !cas_word.compare_exchange_weak(expected, expected + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("coarse_steady_clock_resolution_ns",
                              std::to_string(admit::coarse_steady_clock::resolution().count()));
  benchmark::RegisterBenchmark("clock/steady_clock", &bench_clock<std::chrono::steady_clock>)->UseRealTime();
  benchmark::RegisterBenchmark("clock/coarse_steady_clock", &bench_clock<admit::coarse_steady_clock>)->UseRealTime();
  benchmark::RegisterBenchmark("baseline/cas", &bench_cas)->UseRealTime()->Threads(1)->Threads(2);
  register_algorithm<token_bucket_case>("token_bucket");
  register_algorithm<gcra_case>("gcra");
  register_algorithm<pacer_case>("pacer");
  register_algorithm<fixed_window_case>("fixed_window");
  register_algorithm<sliding_window_case>("sliding_window");
  register_algorithm<sliding_log_case>("sliding_log");
  register_algorithm<warmup_case>("warmup");
  register_metrics<token_bucket_case>("token_bucket");
  register_metrics<gcra_case>("gcra");

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
