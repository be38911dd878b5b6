// tests/keyed_testing.hpp — the traces the keyed limiters' tests replay (keyed_test.cpp, keyed_token_bucket_test.cpp):
// a start time far from the clock's epoch, key names, random or rotating sequences of (key, time, n), and the
// evict_busy bound checked for either algorithm.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "admit/keyed.hpp"

namespace admit::testing::keyed_traces {

using namespace std::chrono_literals;
using tp = std::chrono::steady_clock::time_point;

inline const tp t0 = tp{} + 1000h;

inline std::string key_name(int i) { return "client-" + std::to_string(i); }

// One step of a trace: which key, when, how many.
struct event {
  int key;
  tp at;
  std::int64_t n;
};

// A random trace over `keys` keys with mostly increasing times, n in 0..burst+1, and `stale` of the events at a time
// up to 300 ms before the latest.
inline std::vector<event> random_trace(std::uint32_t seed, int keys, int length, double stale) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<int> key(0, keys - 1);
  std::uniform_int_distribution<std::int64_t> step_us(0, 40'000);
  std::uniform_int_distribution<std::int64_t> n(0, 5);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<event> trace;
  tp now = t0;
  for (int i = 0; i < length; ++i) {
    now += std::chrono::microseconds(step_us(rng));
    tp at = now;
    if (coin(rng) < stale) at -= std::chrono::microseconds(step_us(rng) * 7);
    trace.push_back({key(rng), at, n(rng)});
  }
  return trace;
}

// A trace whose active keys rotate: at any time only the last few keys used are busy, while hundreds pass through.
inline std::vector<event> rotating_trace(std::uint32_t seed, int length) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<int> pick(0, 3);
  std::uniform_int_distribution<std::int64_t> step_ms(0, 30);
  std::uniform_int_distribution<std::int64_t> n(0, 3);
  std::vector<event> trace;
  tp now = t0;
  for (int i = 0; i < length; ++i) {
    now += std::chrono::milliseconds(step_ms(rng));
    // Four active keys, replaced every 500 ms: with τ = 300 ms at most eight are busy at any time.
    const int generation = static_cast<int>((now - t0) / 500ms);
    trace.push_back({generation * 4 + pick(rng), now, n(rng)});
  }
  return trace;
}

// keyed<Limiter> at 10/s, burst 3, a cap of 16 keys with evict_busy, 50,000 requests over 200 random keys every
// 200 µs: no refusal for the cap, never more than 16 keys stored, and no key admitted more than rate·w + burst even
// when it comes back after being dropped (busy keys are evicted: some are).
template <class Limiter>
void evict_busy_never_over_admits() {
  const std::int64_t burst = 3;
  admit::keyed<Limiter> k{
      admit::rate::per_second(10), burst,
      admit::keyed_options{.max_keys = 16, .when_full = admit::keyed_when_full::evict_busy, .shards = 1}};
  constexpr int keys = 200;
  std::vector<std::int64_t> admitted(keys, 0);
  std::mt19937 rng{5};
  std::uniform_int_distribution<int> pick(0, keys - 1);
  tp now = t0;
  for (int i = 0; i < 50'000; ++i) {
    now += 200us;
    const int key = pick(rng);
    const admit::decision d = k.decide_at(key_name(key), now);
    ASSERT_FALSE(admit::is_key_limit_refusal(d));
    admitted[static_cast<std::size_t>(key)] += d.admitted ? 1 : 0;
    ASSERT_LE(k.size(), 16U);
  }
  const std::int64_t bound = (now - t0) / 100ms + burst;
  for (int key = 0; key < keys; ++key) EXPECT_LE(admitted[static_cast<std::size_t>(key)], bound) << key;
  EXPECT_GT(k.stats().evicted_busy, 0U);
  EXPECT_GT(*std::max_element(admitted.begin(), admitted.end()), 10);
}

// keyed<Limiter> at 10/s, burst 5 (T = 100 ms, τ = 500 ms), a cap of 64 keys with reject_new, flooded with 10,000
// unique keys of 5 each in 10 ms: the size never exceeds the cap; stored busy keys keep their state; the new keys are
// refused (key-cap refusals, remaining 0, counted) with a retry_after within τ, and admitted once stored keys are idle.
template <class Limiter>
void reject_new_holds_the_cap() {
  admit::keyed<Limiter> k{admit::rate::per_second(10), 5, admit::keyed_options{.max_keys = 64, .shards = 4}};
  ASSERT_EQ(k.shard_count(), 4U);
  std::vector<int> stored;
  int refused = 0;
  for (int i = 0; i < 10'000; ++i) {
    const tp at = t0 + std::chrono::microseconds(i);  // the flood takes 10 ms
    const admit::decision d = k.decide_at(key_name(i), at, 5);
    if (d.admitted) {
      stored.push_back(i);
    } else {
      ASSERT_TRUE(admit::is_key_limit_refusal(d));
      ASSERT_EQ(d.remaining, 0);
      ASSERT_GT(d.retry_after, std::chrono::nanoseconds{0});
      // The earliest stored key (of this shard) is full at its time + 500 ms.
      ASSERT_LE(d.retry_after, 500ms);
      ++refused;
    }
    ASSERT_LE(k.size(), 64U);
  }
  EXPECT_EQ(stored.size(), 64U);
  EXPECT_EQ(refused, 10'000 - 64);
  EXPECT_EQ(k.stats().refused_keys, static_cast<std::uint64_t>(refused));
  // The stored keys kept their state: empty at their flood time, one request back 100 ms later.
  for (const int i : stored) {
    const tp at = t0 + std::chrono::microseconds(i);
    EXPECT_FALSE(k.try_acquire_at(key_name(i), at + 99ms));
    EXPECT_TRUE(k.try_acquire_at(key_name(i), at + 100ms));
  }
  // Once they are idle, new keys make room by evicting them (one new key every 10 ms, each busy for 100 ms).
  for (int i = 0; i < 1'000; ++i) {
    ASSERT_TRUE(k.try_acquire_at(key_name(20'000 + i), t0 + 2s + i * 10ms)) << i;
    ASSERT_LE(k.size(), 64U);
  }
  EXPECT_GE(k.stats().evicted_idle, 64U);
}

}  // namespace admit::testing::keyed_traces
