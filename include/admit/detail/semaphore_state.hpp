// admit/detail/semaphore_state.hpp — the engine under admit::semaphore: a permit count, a FIFO queue of waiters and
// the hand-off between them. Not templated on a clock: permits (admit::permit) and asynchronous waiters (the Asio
// layer) work with every basic_semaphore<Clock> through it.
//
// Representation. One int64 word holds the permits that anyone may take, shifted left by two, and two flags: `closed`,
// and `slow` — set while the queue is not empty or forgotten permits are still owed (debt). With `slow` clear,
// try_acquire is one compare-and-swap and release one fetch_add: no lock, no allocation. With `slow` set, try_acquire
// fails at once (someone is queued ahead: no queue jumping), and release adds its permits to the word and then, under
// the mutex, drains the word: debt first, then the head waiter, then the next, in FIFO order. Permits given to a
// waiter (`assigned`) are its own from that moment — a head waiter that needs 5 while 3 are free holds those 3 and
// waits for 2 more, and nobody behind it is served first — so between a release and the waiter's wake-up no newcomer
// can take them: in-flight permits never exceed the capacity.
//
// Invariant (under the mutex, once the word is drained): held + assigned + available == capacity + debt.
//
// Waiters. A `semaphore_waiter` is an intrusive node owned by whoever waits (a blocking thread's stack frame, an
// asynchronous operation): the state allocates nothing. `begin_wait` grants at once, rejects at once, or queues the
// node. A queued node is resolved under the mutex (granted, closed, or exceeds_capacity after the capacity shrank),
// unlinked, and its `notify` is called once the mutex is released — never while admit holds internal state, so
// `notify` may post a handler or wake a thread but the waiter's own code never runs inside another thread's release.
// A waiter that gives up (timeout, cancel) calls `cancel_wait`: true means it left the queue before being resolved
// and its assigned permits went back (to the next waiters); false means it was resolved first — the grant stands and
// `notify` has been or will be called. Exactly one of the two happens, under the mutex.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include "admit/errc.hpp"

namespace admit::detail {

struct semaphore_waiter {
  // Set by the owner before begin_wait.
  std::int64_t needed = 0;
  // Called exactly once, without the state's mutex held, after the node was resolved and unlinked (unless
  // cancel_wait returned true). Must not throw. After it starts, the state never touches the node again.
  void (*notify)(semaphore_waiter*) noexcept = nullptr;

  // Written under the state's mutex; readable by the owner once `notify` ran or cancel_wait returned.
  errc outcome{};              // errc{} when granted
  std::int64_t assigned = 0;   // permits handed to this waiter so far (all of `needed` once granted)
  std::uint64_t sequence = 0;  // position in arrival order (1, 2, ...), assigned when queued
  std::uint64_t served = 0;  // position in grant order, when granted from the queue; FIFO means it rises with sequence
  semaphore_waiter* prev = nullptr;
  semaphore_waiter* next = nullptr;
  bool queued = false;
};

class semaphore_state {
 public:
  // Largest capacity: the word keeps permits in 61 bits, and sums of a release into a full word must not overflow.
  static constexpr std::int64_t max_permits = std::int64_t{1} << 59;

  semaphore_state(std::int64_t permits, std::size_t max_waiters) : max_waiters_(max_waiters) {
    check_count("permits", permits, 0);
    word_.store(permits << shift, std::memory_order_relaxed);
    capacity_.store(permits, std::memory_order_relaxed);
  }
  semaphore_state(const semaphore_state&) = delete;
  semaphore_state& operator=(const semaphore_state&) = delete;
  ~semaphore_state() { assert(head_ == nullptr && "a semaphore was destroyed while threads waited on it"); }

  // Takes n permits if they are free and nobody is queued. Never waits; a lost compare-and-swap retries with the
  // fresh value, it never becomes a refusal. Lock-free. Acquire ordering on success.
  bool try_acquire(std::int64_t n) noexcept {
    std::int64_t w = word_.load(std::memory_order_relaxed);
    for (;;) {
      if ((w & (closed_bit | slow_bit)) != 0 || (w >> shift) < n) return false;
      if (word_.compare_exchange_weak(w, w - (n << shift), std::memory_order_acquire, std::memory_order_relaxed)) {
        return true;
      }
    }
  }

  // Returns n permits. Lock-free when nobody waits and nothing is owed; otherwise hands them to the queue under the
  // mutex and wakes the waiters it completed. Release ordering.
  void release(std::int64_t n) noexcept {
    const std::int64_t before = word_.fetch_add(n << shift, std::memory_order_release);
    if ((before & slow_bit) != 0) [[unlikely]]
      release_slow();
  }

  struct begin_result {
    bool queued = false;  // the node is queued: wait for notify (or give up with cancel_wait)
    errc error{};         // when not queued: errc{} — granted now (n permits taken) — or why it was rejected
  };

  // Grants `w.needed` permits at once if they are free and nobody is queued; otherwise rejects at once (closed,
  // exceeds_capacity, queue_full with max_waiters already waiting) or queues the node, handing it the free permits
  // (FIFO: they are its now). Never blocks beyond the mutex.
  begin_result begin_wait(semaphore_waiter& w) noexcept {
    std::unique_lock lock(mutex_);
    semaphore_waiter* ready = drain();
    begin_result result;
    std::int64_t word = word_.load(std::memory_order_relaxed);
    if ((word & closed_bit) != 0) {
      result.error = errc::closed;
    } else if (w.needed > capacity_.load(std::memory_order_relaxed)) {
      result.error = errc::exceeds_capacity;
    } else if (head_ == nullptr && debt_ == 0 && take_free(word, w.needed)) {
      w.outcome = errc{};
      w.assigned = w.needed;
    } else if (waiting_.load(std::memory_order_relaxed) >= max_waiters_) {
      result.error = errc::queue_full;
    } else {
      enqueue(w);
      ready = append(ready, drain());  // free permits (if any) go to the head — perhaps this node — now
      result.queued = w.queued;
      if (!w.queued) ready = remove_from(ready, &w);  // served at once by that drain: report it granted directly
    }
    lock.unlock();
    notify_all(ready);
    return result;
  }

  // Takes a queued node out of the queue (timeout, cancel). True: it was still waiting; it is unlinked, its assigned
  // permits went back, `notify` will not be called. False: it had been resolved; `notify` has been or will be called.
  bool cancel_wait(semaphore_waiter& w) noexcept {
    std::unique_lock lock(mutex_);
    if (!w.queued) return false;
    unlink(w);
    const std::int64_t returned = w.assigned;
    w.assigned = 0;
    assigned_.fetch_sub(returned, std::memory_order_relaxed);
    word_.fetch_add(returned << shift, std::memory_order_relaxed);
    semaphore_waiter* ready = drain();
    lock.unlock();
    notify_all(ready);
    return true;
  }

  // Every queued waiter completes with `closed`; later acquisitions fail. Permits held stay valid and may be
  // released. Idempotent.
  void close() noexcept {
    std::unique_lock lock(mutex_);
    word_.fetch_or(closed_bit, std::memory_order_relaxed);
    semaphore_waiter* ready = nullptr;
    while (head_ != nullptr) {
      semaphore_waiter& w = *head_;
      unlink(w);
      word_.fetch_add(w.assigned << shift, std::memory_order_relaxed);
      assigned_.fetch_sub(w.assigned, std::memory_order_relaxed);
      w.assigned = 0;
      w.outcome = errc::closed;
      ready = append(ready, &w);
    }
    ready = append(ready, drain());
    lock.unlock();
    notify_all(ready);
  }

  bool is_closed() const noexcept { return (word_.load(std::memory_order_acquire) & closed_bit) != 0; }

  // Why n permits are not to be had by a caller that will not wait: closed, exceeds_capacity, or else `otherwise`
  // (they are short, or someone is queued ahead). One ranking for every non-waiting refusal.
  errc refusal(std::int64_t n, errc otherwise) const noexcept {
    if (is_closed()) return errc::closed;
    if (n > capacity()) return errc::exceeds_capacity;
    return otherwise;
  }

  // Grows the capacity by n (n >= 0); the new permits go to debt first, then to the queue, then to the free pool.
  void add_permits(std::int64_t n) {
    check_count("add_permits n", n, 0);
    std::unique_lock lock(mutex_);
    const std::int64_t capacity = capacity_.load(std::memory_order_relaxed);
    if (n > max_permits - capacity - debt_) {
      throw std::invalid_argument("admit::semaphore: add_permits(" + std::to_string(n) + ") would exceed " +
                                  std::to_string(max_permits) + " permits (capacity " + std::to_string(capacity) + ")");
    }
    capacity_.store(capacity + n, std::memory_order_relaxed);
    word_.fetch_add(n << shift, std::memory_order_relaxed);
    semaphore_waiter* ready = drain();
    lock.unlock();
    notify_all(ready);
  }

  // Shrinks the capacity by n (0 <= n <= capacity) without waiting: free permits are removed now, the rest as
  // holders release them (debt). Waiters that need more than the new capacity complete with exceeds_capacity.
  // Returns how many permits were removed at once.
  std::int64_t forget_permits(std::int64_t n) {
    check_count("forget_permits n", n, 0);
    std::unique_lock lock(mutex_);
    const std::int64_t capacity = capacity_.load(std::memory_order_relaxed);
    if (n > capacity) {
      throw std::invalid_argument("admit::semaphore: forget_permits(" + std::to_string(n) + ") exceeds the capacity " +
                                  std::to_string(capacity));
    }
    capacity_.store(capacity - n, std::memory_order_relaxed);
    const std::int64_t owed_before = debt_;
    debt_ += n;
    debt_published_.store(debt_, std::memory_order_relaxed);
    word_.fetch_or(slow_bit, std::memory_order_relaxed);  // releases now go through drain, which pays the debt
    // Waiters that can never be served now fail; their permits go back (and may pay the debt).
    semaphore_waiter* ready = nullptr;
    for (semaphore_waiter* w = head_; w != nullptr;) {
      semaphore_waiter* next = w->next;
      if (w->needed > capacity - n) {
        unlink(*w);
        word_.fetch_add(w->assigned << shift, std::memory_order_relaxed);
        assigned_.fetch_sub(w->assigned, std::memory_order_relaxed);
        w->assigned = 0;
        w->outcome = errc::exceeds_capacity;
        ready = append(ready, w);
      }
      w = next;
    }
    ready = append(ready, drain());
    const std::int64_t paid_now = std::min(n, owed_before + n - debt_);
    lock.unlock();
    notify_all(ready);
    return paid_now;
  }

  // Snapshots; each is exact at some instant during the call.
  std::int64_t available() const noexcept {
    const std::int64_t w = word_.load(std::memory_order_relaxed);
    return (w & slow_bit) != 0 ? 0 : w >> shift;  // with someone queued, free permits are on their way to the head
  }
  std::size_t waiting() const noexcept { return waiting_.load(std::memory_order_acquire); }
  std::int64_t capacity() const noexcept { return capacity_.load(std::memory_order_relaxed); }
  // Permits held by permits now (an estimate from three counters read one after the other, never negative).
  std::int64_t in_use() const noexcept {
    const std::int64_t w = word_.load(std::memory_order_relaxed);
    const std::int64_t held = capacity_.load(std::memory_order_relaxed) +
                              debt_published_.load(std::memory_order_relaxed) - (w >> shift) -
                              assigned_.load(std::memory_order_relaxed);
    return held < 0 ? 0 : held;
  }

  // Wakes the resolved waiters of a ready list (linked through `next`); call without the mutex.
  static void notify_all(semaphore_waiter* ready) noexcept {
    while (ready != nullptr) {
      semaphore_waiter* w = ready;
      ready = w->next;  // read before notify: the node may be gone once notify starts
      w->notify(w);
    }
  }

  // `who` names the caller's type in the message (the keyed limiter's checks are the semaphore's).
  static void check_count(const char* what, std::int64_t n, std::int64_t min, const char* who = "admit::semaphore") {
    if (n < min || n > max_permits) [[unlikely]]
      throw_bad_count(who, what, n, min);
  }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] static void throw_bad_count(const char* who, const char* what, std::int64_t n,
                                                                     std::int64_t min) {
    throw std::invalid_argument(std::string(who) + ": " + what + " must be in [" + std::to_string(min) + ", " +
                                std::to_string(max_permits) + "], got " + std::to_string(n));
  }

  // The part of release that serves the queue, out of line so that the lock-free path stays small where it inlines.
  [[gnu::noinline]] void release_slow() noexcept {
    std::unique_lock lock(mutex_);
    semaphore_waiter* ready = drain();
    lock.unlock();
    notify_all(ready);
  }

  static constexpr int shift = 2;
  static constexpr std::int64_t closed_bit = 1;
  static constexpr std::int64_t slow_bit = 2;

  // Under the mutex: moves the word's free permits to the debt, then to waiters in FIFO order, returns the waiters it
  // completed (a ready list, unlinked). Leaves the remainder in the word and `slow` set exactly when something is
  // queued or owed. A release that adds to the word while we hold the mutex and sees `slow` set comes here after us.
  semaphore_waiter* drain() noexcept {
    std::int64_t w = word_.load(std::memory_order_relaxed);
    std::int64_t free = 0;
    for (;;) {
      free = w >> shift;
      if (free == 0 || (head_ == nullptr && debt_ == 0)) break;
      if (word_.compare_exchange_weak(w, w & (closed_bit | slow_bit), std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        break;
      }
    }
    semaphore_waiter* ready = nullptr;
    if (free > 0 && (head_ != nullptr || debt_ > 0)) {
      const std::int64_t paid = std::min(free, debt_);
      debt_ -= paid;
      debt_published_.store(debt_, std::memory_order_relaxed);
      free -= paid;
      while (free > 0 && head_ != nullptr) {
        semaphore_waiter& h = *head_;
        const std::int64_t give = std::min(free, h.needed - h.assigned);
        h.assigned += give;
        assigned_.fetch_add(give, std::memory_order_relaxed);
        free -= give;
        if (h.assigned == h.needed) {
          unlink(h);
          assigned_.fetch_sub(h.assigned, std::memory_order_relaxed);
          h.outcome = errc{};
          h.served = ++served_;
          ready = append(ready, &h);
        }
      }
      if (free > 0) word_.fetch_add(free << shift, std::memory_order_relaxed);
    }
    if (head_ == nullptr && debt_ == 0) {
      word_.fetch_and(~slow_bit, std::memory_order_release);
    } else {
      word_.fetch_or(slow_bit, std::memory_order_relaxed);
    }
    return ready;
  }

  // Takes n free permits from `word` (the caller's last read of word_) by compare-and-swap; false once fewer are free.
  // try_acquire runs concurrently without the mutex, hence the loop.
  bool take_free(std::int64_t word, std::int64_t n) noexcept {
    while ((word & slow_bit) == 0 && (word >> shift) >= n) {
      if (word_.compare_exchange_weak(word, word - (n << shift), std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  void enqueue(semaphore_waiter& w) noexcept {
    w.assigned = 0;
    w.sequence = ++sequence_;
    w.served = 0;
    w.queued = true;
    w.next = nullptr;
    w.prev = tail_;
    (tail_ != nullptr ? tail_->next : head_) = &w;
    tail_ = &w;
    // `slow` first, then the count, released: whoever sees the waiter counted and then releases or tries to acquire
    // sees `slow` too (the word's later read-modify-writes follow the fetch_or), so it cannot take the permits from
    // under a waiter it has observed.
    word_.fetch_or(slow_bit, std::memory_order_relaxed);
    waiting_.fetch_add(1, std::memory_order_release);
  }

  void unlink(semaphore_waiter& w) noexcept {
    (w.prev != nullptr ? w.prev->next : head_) = w.next;
    (w.next != nullptr ? w.next->prev : tail_) = w.prev;
    w.prev = w.next = nullptr;
    w.queued = false;
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }

  // Ready lists are singly linked through `next`, in the order the waiters were resolved.
  static semaphore_waiter* append(semaphore_waiter* list, semaphore_waiter* w) noexcept {
    if (list == nullptr) return w;
    semaphore_waiter* last = list;
    while (last->next != nullptr) last = last->next;
    last->next = w;
    return list;
  }
  static semaphore_waiter* remove_from(semaphore_waiter* list, semaphore_waiter* w) noexcept {
    if (list == w) return w->next;
    for (semaphore_waiter* p = list; p != nullptr; p = p->next) {
      if (p->next == w) {
        p->next = w->next;
        break;
      }
    }
    return list;
  }

  alignas(64) std::atomic<std::int64_t> word_{0};
  alignas(64) mutable std::mutex mutex_;
  semaphore_waiter* head_ = nullptr;  // guarded by mutex_
  semaphore_waiter* tail_ = nullptr;  // guarded by mutex_
  std::int64_t debt_ = 0;             // guarded by mutex_: forgotten permits still held, paid by releases
  std::uint64_t sequence_ = 0;        // guarded by mutex_
  std::uint64_t served_ = 0;          // guarded by mutex_
  std::size_t max_waiters_;
  // Written under the mutex, read without it by the snapshots.
  std::atomic<std::int64_t> capacity_{0};
  std::atomic<std::int64_t> assigned_{0};
  std::atomic<std::int64_t> debt_published_{0};
  std::atomic<std::size_t> waiting_{0};
};

}  // namespace admit::detail
