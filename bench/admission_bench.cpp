// Google Benchmark: admit::admission — one decision for a rate and a concurrency limit — next to the same two limits
// stacked by hand (admit::token_bucket, then admit::semaphore), in the same run.
//
//   cmake --preset release && cmake --build --preset release --target admit_admission_bench
//   build/release/bench/admit_admission_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Cases:
//   admission/uncontended/<impl> — one thread: try_acquire, then release the permit, per iteration. The rate is high
//       enough (10^12/s, burst 10^6) and max_in_flight large enough (64) that every call is admitted. <impl>:
//       admission (one object, one class: the fast path), admission_3_classes (shares 0.5/0.3/0.2: under the
//       mutex), stacked (token_bucket::try_acquire + semaphore::try_acquire + release),
//       token_bucket (its try_acquire alone), semaphore (try_acquire + release alone).
//   admission/saturated/threads:64 — 64 threads, a third of them (rounded) in each of 3 classes with shares 0.5, 0.3
//       and 0.2 of max_in_flight = 10 and of an unlimited rate; each thread loops acquire, holds the permit across a
//       sleep of 20 us (as across I/O), releases. Counters: share_<c> — the fraction of all admissions that went
//       to class c (guarantees: 0.5, 0.3, 0.2); handoff_p50_ns, handoff_p99_ns — from the decision that admitted a
//       waiting request (made by the releasing thread) to that request's thread running again (the on_admitted
//       hook runs there, and reads the clock). The reported time is the wall time per admission.
//   admission/saturated_floor/threads:64 — the same load on a bare FIFO hand-off (fifo_floor below): the least a
//       permit handed to a sleeping thread costs here. Counters: handoff_p50_ns, handoff_p99_ns.
// Every case runs in a threaded process (bench/threaded_main.cpp says why).
#include <benchmark/benchmark.h>

#include <admit/admission.hpp>
#include <admit/detail/futex.hpp>
#include <admit/semaphore.hpp>
#include <admit/token_bucket.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;

constexpr std::int64_t in_flight_cap = 64;
const admit::rate fast_rate = admit::rate::per_second(1e12);
constexpr std::int64_t fast_burst = 1'000'000;

void uncontended_admission(benchmark::State& state) {
  admit::admission adm{{.rate = fast_rate, .burst = fast_burst, .max_in_flight = in_flight_cap}};
  std::int64_t failed = 0;
  for (auto _ : state) {
    failed += adm.try_acquire(0) ? 0 : 1;  // the permit is released at the end of the statement
  }
  if (failed != 0) state.SkipWithError((std::to_string(failed) + " try_acquire calls failed").c_str());
}

// Three classes: every decision takes the admission's mutex (the fast path is for one class).
void uncontended_admission_classes(benchmark::State& state) {
  admit::admission adm{{.rate = fast_rate,
                        .burst = fast_burst,
                        .max_in_flight = in_flight_cap,
                        .classes = {{"a", 0.5}, {"b", 0.3}, {"c", 0.2}}}};
  std::int64_t failed = 0;
  for (auto _ : state) {
    failed += adm.try_acquire(0) ? 0 : 1;
  }
  if (failed != 0) state.SkipWithError((std::to_string(failed) + " try_acquire calls failed").c_str());
}

void uncontended_stacked(benchmark::State& state) {
  admit::token_bucket bucket{fast_rate, fast_burst};
  admit::semaphore sem{in_flight_cap};
  std::int64_t failed = 0;
  for (auto _ : state) {
    if (!bucket.try_acquire()) {
      ++failed;
      continue;
    }
    failed += sem.try_acquire() ? 0 : 1;
  }
  if (failed != 0) state.SkipWithError((std::to_string(failed) + " try_acquire calls failed").c_str());
}

void uncontended_token_bucket(benchmark::State& state) {
  admit::token_bucket bucket{fast_rate, fast_burst};
  std::int64_t failed = 0;
  for (auto _ : state) {
    failed += bucket.try_acquire() ? 0 : 1;
  }
  if (failed != 0) state.SkipWithError((std::to_string(failed) + " try_acquire calls failed").c_str());
}

void uncontended_semaphore(benchmark::State& state) {
  admit::semaphore sem{in_flight_cap};
  std::int64_t failed = 0;
  for (auto _ : state) {
    failed += sem.try_acquire() ? 0 : 1;
  }
  if (failed != 0) state.SkipWithError((std::to_string(failed) + " try_acquire calls failed").c_str());
}

// --- saturation ------------------------------------------------------------------------------------------------

constexpr int saturated_threads = 64;
constexpr std::size_t class_count = 3;
constexpr std::int64_t saturated_cap = 10;
constexpr std::int64_t admissions_per_run = 100'000;

// Per thread: whether its current acquire had to queue (try_acquire refused first), and the hand-offs it measured.
thread_local bool queued_call = false;
thread_local std::vector<std::int64_t> thread_handoffs;

// The work done while a permit is held: a sleep, as a request that holds its permit across I/O (with only 2 cores,
// work on the CPU would make the scheduler, not the admission, decide who runs next).
constexpr auto hold_time = 20us;

// The saturated loop over a limiter made by `make()` (a pointer): each thread calls `try_acquire(limiter, class)` and,
// refused, `acquire(limiter, class)` (the call is then marked as queued), each returning an RAII permit (false: none).
// `shares`: report each class's share of the admissions.
template <class Make, class TryAcquire, class Acquire>
void run_saturated(benchmark::State& state, Make make, TryAcquire try_acquire, Acquire acquire, bool shares) {
  std::array<std::atomic<std::int64_t>, class_count> admitted{};
  std::atomic<std::int64_t> total{0};
  std::mutex latencies_mutex;
  std::vector<std::int64_t> handoffs;
  handoffs.reserve(static_cast<std::size_t>(admissions_per_run) * 2);
  std::atomic<bool> failed{false};

  for (auto _ : state) {
    for (auto& a : admitted) a.store(0);
    total.store(0);
    handoffs.clear();
    auto limiter = make();
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::jthread> threads;
    threads.reserve(saturated_threads);
    for (int t = 0; t < saturated_threads; ++t) {
      threads.emplace_back([&, t] {
        const auto c = static_cast<std::size_t>(t) % class_count;
        thread_handoffs.clear();
        while (total.load(std::memory_order_relaxed) < admissions_per_run) {
          queued_call = false;
          auto r = try_acquire(*limiter, c);
          if (!r) {
            queued_call = true;
            r = acquire(*limiter, c);
          }
          if (!r) {
            failed.store(true);
            return;
          }
          std::this_thread::sleep_for(hold_time);
          admitted[c].fetch_add(1, std::memory_order_relaxed);
          total.fetch_add(1, std::memory_order_relaxed);
        }
        std::lock_guard lock(latencies_mutex);
        handoffs.insert(handoffs.end(), thread_handoffs.begin(), thread_handoffs.end());
      });
    }
    threads.clear();  // joins
    const auto elapsed = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(std::chrono::duration<double>(elapsed).count() / static_cast<double>(total.load()));
  }
  if (failed.load()) {
    state.SkipWithError("an acquire failed");
    return;
  }
  const double sum = static_cast<double>(total.load());
  for (std::size_t c = 0; shares && c < class_count; ++c) {
    state.counters["share_" + std::to_string(c)] = static_cast<double>(admitted[c].load()) / sum;
  }
  std::sort(handoffs.begin(), handoffs.end());
  const auto pct = [&](double p) {
    if (handoffs.empty()) return 0.0;
    return static_cast<double>(handoffs[static_cast<std::size_t>(p * static_cast<double>(handoffs.size() - 1))]);
  };
  state.counters["handoff_p50_ns"] = pct(0.50);
  state.counters["handoff_p99_ns"] = pct(0.99);
  state.counters["handoffs"] = static_cast<double>(handoffs.size());
}

// Records a hand-off decided at `decided` (since the steady clock's epoch) in the thread it was handed to.
void record_handoff(std::chrono::nanoseconds decided) {
  if (!queued_call) return;  // only a request that queued is handed its permit by another thread
  thread_handoffs.push_back((std::chrono::steady_clock::now().time_since_epoch() - decided).count());
}

void saturated(benchmark::State& state) {
  run_saturated(
      state,
      [] {
        return std::make_unique<admit::admission>(
            admit::admission_options{.max_in_flight = saturated_cap,
                                     .classes = {{"a", 0.5}, {"b", 0.3}, {"c", 0.2}},
                                     .on_admitted = [](const admit::admission_event& e) { record_handoff(e.at); }});
      },
      [](admit::admission& adm, std::size_t c) { return adm.try_acquire(c); },
      [](admit::admission& adm, std::size_t c) { return adm.acquire({}, c); }, true);
}

// The floor of a blocking FIFO hand-off: the least a permit handed from a releasing thread to a sleeping one costs
// on this machine under this load — a count, one FIFO queue of sleeping threads under a mutex, each asleep on its own
// futex word, the word set and woken by the release under the mutex (as admission's grant does). No classes, no
// rate, no deadlines, no cancellation: not a limiter anyone should use, the yardstick for the hand-off alone.
class fifo_floor {
 public:
  class permit {
   public:
    permit() = default;
    explicit permit(fifo_floor* owner) noexcept : owner_(owner) {}
    permit(permit&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    permit& operator=(permit&& other) noexcept {
      std::swap(owner_, other.owner_);
      return *this;
    }
    ~permit() {
      if (owner_ != nullptr) owner_->release();
    }
    explicit operator bool() const noexcept { return owner_ != nullptr; }

   private:
    fifo_floor* owner_ = nullptr;
  };

  explicit fifo_floor(std::int64_t permits) : free_(permits) {}

  permit try_acquire() {
    std::lock_guard lock(mutex_);
    if (free_ == 0 || head_ != nullptr) return permit{};
    --free_;
    return permit{this};
  }

  permit acquire() {
    node self;
    {
      std::lock_guard lock(mutex_);
      if (free_ > 0 && head_ == nullptr) {
        --free_;
        return permit{this};
      }
      (tail_ != nullptr ? tail_->next : head_) = &self;
      tail_ = &self;
    }
    while (self.word.load(std::memory_order_acquire) == 0) admit::detail::futex_wait(self.word, 0);
    record_handoff(self.granted_at);
    return permit{this};
  }

 private:
  struct node {
    std::atomic<std::uint32_t> word{0};
    std::chrono::nanoseconds granted_at{0};
    node* next = nullptr;
  };

  void release() {
    std::lock_guard lock(mutex_);
    node* const w = head_;
    if (w == nullptr) {
      ++free_;
      return;
    }
    head_ = w->next;
    if (head_ == nullptr) tail_ = nullptr;
    w->granted_at = std::chrono::steady_clock::now().time_since_epoch();
    w->word.store(1, std::memory_order_release);
    admit::detail::futex_wake_one(&w->word);
  }

  std::mutex mutex_;
  std::int64_t free_;
  node* head_ = nullptr;
  node* tail_ = nullptr;
};

void saturated_floor(benchmark::State& state) {
  run_saturated(
      state, [] { return std::make_unique<fifo_floor>(saturated_cap); },
      [](fifo_floor& f, std::size_t) { return f.try_acquire(); },
      [](fifo_floor& f, std::size_t) { return f.acquire(); }, false);
}

}  // namespace

// The saturated case first: Google Benchmark's CSV output takes its columns from the first case it reports.
BENCHMARK(saturated)
    ->Name("admission/saturated/threads:64")
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kNanosecond);
BENCHMARK(saturated_floor)
    ->Name("admission/saturated_floor/threads:64")
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kNanosecond);
BENCHMARK(uncontended_admission)->Name("admission/uncontended/admission");
BENCHMARK(uncontended_admission_classes)->Name("admission/uncontended/admission_3_classes");
BENCHMARK(uncontended_stacked)->Name("admission/uncontended/stacked");
BENCHMARK(uncontended_token_bucket)->Name("admission/uncontended/token_bucket");
BENCHMARK(uncontended_semaphore)->Name("admission/uncontended/semaphore");

// main(): bench/threaded_main.cpp.
