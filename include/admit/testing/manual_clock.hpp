// admit/testing/manual_clock.hpp — a steady clock that moves only when a test tells it to.
//
// Tests drive limiters through time without sleeping: threads blocked in a limiter's acquire sleep on the manual
// clock and wake when the test advances it past their deadline. The test can wait until N threads are asleep (an
// observer, not a sleep), then advance, and learns how many sleepers it woke.
//
//   using clock = admit::testing::manual_clock;
//   clock::reset();
//   clock::advance(std::chrono::milliseconds(100));   // returns the number of sleepers woken
//
// The clock's state is static (a chrono clock has a static now()); `basic_manual_clock<Tag>` gives independent clocks
// for tests that need more than one. Thread safety: every member may be called concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <vector>

namespace admit::testing {

template <class Tag = void>
class basic_manual_clock {
 public:
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<basic_manual_clock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept { return time_point{duration{state().now_ns.load(std::memory_order_acquire)}}; }

  // Moves the clock to `tp` — backwards too, for tests of clocks that misbehave — and wakes the sleepers whose
  // deadline has passed. Returns how many it woke.
  static std::size_t set(time_point tp) {
    auto& s = state();
    std::size_t woken = 0;
    {
      std::lock_guard lock(s.mutex);
      s.now_ns.store(tp.time_since_epoch().count(), std::memory_order_release);
      woken = s.sleepers_due(tp);
    }
    s.cv.notify_all();
    return woken;
  }

  // Moves the clock forward by `d` (must not be negative). Returns how many sleepers it woke.
  static std::size_t advance(duration d) { return set(now() + d); }

  // Back to time zero. Call at the start of each test; no thread may be asleep on the clock.
  static void reset() { set(time_point{}); }

  // Blocks until now() >= deadline (true) or `stop` is requested (false).
  static bool sleep_until(time_point deadline, std::stop_token stop) {
    auto& s = state();
    std::unique_lock lock(s.mutex);
    if (now() >= deadline) return true;
    s.sleeping.push_back(deadline);
    s.cv.notify_all();  // wakes wait_for_sleepers
    const bool reached = s.cv.wait(lock, stop, [&] { return now() >= deadline; });
    s.remove(deadline);
    s.cv.notify_all();
    return reached;
  }

  // How many threads sleep on the clock now.
  static std::size_t sleepers() {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    return s.sleeping.size();
  }

  // Blocks until at least `n` threads sleep on the clock: the way a test waits for "N waiters queued".
  static void wait_for_sleepers(std::size_t n) {
    auto& s = state();
    std::unique_lock lock(s.mutex);
    s.cv.wait(lock, [&] { return s.sleeping.size() >= n; });
  }

 private:
  struct shared_state {
    std::atomic<std::int64_t> now_ns{0};
    std::mutex mutex;
    std::condition_variable_any cv;
    std::vector<time_point> sleeping;  // deadlines of the threads asleep, one entry each

    std::size_t sleepers_due(time_point tp) const {
      std::size_t n = 0;
      for (const auto& d : sleeping) n += d <= tp ? 1 : 0;
      return n;
    }
    void remove(time_point deadline) {
      for (auto it = sleeping.begin(); it != sleeping.end(); ++it) {
        if (*it == deadline) {
          sleeping.erase(it);
          return;
        }
      }
    }
  };
  static shared_state& state() {
    static shared_state s;
    return s;
  }
};

using manual_clock = basic_manual_clock<>;

}  // namespace admit::testing
