// redis/semaphore/gauges.hpp — what one semaphore object reports without asking Redis (semaphore::metrics(), kept
// whether or not metrics are enabled): the capacity it last learned, the permits its leases hold now, its
// acquisitions under way, and the leases it found lost. Each changes with a Redis call, so relaxed atomics suffice:
// a reading is each gauge's value at some moment, not one moment for all four.
//
// Thread safety: every member may be called concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "admit/limiter_metrics.hpp"

namespace admit::redis::detail {

class semaphore_gauges {
 public:
  // A lease of n permits begins (granted by Redis or by the failure policy) / ends (released or found lost).
  void lease_begins(std::int64_t n) noexcept { held_.fetch_add(n, std::memory_order_relaxed); }
  void lease_ends(std::int64_t n) noexcept { held_.fetch_sub(n, std::memory_order_relaxed); }
  // A lease found lost (after lease_ends).
  void lease_lost() noexcept { lost_.fetch_add(1, std::memory_order_relaxed); }
  // An acquisition (not try_acquire) starts / has its outcome.
  void wait_begins() noexcept { waiting_.fetch_add(1, std::memory_order_relaxed); }
  void wait_ends() noexcept { waiting_.fetch_sub(1, std::memory_order_relaxed); }
  // The capacity learned from Redis (set_capacity, inspect).
  void capacity_seen(std::int64_t c) noexcept { capacity_.store(c, std::memory_order_relaxed); }

  [[nodiscard]] std::uint64_t leases_lost() const noexcept { return lost_.load(std::memory_order_relaxed); }
  // Sets limit, in_flight, waiting and leases_lost of `s`.
  void fill(limiter_snapshot& s) const noexcept {
    s.limit = capacity_.load(std::memory_order_relaxed);
    s.in_flight = held_.load(std::memory_order_relaxed);
    s.waiting = waiting_.load(std::memory_order_relaxed);
    s.leases_lost = leases_lost();
  }

 private:
  std::atomic<std::int64_t> held_{0};      // permits in this object's leases still held (Redis's and local ones)
  std::atomic<std::size_t> waiting_{0};    // acquisitions that have not completed
  std::atomic<std::int64_t> capacity_{0};  // the capacity last learned; 0 before
  std::atomic<std::uint64_t> lost_{0};     // leases found lost
};

}  // namespace admit::redis::detail
