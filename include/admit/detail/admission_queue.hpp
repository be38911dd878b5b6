// admit/detail/admission_queue.hpp — the waiters of admit::admission: one intrusive node per waiting request, owned
// by whoever waits (a blocking thread's stack frame, an asynchronous operation), each class's FIFO queue of them, and
// the list of granted asynchronous waiters that the admission notifies once its mutex is released.
//
// Invariant (under the admission's mutex): a node is `queued` exactly while it is linked in its class's queue; it
// leaves the queue once, either granted (`granted` set, its n tokens and permits taken) or given up (timeout, cancel,
// an immediate refusal). The queue allocates nothing. The node's owner reads `granted` and `event` once it has been
// told (a blocking waiter: under the mutex; an asynchronous one: through `notify`) or has taken it out itself.
//
// How a waiter is woken (the admission calls these under its mutex unless said otherwise):
// - a blocking waiter on a real clock sets `futex_sleeper` and sleeps on `signal`: a grant sets its granted bit (and
//   the waiter, seeing it, returns without taking the mutex again), a new `wake_ns` or a cancel bumps it; on a clock
//   with its own sleep (the manual clock) it sets `interrupt` to its current sleep's stop_source, which those request;
// - an asynchronous waiter sets `rearm` (its wake time changed: re-arm its timer) and `notify` (it was granted: called
//   once, after the admission's mutex is released, never inside it — it posts the handler; the node may be gone once
//   it returns).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <utility>

#include "admit/detail/futex.hpp"
#include "admit/detail/saturating.hpp"

namespace admit::detail {

struct admission_waiter {
  // Set by the owner before it queues the node.
  std::size_t cls = 0;
  std::int64_t n = 0;
  std::stop_source* interrupt = nullptr;              // blocking: the current sleep's; may be null
  bool futex_sleeper = false;                         // blocking on a real clock: sleeps on `signal`
  static constexpr std::uint32_t granted_signal = 1;  // signal's bit set by a grant (release: after the fields)
  // The futex word; a copy of the node (a record of its fields, as an asynchronous operation keeps) starts at 0.
  struct signal_word : std::atomic<std::uint32_t> {
    signal_word() noexcept : std::atomic<std::uint32_t>(0) {}
    signal_word(const signal_word&) noexcept : std::atomic<std::uint32_t>(0) {}
    signal_word& operator=(const signal_word&) = delete;
  };
  signal_word signal;
  void (*rearm)(admission_waiter&) noexcept = nullptr;   // asynchronous: wake_ns changed (under the mutex)
  void (*notify)(admission_waiter&) noexcept = nullptr;  // asynchronous: granted (after the mutex is released)

  // Written under the admission's mutex.
  bool queued = false;
  bool granted = false;
  bool cancelled = false;         // a blocking waiter's stop_token was requested
  std::int64_t wake_ns = ns_max;  // when its head position's tokens will be there (ns_max: not a time event)
  admission_waiter* prev = nullptr;
  admission_waiter* next = nullptr;
  admission_waiter* ready_next = nullptr;  // in the list of granted asynchronous waiters still to notify
  // What the on_admitted hook is told (filled when granted; arrival when queued).
  std::uint64_t arrival = 0;  // arrival order over all classes (1, 2, ...)
  std::uint64_t order = 0;    // admission order (1, 2, ...)
  std::int64_t at_ns = 0;     // when it was admitted (effective time, ns since the clock's epoch)
  bool within_guarantee = false;
};

// Wakes a blocking waiter (granted, or to look again: a new wake time, a cancel). Under the admission's mutex. After a
// grant the owner may return as soon as `signal` has its bit: only the word's address is used from then on.
inline void wake_blocking(admission_waiter& w, bool granted) noexcept {
  if (w.futex_sleeper) {
    std::atomic<std::uint32_t>* const word = &w.signal;
    if (granted) {
      word->fetch_or(admission_waiter::granted_signal, std::memory_order_release);
    } else {
      word->fetch_add(2, std::memory_order_release);
    }
    futex_wake_one(word);
  } else if (w.interrupt != nullptr) {
    w.interrupt->request_stop();
  }
}

// One class's waiters in arrival order. Guarded by the admission's mutex.
struct admission_queue {
  admission_waiter* head = nullptr;
  admission_waiter* tail = nullptr;
  std::int64_t queued_n = 0;  // the sum of the waiters' n
  std::size_t waiting = 0;

  void push_back(admission_waiter& w, std::uint64_t arrival) noexcept {
    w.arrival = arrival;
    w.prev = tail;
    w.next = nullptr;
    (tail != nullptr ? tail->next : head) = &w;
    tail = &w;
    w.queued = true;
    queued_n += w.n;
    ++waiting;
  }

  // Precondition: w is queued here.
  void erase(admission_waiter& w) noexcept {
    (w.prev != nullptr ? w.prev->next : head) = w.next;
    (w.next != nullptr ? w.next->prev : tail) = w.prev;
    w.prev = w.next = nullptr;
    w.queued = false;
    queued_n -= w.n;
    --waiting;
  }
};

// Granted asynchronous waiters still to notify, in grant order: filled under the admission's mutex, notified once it
// is released.
struct admission_ready_list {
  admission_waiter* head = nullptr;
  admission_waiter* tail = nullptr;

  void push_back(admission_waiter& w) noexcept {
    (tail != nullptr ? tail->ready_next : head) = &w;
    tail = &w;
  }
  // Empties the list, returning its first node (the rest follow through ready_next).
  admission_waiter* take() noexcept {
    tail = nullptr;
    return std::exchange(head, nullptr);
  }
  // Calls notify on `first` and those linked after it. Without the mutex held.
  static void notify_all(admission_waiter* first) noexcept {
    while (first != nullptr) {
      admission_waiter* next = std::exchange(first->ready_next, nullptr);
      first->notify(*first);  // the node may be gone once this returns
      first = next;
    }
  }
};

}  // namespace admit::detail
