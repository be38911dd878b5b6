// Google Benchmark: admit::keyed<gcra> — heap bytes per key at 1M keys, and nanoseconds per decision on one hot key and
// on random keys among 1M.
//
//   cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DADMIT_BUILD_BENCHMARKS=ON
//   cmake --build build/release --target admit_keyed_bench && build/release/bench/admit_keyed_bench
//
// Names:
//   keyed/bytes_per_key/<key>/<cap>  — fills a keyed<gcra> with 1M distinct keys (each admitted once, so stored) and
//     reports the heap it took, measured with mallinfo2() before and after (so malloc's own overhead is counted):
//     bytes_per_key (all of it), key_bytes_per_key (sizeof(Key) plus the heap the keys' own bytes take, measured the
//     same way on copies of the keys) and other_bytes_per_key (the rest: the state word, the tag byte, free slots).
//     <key>: ip — std::string keys like "10.12.200.7" (in the string's inline buffer, no heap of their own);
//            long — std::string keys of 24 characters (heap-allocated); u64 — std::uint64_t keys.
//     <cap>: 1M — max_keys 1,048,576 (the tables stop growing at the cap / 0.75); 4M — max_keys 4M (tables double).
//     The time column is the fill time per key (an insertion each) and means little.
//   keyed/hot/at, keyed/hot/now — decide_at(key, now) on one key, with a given time or reading steady_clock;
//     1 and 2 threads (each its own hot key: different shards, no contention) and 2 threads on the same key.
//   keyed/random_1M/at — decide_at on keys drawn at random among 1M stored ones (cache misses dominate).
//   gcra/at — a standalone admit::gcra's decide_at, for comparison.
//   keyed_token_bucket/bytes_per_key/<key>/<cap>, keyed_token_bucket/hot/at, token_bucket/at — the same for
//     admit::keyed<token_bucket> (16 bytes of state a key instead of 8) and a standalone token_bucket.
// The admit path throughout: 1e9 requests a second and a burst of 1e12 (no call is ever refused).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <admit/gcra.hpp>
#include <admit/keyed.hpp>
#include <admit/rate.hpp>
#include <admit/token_bucket.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace {

const admit::rate huge_rate = admit::rate::per_second(1e9);
constexpr std::int64_t huge_burst = 1'000'000'000'000;
constexpr std::size_t million = 1'000'000;

std::size_t heap_in_use() { return mallinfo2().uordblks; }

std::string ip_key(std::size_t i) {
  return "10." + std::to_string(i >> 16 & 0xff) + "." + std::to_string(i >> 8 & 0xff) + "." + std::to_string(i & 0xff);
}
std::string long_key(std::size_t i) {
  std::string s = "api-key-" + std::to_string(i);
  s.resize(24, 'x');
  return s;
}

std::vector<std::string> ip_keys(std::size_t n) {
  // Distinct for n <= 2^24, at most 13 characters (inside std::string's inline buffer).
  std::vector<std::string> keys;
  keys.reserve(n);
  for (std::size_t i = 0; i < n; ++i) keys.push_back(ip_key(i));
  return keys;
}

template <class Key, class Limiter = admit::gcra>
void fill_and_measure(benchmark::State& state, const std::vector<Key>& keys, std::size_t cap,
                      std::size_t key_heap_bytes) {
  const auto now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const std::size_t before = heap_in_use();
    auto k = std::make_unique<admit::keyed<Limiter, Key>>(admit::rate::per_second(1), 1,
                                                          admit::keyed_options{.max_keys = cap});
    for (const Key& key : keys) {
      if (!k->try_acquire_at(key, now)) state.SkipWithError("a key was refused");
    }
    const std::size_t after = heap_in_use();
    const double stored = static_cast<double>(k->size());
    const double total = static_cast<double>(after - before) / stored;
    const double key_bytes = static_cast<double>(sizeof(Key)) + static_cast<double>(key_heap_bytes) / stored;
    state.counters["keys"] = stored;
    state.counters["bytes_per_key"] = total;
    state.counters["key_bytes_per_key"] = key_bytes;
    state.counters["other_bytes_per_key"] = total - key_bytes;
    state.PauseTiming();
    k.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(keys.size()));
}

// The heap the keys' own characters take: copies of them, measured as the table's fill is.
std::size_t key_heap(const std::vector<std::string>& keys) {
  std::vector<std::string> copies;
  copies.reserve(keys.size());
  const std::size_t before = heap_in_use();
  for (const auto& k : keys) copies.push_back(k);
  return heap_in_use() - before;
}

void bytes_per_key_ip(benchmark::State& state) {
  const auto keys = ip_keys(million);
  fill_and_measure(state, keys, static_cast<std::size_t>(state.range(0)), key_heap(keys));
}
void bytes_per_key_long(benchmark::State& state) {
  std::vector<std::string> keys;
  keys.reserve(million);
  for (std::size_t i = 0; i < million; ++i) keys.push_back(long_key(i));
  fill_and_measure(state, keys, static_cast<std::size_t>(state.range(0)), key_heap(keys));
}
void bytes_per_key_u64(benchmark::State& state) {
  std::vector<std::uint64_t> keys(million);
  for (std::size_t i = 0; i < million; ++i) keys[i] = i * 0x9E3779B97F4A7C15ULL;
  fill_and_measure(state, keys, static_cast<std::size_t>(state.range(0)), 0);
}
BENCHMARK(bytes_per_key_ip)
    ->Name("keyed/bytes_per_key/ip")
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bytes_per_key_long)
    ->Name("keyed/bytes_per_key/long")
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bytes_per_key_u64)
    ->Name("keyed/bytes_per_key/u64")
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void tb_bytes_per_key_ip(benchmark::State& state) {
  const auto keys = ip_keys(million);
  fill_and_measure<std::string, admit::token_bucket>(state, keys, static_cast<std::size_t>(state.range(0)),
                                                     key_heap(keys));
}
void tb_bytes_per_key_u64(benchmark::State& state) {
  std::vector<std::uint64_t> keys(million);
  for (std::size_t i = 0; i < million; ++i) keys[i] = i * 0x9E3779B97F4A7C15ULL;
  fill_and_measure<std::uint64_t, admit::token_bucket>(state, keys, static_cast<std::size_t>(state.range(0)), 0);
}
BENCHMARK(tb_bytes_per_key_ip)
    ->Name("keyed_token_bucket/bytes_per_key/ip")
    ->Arg(1 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(tb_bytes_per_key_u64)
    ->Name("keyed_token_bucket/bytes_per_key/u64")
    ->Arg(1 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// One keyed store shared by the decision benchmarks, holding 1M keys.
admit::keyed<admit::gcra>& shared_store() {
  static const auto store = [] {
    auto k = std::make_unique<admit::keyed<admit::gcra>>(huge_rate, huge_burst,
                                                         admit::keyed_options{.max_keys = 2 * million});
    const auto now = std::chrono::steady_clock::now();
    for (const auto& key : ip_keys(million)) (void)k->try_acquire_at(key, now);
    return k;
  }();
  return *store;
}

void hot_at(benchmark::State& state) {
  auto& k = shared_store();
  const std::string key = state.range(0) == 0 ? "hot-" + std::to_string(state.thread_index()) : "hot";
  const auto now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (!k.try_acquire_at(key, now)) state.SkipWithError("refused");
  }
}
BENCHMARK(hot_at)->Name("keyed/hot/at")->Arg(0)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(hot_at)->Name("keyed/hot/at/same_key")->Arg(1)->Threads(2)->UseRealTime();

void hot_now(benchmark::State& state) {
  auto& k = shared_store();
  const std::string key = "hot-" + std::to_string(state.thread_index());
  for (auto _ : state) {
    if (!k.try_acquire(key)) state.SkipWithError("refused");
  }
}
BENCHMARK(hot_now)->Name("keyed/hot/now")->Threads(1)->Threads(2)->UseRealTime();

void random_1m(benchmark::State& state) {
  auto& k = shared_store();
  static const auto keys = ip_keys(million);
  const auto now = std::chrono::steady_clock::now();
  std::uint64_t x = 0x2545F4914F6CDD1DULL + static_cast<std::uint64_t>(state.thread_index());
  for (auto _ : state) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (!k.try_acquire_at(keys[x % million], now)) state.SkipWithError("refused");
  }
}
BENCHMARK(random_1m)->Name("keyed/random_1M/at")->Threads(1)->Threads(2)->UseRealTime();

void gcra_at(benchmark::State& state) {
  admit::gcra g{huge_rate, huge_burst};
  const auto now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (!g.try_acquire_at(now)) state.SkipWithError("refused");
  }
}
BENCHMARK(gcra_at)->Name("gcra/at");

void tb_hot_at(benchmark::State& state) {
  admit::keyed<admit::token_bucket> k{huge_rate, huge_burst};
  const std::string key = "hot";
  const auto now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (!k.try_acquire_at(key, now)) state.SkipWithError("refused");
  }
}
BENCHMARK(tb_hot_at)->Name("keyed_token_bucket/hot/at");

void tb_at(benchmark::State& state) {
  admit::token_bucket b{huge_rate, huge_burst};
  const auto now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (!b.try_acquire_at(now)) state.SkipWithError("refused");
  }
}
BENCHMARK(tb_at)->Name("token_bucket/at");

}  // namespace

// main(): bench/threaded_main.cpp (every case in a threaded process).
