// admit/permit.hpp — permits held from a semaphore, returned when the object dies.
//
//   if (auto p = sem.try_acquire(2)) { work(); }   // p->count() == 2; both return at the end of the scope
//
// A permit is move-only and releases exactly once: on release(), on destruction, or when a moved-to permit is
// assigned over. It does not own the semaphore: the semaphore must outlive every permit taken from it. It is the same
// type for every clock, for blocking and for asynchronous acquisition. Thread safety: one permit object is not
// shared between threads without synchronisation (like any value); different permits of one semaphore may be
// released concurrently.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "admit/detail/semaphore_state.hpp"

namespace admit {

class [[nodiscard]] permit {
 public:
  // An empty permit: holds nothing, releases nothing.
  permit() noexcept = default;

  // Adopts `n` permits already taken from `state` (by the semaphore and its integrations; not for general use).
  permit(detail::semaphore_state& state, std::int64_t n) noexcept : state_(&state), count_(n) {}

  permit(permit&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  permit& operator=(permit&& other) noexcept {
    if (this != &other) {
      release();
      state_ = std::exchange(other.state_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  permit(const permit&) = delete;
  permit& operator=(const permit&) = delete;
  ~permit() { release(); }

  // Returns the permits to the semaphore (handing them to its waiters first) and leaves this permit empty. Releasing
  // an empty permit does nothing. Lock-free when nobody waits on the semaphore.
  void release() noexcept {
    if (count_ > 0) state_->release(count_);
    state_ = nullptr;
    count_ = 0;
  }

  // How many permits this object holds (0 once released or moved from).
  std::int64_t count() const noexcept { return count_; }

  // True while it holds permits.
  explicit operator bool() const noexcept { return count_ > 0; }

  // Moves `n` of the held permits (0 <= n <= count()) into a new permit of the same semaphore, to be released
  // separately. Throws std::invalid_argument naming n and count() otherwise.
  permit split(std::int64_t n) {
    if (n < 0 || n > count_) {
      throw std::invalid_argument("admit::permit::split: n must be in [0, " + std::to_string(count_) +
                                  "] (the permits it holds), got " + std::to_string(n));
    }
    if (n == 0) return {};
    count_ -= n;
    permit part(*state_, n);
    if (count_ == 0) state_ = nullptr;
    return part;
  }

  // Takes over the permits of `other`, which must come from the same semaphore (or be empty); `other` is left empty.
  // Throws std::invalid_argument if it comes from another semaphore.
  void merge(permit&& other) {
    if (other.count_ == 0) return;
    if (count_ > 0 && other.state_ != state_) {
      throw std::invalid_argument("admit::permit::merge: the permits come from different semaphores");
    }
    state_ = std::exchange(other.state_, nullptr);
    count_ += std::exchange(other.count_, 0);
  }

 private:
  detail::semaphore_state* state_ = nullptr;
  std::int64_t count_ = 0;
};

}  // namespace admit
