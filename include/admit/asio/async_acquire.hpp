// admit/asio/async_acquire.hpp — wait for semaphore permits without blocking a thread: Asio completion tokens
// (callbacks, use_awaitable, deferred, use_future), per-operation cancellation, FIFO with blocking waiters.
//
//   auto [ec, permit] = co_await admit::asio::async_acquire(sem, 1, boost::asio::as_tuple(boost::asio::use_awaitable));
//   if (!ec) co_await handle(request);   // the permit is released when `permit` goes out of scope
//
// Completion signature: void(boost::system::error_code, admit::permit). Errors: boost::asio::error::operation_aborted
// (cancelled through the handler's cancellation slot), and as an admit::errc: queue_full and exceeds_capacity
// (at once, as the blocking acquire), closed.
//
// Guarantees.
// - One queue: the operation waits in the semaphore's FIFO queue, between the blocking waiters that arrived before
//   and after it, and is served by the same direct hand-off.
// - The handler runs exactly once, on its associated executor (system_executor when it has none — bind one), through
//   a post: never inside the initiating call and never inside another thread's release(), close() or cancel, so
//   no user code runs while admit holds internal state. Outstanding work is counted on the executor while waiting.
// - Cancellation: the handler's cancellation slot accepts terminal, partial and total cancellation (a cancelled wait
//   has no side effect: its reserved permits go to the next waiters). If the grant came first the grant stands — the
//   handler gets the permit, and if nobody takes it, the permit's destructor returns it. Emit cancellation from the
//   handler's executor (or strand), as every Asio operation requires.
// - Timeouts are cancellation: bound the wait with a timer that cancels it (e.g. awaitable operators
//   `async_acquire(...) || timer.async_wait(...)`, or async_acquire_for below), not with a second code path.
// - Shutdown: destroying the handler's execution context while the operation waits takes it out of the queue and
//   destroys the handler without calling it; a grant already posted is destroyed with the context's queue and its
//   permits return to the semaphore. The semaphore must outlive its waiting operations.
// - Cost: the operation is one heap allocation; waiting takes the semaphore's mutex (begin, grant, cancel).
//   Resolution posts to the executor; if that post cannot allocate, std::terminate is called (it runs inside
//   release(), which cannot fail).
#pragma once

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <system_error>
#include <type_traits>
#include <utility>

#include "admit/asio/detail/parked_operation.hpp"
#include "admit/errc.hpp"
#include "admit/permit.hpp"
#include "admit/semaphore.hpp"

namespace admit::asio {

// The error code an asynchronous acquisition completes with for `e`: success for errc{}, operation_aborted for
// cancelled (Asio's convention), otherwise the admit::errc itself (category "admit").
inline boost::system::error_code to_error_code(errc e) noexcept {
  if (e == errc{}) return {};
  if (e == errc::cancelled) return boost::asio::error::operation_aborted;
  return boost::system::error_code(std::error_code(e));
}

namespace detail {

template <class Handler>
class acquire_operation final : public parked_operation {
 public:
  static void start(Handler handler, admit::detail::semaphore_state& sem, std::int64_t n) {
    auto* op = new acquire_operation(std::move(handler), sem, n);
    op->service_->add(*op);
    auto slot = boost::asio::get_associated_cancellation_slot(op->handler_);
    if (slot.is_connected()) slot.template emplace<cancel_handler>(op);
    const auto begun = sem.begin_wait(*op);  // from here on a grant may post the completion at any moment
    if (!begun.queued) {
      op->outcome = begun.error;
      op->post_completion();
    }
  }

 private:
  using work_executor =
      std::decay_t<decltype(boost::asio::prefer(boost::asio::get_associated_executor(std::declval<Handler&>()),
                                                boost::asio::execution::outstanding_work.tracked))>;

  acquire_operation(Handler&& handler, admit::detail::semaphore_state& sem, std::int64_t n)
      : handler_(std::move(handler)),
        executor_(boost::asio::prefer(boost::asio::get_associated_executor(handler_),
                                      boost::asio::execution::outstanding_work.tracked)),
        service_(&boost::asio::use_service<parked_operation_service>(
            boost::asio::query(executor_, boost::asio::execution::context))) {
    this->state = &sem;
    this->needed = n;
    this->notify = &on_notify;
    this->abandon = &on_abandon;
  }

  // Runs inside the emitter of the handler's cancellation signal.
  struct cancel_handler {
    acquire_operation* op;
    void operator()(boost::asio::cancellation_type_t type) const {
      using boost::asio::cancellation_type;
      if ((type & (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total)) ==
          cancellation_type::none) {
        return;
      }
      if (op->state->cancel_wait(*op)) {  // still queued: leave the queue; otherwise the grant stands
        op->outcome = errc::cancelled;
        op->post_completion();
      }
    }
  };

  // The posted completion; owns the operation. Destroyed without running (context shutdown), it frees the
  // operation and returns a granted permit.
  class completion {
   public:
    explicit completion(acquire_operation* op) noexcept : op_(op) {}
    completion(completion&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    completion& operator=(completion&&) = delete;
    ~completion() {
      if (op_ != nullptr) op_->discard();
    }
    void operator()() { std::exchange(op_, nullptr)->finish(); }

   private:
    acquire_operation* op_;
  };

  static void on_notify(admit::detail::semaphore_waiter* w) noexcept {
    static_cast<acquire_operation*>(w)->post_completion();
  }
  static void on_abandon(parked_operation* p) noexcept {
    auto* self = static_cast<acquire_operation*>(p);
    self->clear_slot();
    delete self;
  }

  void post_completion() noexcept {
    const work_executor executor = executor_;  // the operation may be gone once the completion is queued
    boost::asio::post(executor, completion(this));
  }

  void clear_slot() noexcept {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
  }

  // On the handler's executor: free the operation, then call the handler (Asio's rule: deallocate before upcall).
  void finish() {
    service_->remove(*this);
    clear_slot();
    const boost::system::error_code ec = to_error_code(outcome);
    permit granted = outcome == errc{} ? permit(*state, needed) : permit();
    Handler handler = std::move(handler_);
    const work_executor work = std::move(executor_);  // keeps the work counted until the handler returns
    delete this;
    std::move(handler)(ec, std::move(granted));
  }

  void discard() noexcept {
    service_->remove(*this);
    clear_slot();
    if (outcome == errc{}) permit(*state, needed).release();
    delete this;
  }

  Handler handler_;
  work_executor executor_;
  parked_operation_service* service_;
};

struct initiate_acquire {
  template <class Handler>
  void operator()(Handler&& handler, admit::detail::semaphore_state* state, std::int64_t n) const {
    acquire_operation<std::decay_t<Handler>>::start(std::forward<Handler>(handler), *state, n);
  }
};

}  // namespace detail

// Waits for n permits (n >= 1; throws std::invalid_argument otherwise, before starting) of `sem`. See the top of the
// file for guarantees. Thread safety: may be called concurrently with every member of the semaphore.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_semaphore<Clock>& sem, std::int64_t n, CompletionToken&& token) {
  admit::detail::semaphore_state::check_count("n", n, 1);
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, admit::permit)>(
      detail::initiate_acquire{}, token, &sem.native_state(), n);
}

// One permit.
template <steady_clock_like Clock, class CompletionToken>
auto async_acquire(basic_semaphore<Clock>& sem, CompletionToken&& token) {
  return async_acquire(sem, 1, std::forward<CompletionToken>(token));
}

}  // namespace admit::asio
