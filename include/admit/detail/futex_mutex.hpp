// admit/detail/futex_mutex.hpp — a mutex in one 32-bit word, inline: taking it free is one compare-and-swap,
// giving it back with nobody waiting one exchange. Meets Lockable (std::lock_guard, std::unique_lock).
//
// Why not std::mutex: its lock and unlock are calls into pthread_mutex_lock / pthread_mutex_unlock, which dispatch on
// the mutex's type and keep its owner and user count. On an admission's decision, which takes the lock once and holds
// it for a few nanoseconds, that bookkeeping measured about 3 ns of 57 (docs/PERFORMANCE.md, "admission: one decision
// for a rate and a concurrency limit"). The protocol is the classic three-state futex lock (0 free, 1 held, 2 held and
// perhaps waited for): a thread that finds it held marks it 2 and sleeps on the word; an unlock that finds 2 wakes one
// sleeper, which marks it 2 again when it takes it (it cannot know whether others still sleep). Not fair, not
// recursive; no spinning before sleeping (as glibc's default mutex).
#pragma once

#include <atomic>
#include <cstdint>

#include "admit/detail/futex.hpp"

namespace admit::detail {

class futex_mutex {
 public:
  futex_mutex() = default;
  futex_mutex(const futex_mutex&) = delete;
  futex_mutex& operator=(const futex_mutex&) = delete;

  void lock() noexcept {
    std::uint32_t seen = free;
    if (!state_.compare_exchange_strong(seen, held, std::memory_order_acquire, std::memory_order_relaxed)) {
      lock_contended(seen);
    }
  }
  [[nodiscard]] bool try_lock() noexcept {
    std::uint32_t seen = free;
    return state_.compare_exchange_strong(seen, held, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (state_.exchange(free, std::memory_order_release) == contended) futex_wake_one(&state_);
  }

 private:
  static constexpr std::uint32_t free = 0;
  static constexpr std::uint32_t held = 1;
  static constexpr std::uint32_t contended = 2;

  // Out of line: the uncontended path stays small where it is inlined.
  [[gnu::noinline]] void lock_contended(std::uint32_t seen) noexcept {
    if (seen != contended) seen = state_.exchange(contended, std::memory_order_acquire);
    while (seen != free) {
      futex_wait(state_, contended);
      seen = state_.exchange(contended, std::memory_order_acquire);
    }
  }

  std::atomic<std::uint32_t> state_{free};
};

}  // namespace admit::detail
