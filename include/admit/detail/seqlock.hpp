// admit/detail/seqlock.hpp — a sequence lock: a few atomic fields published together, read optimistically.
//
//   // reader                                             // writer (under the owner's mutex)
//   for (unsigned spins = 0;; ++spins) {                  const auto seq = lock.write_begin();
//     const auto seq = lock.read_begin();                 seqlock::store(a_, x);
//     if (seqlock::writing(seq)) {                        seqlock::store(b_, y);
//       seqlock::pause(spins);                            lock.write_end(seq);
//       continue;
//     }
//     const T x = seqlock::load(a_), y = seqlock::load(b_);
//     if (lock.read_validate(seq)) break;
//   }
//
// The sequence number is even while the fields are stable and odd while a writer is storing them. A reader takes the
// number before (read_begin), reads the fields, and keeps what it read only if the number was even and is unchanged
// after (read_validate); otherwise it retries, spinning, then yielding (pause). Readers never write, so they never
// contend with each other. Two kinds of writer:
// - write_begin / write_end: writers already serialized by a mutex of their own (basic_token_bucket's setters).
// - try_write_begin(seq) / write_end: a lock-free optimistic commit — "store my values if nothing was committed since
//   I read at `seq`" — by compare-and-swap of the number (basic_warmup's decisions). The winner stores and ends; a
//   loser reads again. A thread preempted between the two makes readers spin (then yield) until it runs again.
//
// Memory order. The fields are std::atomic and must be stored with seqlock::store (release) after write_begin /
// try_write_begin and read with seqlock::load (acquire) between read_begin and read_validate: a release store keeps
// the odd number before it, and an acquire load keeps the re-read of the number after it, so a reader that sees any
// new field value sees the number changed. Fences would do the same with relaxed fields, but ThreadSanitizer does not
// model fences (it would report the fields as racing), so there are none. On x86-64 all of it compiles to plain moves
// (a locked instruction only for try_write_begin's compare-and-swap).
//
// Hot paths are always inlined: g++ 12 otherwise calls them out of line from the limiters' decisions and copies the
// snapshot structs through the stack, tripling the instructions of a decision.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>

namespace admit::detail {

class seqlock {
 public:
  // --- Readers -------------------------------------------------------------------------------------------------------

  // The sequence number to validate against (acquire). Odd while a writer is storing: see writing().
  [[gnu::always_inline]] std::uint64_t read_begin() const noexcept { return seq_.load(std::memory_order_acquire); }
  // True when `seq` (from read_begin) was taken while a writer was storing: pause, then read_begin again.
  [[gnu::always_inline]] static bool writing(std::uint64_t seq) noexcept { return (seq & 1U) != 0; }
  // True when no write began since read_begin returned `seq` (an even number: check writing() first): the fields
  // read in between are one consistent set.
  [[gnu::always_inline]] bool read_validate(std::uint64_t seq) const noexcept {
    return seq_.load(std::memory_order_relaxed) == seq;
  }
  // A reader's wait for a writer, `spins` = how many times it has waited already: spins at first, then yields the
  // CPU at each further wait (a writer preempted mid-store needs the CPU more than this reader does).
  [[gnu::always_inline]] static void pause(unsigned spins) noexcept {
    if (spins > 64) std::this_thread::yield();
  }

  // --- Writers -------------------------------------------------------------------------------------------------------

  // For writers serialized by their own mutex (never two at once): makes the number odd and returns what it was.
  std::uint64_t write_begin() noexcept {
    const std::uint64_t seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);  // the release stores of the fields keep this before them
    return seq;
  }
  // For lock-free writers: makes the number odd if it is still `seq`, an even number (one read_begin returned, or
  // the one a write of this thread's ended at); false, changing nothing, when another write began since.
  [[gnu::always_inline]] bool try_write_begin(std::uint64_t seq) noexcept {
    return seq_.compare_exchange_strong(seq, seq + 1, std::memory_order_acq_rel, std::memory_order_relaxed);
  }
  // Ends the write that began at `seq` (write_begin's result, or try_write_begin's argument): the number is even
  // again, 2 more than `seq`, and the fields stored since are published.
  [[gnu::always_inline]] void write_end(std::uint64_t seq) noexcept { seq_.store(seq + 2, std::memory_order_release); }

  // --- The fields ----------------------------------------------------------------------------------------------------

  // A field's store inside a write (release: see the top of the file).
  template <class T>
  [[gnu::always_inline]] static void store(std::atomic<T>& field, std::type_identity_t<T> value) noexcept {
    field.store(value, std::memory_order_release);
  }
  // A field's load inside a read (acquire: see the top of the file).
  template <class T>
  [[gnu::always_inline]] static T load(const std::atomic<T>& field) noexcept {
    return field.load(std::memory_order_acquire);
  }

 private:
  std::atomic<std::uint64_t> seq_{0};
};

}  // namespace admit::detail
