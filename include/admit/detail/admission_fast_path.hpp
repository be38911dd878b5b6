// admit/detail/admission_fast_path.hpp — admit::admission's decision without its mutex, for the common case: one
// class, nobody waiting. The state such a decision reads and writes (the global bucket, the time of the latest
// admission, the permits held) lives in one 16-byte word changed by one 16-byte compare-and-swap, so an uncontended
// try_acquire costs one atomic instruction instead of a lock and an unlock.
//
// Ownership. The word is either open (the fast path decides on it) or closed (the admission's mutex holder owns the
// state, in its plain fields). Whoever takes the mutex closes the word (close(): one compare-and-swap, which also hands
// over what the fast path admitted); whoever releases it may open it again (open()), and does only when the fast path
// would decide exactly as the mutex holder does: one class, no on_admitted hook, a nonzero rate, nobody waiting,
// releases collected at decisions (disarmed), and a state the word can hold (held < 2^23, and the latest admission
// less than 2^40 ns after the bucket's state). A fast decision that is not a plain admission (tokens or permits
// missing, n too large, the word closed) is left to the mutex: refusals are decided there, under the same rules.
//
// The word: the latest admission's effective time (ns; decisions at earlier times are taken at it, as under the
// mutex), and the packed rest: closed (bit 63), held (bits 40..62), lag = latest - tat (bits 0..39). lag is in
// [0, tol) after every admission (it admits only when tat <= t, and tat > t - tol afterwards).
//
// Thread safety: try_admit from any thread; close and open under the admission's mutex. The word is read as two
// 8-byte loads that may tear; the compare-and-swap then fails and returns the word as it was, so nothing acts on a torn
// read. x86-64 only (cmpxchg16b, with GCC or Clang); elsewhere the word stays closed and every decision takes the
// mutex.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>

#include "admit/detail/saturating.hpp"
#include "admit/detail/token_bucket_math.hpp"

namespace admit::detail {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
inline constexpr bool admission_fast_path_supported = true;
#else
inline constexpr bool admission_fast_path_supported = false;
#endif

class admission_fast_path {
 public:
  static constexpr std::int64_t max_held = (std::int64_t{1} << 23) - 1;
  static constexpr std::int64_t max_lag = (std::int64_t{1} << 40) - 1;

  // The state as the mutex holder keeps it.
  struct state {
    std::int64_t latest = ns_min;  // effective time of the latest admission
    std::int64_t tat = ns_min;     // the global bucket (unused for an infinite rate)
    std::int64_t held = 0;         // permits held, including those released and not yet collected
  };

  // Admits n at time t (ns) if the word is open, n tokens are there by `bucket` and held + n <= limit: one
  // compare-and-swap. False: decide under the mutex.
  [[nodiscard]] bool try_admit(const token_bucket_config& bucket, std::int64_t limit, std::int64_t t,
                               std::int64_t n) noexcept {
    if constexpr (!admission_fast_path_supported) {
      return false;
    } else {
      limit = std::min(limit, max_held);
      if (n > limit) return false;
      word seen = load();
      for (;;) {
        if ((seen.packed & closed_bit) != 0) return false;
        const std::int64_t held = held_of(seen.packed);
        if (held > limit - n) return false;
        const std::int64_t at = std::max(t, seen.latest);
        std::uint64_t lag = 0;
        if (!bucket.inf()) {
          const token_bucket_step_result step =
              token_bucket_step(bucket, oversize_policy::reject, seen.latest - lag_of(seen.packed), at, n);
          if (step.never || step.wait != 0) return false;
          lag = static_cast<std::uint64_t>(at - step.new_tat);  // in [0, tol): see the top of the file
          if (lag > max_lag) return false;
        }
        if (compare_exchange(seen, {at, pack(false, held + n, lag)})) return true;
      }
    }
  }

  // Under the mutex, which it takes over from the fast path: the state, if the word was open (the mutex holder's own
  // copy is current otherwise). Closed, the word stays so until open().
  std::optional<state> close() noexcept {
    if (!open_) return std::nullopt;
    open_ = false;
    word seen = load();
    while (!compare_exchange(seen, {seen.latest, seen.packed | closed_bit})) {
    }
    return state{seen.latest, seen.latest - lag_of(seen.packed), held_of(seen.packed)};
  }

  // Under the mutex: the permits held as the word counts them, if it is open. Read the releases first (their count
  // then never includes a release whose admission this misses).
  [[nodiscard]] std::optional<std::int64_t> held() const noexcept {
    if (!open_) return std::nullopt;
    return held_of(cell_.packed.load(std::memory_order_acquire));
  }

  // Under the mutex, before it is released: opens the word with `s` if the word can hold it (see the top of the
  // file; the caller checks the rest). `inf`: the rate is infinite (tat is not kept).
  void open(const state& s, bool inf) noexcept {
    if constexpr (admission_fast_path_supported) {
      const std::int64_t lag = inf ? 0 : sat_sub(s.latest, s.tat);
      if (open_ || s.held < 0 || s.held > max_held || lag < 0 || lag > max_lag) return;
      word seen = load();
      while (!compare_exchange(seen, {s.latest, pack(false, s.held, static_cast<std::uint64_t>(lag))})) {
      }
      open_ = true;
    }
  }

 private:
  static constexpr std::uint64_t closed_bit = std::uint64_t{1} << 63;
  static constexpr int held_shift = 40;

  struct word {
    std::int64_t latest;
    std::uint64_t packed;
  };
  static std::uint64_t pack(bool closed, std::int64_t held, std::uint64_t lag) noexcept {
    return (closed ? closed_bit : 0) | (static_cast<std::uint64_t>(held) << held_shift) | lag;
  }
  static std::int64_t held_of(std::uint64_t packed) noexcept {
    return static_cast<std::int64_t>((packed & ~closed_bit) >> held_shift);
  }
  static std::int64_t lag_of(std::uint64_t packed) noexcept {
    return static_cast<std::int64_t>(packed & static_cast<std::uint64_t>(max_lag));
  }

  // May tear (the halves of different words): only a compare-and-swap acts on it, and fails then.
  word load() const noexcept {
    return {cell_.latest.load(std::memory_order_relaxed), cell_.packed.load(std::memory_order_relaxed)};
  }

  // One atomic compare-and-swap of both halves (sequentially consistent, as every locked x86 instruction). On failure
  // `expected` becomes the word as it was.
  bool compare_exchange(word& expected, word desired) noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    bool swapped = false;
    std::uint64_t lo = static_cast<std::uint64_t>(expected.latest);
    std::uint64_t hi = expected.packed;
    asm volatile("lock cmpxchg16b %1"
                 : "=@ccz"(swapped), "+m"(cell_), "+a"(lo), "+d"(hi)
                 : "b"(static_cast<std::uint64_t>(desired.latest)), "c"(desired.packed)
                 : "memory");
    expected = {static_cast<std::int64_t>(lo), hi};
    return swapped;
#else
    (void)expected;
    (void)desired;
    return false;
#endif
  }

  // The word, 16-byte aligned as cmpxchg16b requires, latest at the lower address. The halves are std::atomic so that
  // the plain loads are atomic 8-byte loads; only the compare-and-swap writes them.
  struct alignas(16) cell {
    std::atomic<std::int64_t> latest{ns_min};
    std::atomic<std::uint64_t> packed{closed_bit};
  };
  static_assert(sizeof(cell) == 16);
  cell cell_;
  bool open_ = false;  // guarded by the admission's mutex
};

}  // namespace admit::detail
