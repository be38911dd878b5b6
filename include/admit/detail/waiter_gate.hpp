// admit/detail/waiter_gate.hpp — the bound on a rate limiter's waiters: a count of the callers waiting now and the
// most that may, shared by the blocking waits of every rate limiter and by their Asio forms.
//
// A rate limiter's waiters sleep on their own (a thread on its clock, an Asio operation on its timer): nothing queues
// them, so the bound is a counter. enter() takes a place if fewer than max() are waiting — a compare-and-swap loop
// that never raises the count past the bound, so the bound is exact under concurrency: at no instant are more than
// max() places held, and enter() fails only when it read max() places held (a lost compare-and-swap re-reads and
// retries, it never turns into a refusal). (Incrementing first and undoing on overflow would let one refused caller's
// passing increment refuse another while fewer than max() really wait.)
//
// Thread safety: every member may be called concurrently. set_max() is relaxed: a caller already past enter() keeps
// its place when the bound is lowered under it; later callers see the new bound.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <utility>

namespace admit::detail {

class waiter_gate {
 public:
  static constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

  // A place taken by enter(), given back by its destructor or release(). Move-only; empty when enter() failed.
  class slot {
   public:
    slot() = default;
    slot(slot&& other) noexcept : gate_(std::exchange(other.gate_, nullptr)) {}
    slot& operator=(slot&& other) noexcept {
      if (this != &other) {
        release();
        gate_ = std::exchange(other.gate_, nullptr);
      }
      return *this;
    }
    ~slot() { release(); }
    explicit operator bool() const noexcept { return gate_ != nullptr; }
    void release() noexcept {
      if (gate_ != nullptr) std::exchange(gate_, nullptr)->leave();
    }

   private:
    friend class waiter_gate;
    explicit slot(waiter_gate* g) noexcept : gate_(g) {}
    waiter_gate* gate_ = nullptr;
  };

  waiter_gate() = default;
  waiter_gate(const waiter_gate&) = delete;
  waiter_gate& operator=(const waiter_gate&) = delete;

  // A place if fewer than max() are waiting, else an empty slot (the caller fails with errc::queue_full).
  [[nodiscard]] slot enter() noexcept { return try_enter() ? slot(this) : slot(); }

  // The raw forms of enter(): true when a place was taken; every true must be matched by one leave().
  [[nodiscard]] bool try_enter() noexcept {
    const std::size_t bound = max_.load(std::memory_order_relaxed);
    std::size_t n = waiting_.load(std::memory_order_relaxed);
    do {
      if (n >= bound) return false;
    } while (!waiting_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed, std::memory_order_relaxed));
    return true;
  }
  void leave() noexcept { waiting_.fetch_sub(1, std::memory_order_relaxed); }

  // Callers waiting now (places held).
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_.load(std::memory_order_relaxed); }
  // The bound: 0 lets nobody wait; unbounded (the default) is no bound.
  [[nodiscard]] std::size_t max() const noexcept { return max_.load(std::memory_order_relaxed); }
  void set_max(std::size_t m) noexcept { max_.store(m, std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t> waiting_{0};
  std::atomic<std::size_t> max_{unbounded};
};

}  // namespace admit::detail
