// admit/detail/atomic_max.hpp — raising an atomic to at least a value (a "fetch max"), lock-free.
#pragma once

#include <atomic>
#include <cstdint>

namespace admit::detail {

// Stores v into `a` unless `a` already holds v or more; concurrent raises keep the largest. `success` orders the
// store that raises it; a load that finds it high enough (or a failed exchange) is relaxed.
inline void raise_to(std::atomic<std::int64_t>& a, std::int64_t v,
                     std::memory_order success = std::memory_order_acq_rel) noexcept {
  std::int64_t cur = a.load(std::memory_order_relaxed);
  while (cur < v && !a.compare_exchange_weak(cur, v, success, std::memory_order_relaxed)) {
  }
}

}  // namespace admit::detail
