// Google Benchmark: admit::semaphore next to std::counting_semaphore (the references in other languages live in
// bench/reference/): the three measurements of issue 3, "Performance".
//
//   cmake --preset release && cmake --build --preset release --target admit_semaphore_bench
//   build/release/bench/admit_semaphore_bench [--handoff_rounds=N] [Google Benchmark flags]
//
// bench/compare.sh runs this next to Go's golang.org/x/sync/semaphore, tokio's Semaphore and Java's
// java.util.concurrent.Semaphore and writes docs/PERFORMANCE.md.
//
// Cases (every semaphore has 1 permit unless the name says otherwise):
//   semaphore/uncontended/<impl>[_64] — one thread: try_acquire, then release, per iteration (the `_64` variants use a
//       semaphore of 64 permits, so the count never drops to 0: libstdc++'s counting_semaphore makes a futex-wake
//       system call on every release from 0, whether anyone waits or not). Every try_acquire must succeed.
//   semaphore/uncontended/admit_metrics[_64] — admit's, with enable_metrics(): the cost of counting each decision.
//   semaphore/uncontended/floor — the same two atomic read-modify-writes with nothing around them (a compare-and-swap
//       that takes one, a fetch_add that gives it back): what any lock-free try_acquire + release costs at least.
//   semaphore/contended/<impl>/threads:2 — two threads loop acquire (blocking) + release on one semaphore of 1 permit,
//       nothing held in between; wall-clock ns per operation of both threads together (the inverse of throughput).
//   semaphore/handoff/<impl> — hand-off latency: a waiter thread blocks in acquire; once it is asleep (it announced
//       itself, admit's waiting() shows it queued, then 200 us pass), this thread reads steady_clock and releases; the
//       waiter reads steady_clock as soon as acquire returns. One iteration per round; the counters p50_ns, p90_ns,
//       p99_ns and max_ns are percentiles of the rounds (the reported time is their mean).
#include <benchmark/benchmark.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <admit/semaphore.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

// One adapter per implementation, so every case runs the same code around the semaphore.
//   try_cycle(): try_acquire then release; false if try_acquire failed.
//   cycle(): acquire (blocking) then release; false if acquire failed.
//   take(who) / try_take(who) / give(who): acquire (blocking) or try_acquire and hold, then release what is held — for
//       the hand-off rounds; `who` (0: the releasing thread, 1: the waiter) keeps each thread's permit apart.
//   queued(): how many wait, when the implementation can tell (else -1).
struct admit_impl {
  static constexpr const char* name = "admit";
  admit::semaphore sem;
  std::optional<admit::permit> held[2];
  explicit admit_impl(std::int64_t permits) : sem(permits) {}
  bool try_cycle() { return sem.try_acquire().has_value(); }  // the permit is released at the end of the statement
  bool cycle() { return static_cast<bool>(sem.acquire()); }
  bool take(int who) {
    auto r = sem.acquire();
    if (!r) return false;
    held[who].emplace(std::move(r.value()));
    return true;
  }
  bool try_take(int who) {
    held[who] = sem.try_acquire();
    return held[who].has_value();
  }
  void give(int who) { held[who].reset(); }
  long queued() const { return static_cast<long>(sem.waiting()); }
};

// admit's semaphore with its metrics on (enable_metrics): every decision is counted.
struct admit_metrics_impl : admit_impl {
  static constexpr const char* name = "admit_metrics";
  explicit admit_metrics_impl(std::int64_t permits) : admit_impl(permits) { sem.enable_metrics(); }
};

struct std_impl {
  static constexpr const char* name = "std";
  std::counting_semaphore<> sem;
  explicit std_impl(std::int64_t permits) : sem(static_cast<std::ptrdiff_t>(permits)) {}
  bool try_cycle() {
    if (!sem.try_acquire()) return false;
    sem.release();
    return true;
  }
  bool cycle() {
    sem.acquire();
    sem.release();
    return true;
  }
  bool take(int) {
    sem.acquire();
    return true;
  }
  bool try_take(int) { return sem.try_acquire(); }
  void give(int) { sem.release(); }
  long queued() const { return -1; }
};

// --- uncontended
// ------------------------------------------------------------------------------------------------------

template <class Impl, std::int64_t Permits>
void bench_uncontended(benchmark::State& state) {
  Impl impl(Permits);
  std::int64_t failed = 0;
  for (auto _ : state) {
    failed += impl.try_cycle() ? 0 : 1;
  }
  if (failed != 0) state.SkipWithError((std::to_string(failed) + " try_acquire calls failed").c_str());
}

alignas(64) std::atomic<std::int64_t> floor_word{1};

void bench_floor(benchmark::State& state) {
  std::int64_t failed = 0;
  for (auto _ : state) {
    std::int64_t w = floor_word.load(std::memory_order_relaxed);
    bool taken = false;
    while (w >= 1 && !(taken = floor_word.compare_exchange_weak(w, w - 1, std::memory_order_acquire,
                                                                std::memory_order_relaxed))) {
    }
    if (taken) {
      floor_word.fetch_add(1, std::memory_order_release);
    } else {
      ++failed;
    }
  }
  if (failed != 0) state.SkipWithError("the floor's compare-and-swap found no permit");
}

// --- contended
// --------------------------------------------------------------------------------------------------------

// The semaphore the threads of a contended case share: built by Setup on the main thread before they start.
template <class Impl>
struct shared {
  static inline std::unique_ptr<Impl> impl;
};

template <class Impl>
void setup_contended(const benchmark::State&) {
  shared<Impl>::impl = std::make_unique<Impl>(1);
}
template <class Impl>
void teardown_contended(const benchmark::State&) {
  shared<Impl>::impl.reset();
}

template <class Impl>
void bench_contended(benchmark::State& state) {
  Impl& impl = *shared<Impl>::impl;
  std::int64_t failed = 0;
  for (auto _ : state) {
    failed += impl.cycle() ? 0 : 1;
  }
  if (failed != 0) state.SkipWithError((std::to_string(failed) + " acquire calls failed").c_str());
}

// --- hand-off latency
// -------------------------------------------------------------------------------------------------

int handoff_rounds = 2000;

// The releasing thread waits for the waiter's report asleep on a futex at once, as the Go and Java harnesses block at
// once: a wait that spins or yields first (std::atomic::wait does) would keep a CPU busy while the waiter wakes up.
void sleep_while_equal(std::atomic<std::uint32_t>& word, std::uint32_t old) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}
void wake_all(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}
constexpr auto asleep_after = 200us;  // time given to a waiter that announced itself to reach its futex sleep

template <class Impl>
void bench_handoff(benchmark::State& state) {
  using clock = std::chrono::steady_clock;
  Impl impl(1);
  std::atomic<std::int64_t> go{0};     // round the waiter may start (it waits on it)
  std::atomic<std::int64_t> armed{0};  // round the waiter is about to block in
  std::atomic<std::uint32_t> done{0};  // round the waiter completed
  std::atomic<std::int64_t> release_ns{0};
  std::atomic<bool> failed{false};
  std::vector<std::int64_t> latency;
  latency.reserve(static_cast<std::size_t>(state.max_iterations));

  // The waiter: for each round, block in take(), note the time it runs, record, give the permit back.
  std::thread waiter([&] {
    for (std::int64_t round = 1;; ++round) {
      std::int64_t g = go.load(std::memory_order_acquire);
      for (; g >= 0 && g < round; g = go.load(std::memory_order_acquire)) go.wait(g, std::memory_order_acquire);
      if (g < 0) return;  // the case is over
      armed.store(round, std::memory_order_release);
      const bool ok = impl.take(1);
      const std::int64_t woke = clock::now().time_since_epoch().count();
      if (!ok) failed.store(true, std::memory_order_relaxed);
      latency.push_back(woke - release_ns.load(std::memory_order_relaxed));
      impl.give(1);
      done.store(static_cast<std::uint32_t>(round), std::memory_order_release);
      wake_all(done);
    }
  });

  std::int64_t round = 0;
  for (auto _ : state) {
    ++round;
    if (!impl.try_take(0)) failed.store(true, std::memory_order_relaxed);  // the waiter gave it back last round
    go.store(round, std::memory_order_release);
    go.notify_one();
    while (armed.load(std::memory_order_acquire) < round) std::this_thread::yield();
    if (impl.queued() >= 0) {
      while (impl.queued() < 1) std::this_thread::yield();
    }
    std::this_thread::sleep_for(asleep_after);
    const auto t0 = clock::now();
    release_ns.store(t0.time_since_epoch().count(), std::memory_order_relaxed);
    impl.give(0);
    for (std::uint32_t d = done.load(std::memory_order_acquire); d < round; d = done.load(std::memory_order_acquire)) {
      sleep_while_equal(done, d);
    }
    state.SetIterationTime(static_cast<double>(latency.back()) * 1e-9);
  }
  go.store(-1, std::memory_order_release);
  go.notify_one();
  waiter.join();

  if (failed.load()) {
    state.SkipWithError("a hand-off round did not get its permit");
    return;
  }
  std::sort(latency.begin(), latency.end());
  const auto pct = [&](double p) {
    if (latency.empty()) return 0.0;
    const auto i = static_cast<std::size_t>(p * static_cast<double>(latency.size() - 1) + 0.5);
    return static_cast<double>(latency[i]);
  };
  state.counters["p50_ns"] = pct(0.50);
  state.counters["p90_ns"] = pct(0.90);
  state.counters["p99_ns"] = pct(0.99);
  state.counters["max_ns"] = pct(1.0);
}

// Registers the uncontended and contended cases of one implementation.
template <class Impl>
void register_impl() {
  const std::string impl = Impl::name;
  benchmark::RegisterBenchmark(("semaphore/uncontended/" + impl).c_str(), &bench_uncontended<Impl, 1>)->UseRealTime();
  benchmark::RegisterBenchmark(("semaphore/uncontended/" + impl + "_64").c_str(), &bench_uncontended<Impl, 64>)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("semaphore/contended/" + impl).c_str(), &bench_contended<Impl>)
      ->Setup(&setup_contended<Impl>)
      ->Teardown(&teardown_contended<Impl>)
      ->UseRealTime()
      ->MeasureProcessCPUTime()
      ->Threads(2);
}

// The hand-off cases are registered before all others: Google Benchmark's CSV output takes its columns from the first
// case it reports, and only these have counters (p50_ns, ...).
template <class Impl>
void register_handoff() {
  benchmark::RegisterBenchmark((std::string("semaphore/handoff/") + Impl::name).c_str(), &bench_handoff<Impl>)
      ->UseManualTime()
      ->Iterations(handoff_rounds);
}

}  // namespace

int main(int argc, char** argv) {
  // Our own flag, taken out before Google Benchmark parses the rest.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    constexpr const char* flag = "--handoff_rounds=";
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      handoff_rounds = std::max(10, std::atoi(argv[i] + std::strlen(flag)));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;

  register_handoff<admit_impl>();
  register_handoff<std_impl>();
  benchmark::RegisterBenchmark("semaphore/uncontended/floor", &bench_floor)->UseRealTime();
  register_impl<admit_impl>();
  benchmark::RegisterBenchmark("semaphore/uncontended/admit_metrics", &bench_uncontended<admit_metrics_impl, 1>)
      ->UseRealTime();
  benchmark::RegisterBenchmark("semaphore/uncontended/admit_metrics_64", &bench_uncontended<admit_metrics_impl, 64>)
      ->UseRealTime();
  register_impl<std_impl>();

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
