// admit/asio/detail/parked_operation.hpp — asynchronous waiters parked in a semaphore's queue, and the execution
// context service that owns them when their context shuts down.
//
// An asynchronous acquisition queues a `parked_operation` (a semaphore_waiter) in the same FIFO queue as blocking
// waiters. While it is parked, the service of its handler's execution context lists it, so that destroying the
// context (io_context::~io_context, or shutdown) takes the operation out of the semaphore's queue and destroys its
// handler without calling it, as Asio does with every pending operation. Once the semaphore has resolved the
// operation, its completion is posted to the handler's executor, and that posted function owns it.
#pragma once

#include <boost/asio/execution_context.hpp>
#include <mutex>

#include "admit/detail/semaphore_state.hpp"

namespace admit::asio::detail {

struct parked_operation : admit::detail::semaphore_waiter {
  admit::detail::semaphore_state* state = nullptr;
  // Destroys the operation and its handler without calling the handler (context shutdown while queued).
  void (*abandon)(parked_operation*) noexcept = nullptr;
  parked_operation* service_prev = nullptr;  // guarded by the service's mutex
  parked_operation* service_next = nullptr;
};

class parked_operation_service final : public boost::asio::execution_context::service {
 public:
  using key_type = parked_operation_service;
  inline static boost::asio::execution_context::id id;

  explicit parked_operation_service(boost::asio::execution_context& context)
      : boost::asio::execution_context::service(context) {}

  void add(parked_operation& op) noexcept {
    std::lock_guard lock(mutex_);
    op.service_prev = nullptr;
    op.service_next = head_;
    if (head_ != nullptr) head_->service_prev = &op;
    head_ = &op;
  }

  void remove(parked_operation& op) noexcept {
    std::lock_guard lock(mutex_);
    (op.service_prev != nullptr ? op.service_prev->service_next : head_) = op.service_next;
    if (op.service_next != nullptr) op.service_next->service_prev = op.service_prev;
    op.service_prev = op.service_next = nullptr;
  }

 private:
  // The context is going away: operations still queued leave their semaphore's queue and are destroyed. Those the
  // semaphore has already resolved have posted (or are posting) their completion to the context, which destroys it.
  void shutdown() override {
    parked_operation* abandoned = nullptr;  // linked through service_next
    {
      std::lock_guard lock(mutex_);
      for (parked_operation* p = head_; p != nullptr;) {
        parked_operation* next = p->service_next;
        if (p->state->cancel_wait(*p)) {
          (p->service_prev != nullptr ? p->service_prev->service_next : head_) = next;
          if (next != nullptr) next->service_prev = p->service_prev;
          p->service_prev = nullptr;
          p->service_next = abandoned;
          abandoned = p;
        }
        p = next;
      }
    }
    while (abandoned != nullptr) {
      parked_operation* op = abandoned;
      abandoned = op->service_next;
      op->abandon(op);
    }
  }

  std::mutex mutex_;
  parked_operation* head_ = nullptr;
};

}  // namespace admit::asio::detail
