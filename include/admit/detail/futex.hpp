// admit/detail/futex.hpp — sleep on a 32-bit atomic until another thread changes it and wakes the sleeper.
//
// Linux futexes, the primitive under std::atomic::wait, plus what atomic::wait lacks: a deadline. Waking takes only
// the address: it is safe to wake a word whose owner may already have returned and reused the memory (the kernel
// reads nothing through the address for a wake, and a stray wake is a spurious wake-up every futex waiter tolerates).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace admit::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              std::atomic<std::uint32_t>::is_always_lock_free);

// Sleeps while `word == expected`, until woken, until `deadline` on std::chrono::steady_clock (CLOCK_MONOTONIC; a
// deadline of time_point::max() means none), or spuriously. The caller re-checks its condition.
inline void futex_wait(
    std::atomic<std::uint32_t>& word, std::uint32_t expected,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) noexcept {
  timespec ts{};
  const timespec* timeout = nullptr;
  if (deadline != std::chrono::steady_clock::time_point::max()) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    if (ts.tv_sec < 0) ts = {};
    timeout = &ts;
  }
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline (plain FUTEX_WAIT takes a relative one).
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_BITSET_PRIVATE, expected, timeout, nullptr,
            FUTEX_BITSET_MATCH_ANY);
}

// Wakes one thread sleeping on `word`. Reads nothing through the pointer.
inline void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace admit::detail
