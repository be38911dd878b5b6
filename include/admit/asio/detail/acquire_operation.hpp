// admit/asio/detail/acquire_operation.hpp — one asynchronous acquisition parked in a semaphore's queue: its handler,
// its executor (work counted), its cancellation slot, an optional deadline timer, and the posted completion.
//
// Ownership. The operation is freed when its completion (posted once the semaphore resolved it, or its cancellation or
// deadline took it out of the queue) and its deadline timer's handler (if armed) are done — run, or destroyed unrun
// when the execution context shuts down — and the initiating call has returned. A deadline is cancellation: the
// timer's handler takes the same cancel_wait path as the cancellation slot, with the outcome `timeout` instead of
// `cancelled`.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "admit/asio/detail/parked_operation.hpp"
#include "admit/asio/error_code.hpp"
#include "admit/errc.hpp"
#include "admit/permit.hpp"

namespace admit::asio {

namespace detail {

// Records nothing (the plain semaphore).
struct no_recorder {
  void operator()(errc, std::int64_t, std::chrono::nanoseconds) const noexcept {}
};

// Handler: void(error_code, permit). Recorder: void(errc outcome, int64 n, nanoseconds waited), called on the
// handler's executor just before the handler; `waited` is 0 when the operation was resolved without queueing, else
// the time from its start to its completion running.
template <class Handler, class Clock, class Recorder>
class acquire_operation final : public parked_operation {
 public:
  using time_point = typename Clock::time_point;

  static void start(Handler handler, admit::detail::semaphore_state& sem, std::int64_t n,
                    std::optional<time_point> deadline, Recorder recorder) {
    auto* op = new acquire_operation(std::move(handler), sem, n, std::move(recorder));
    if (deadline && Clock::now() >= *deadline) {
      // Already past: take free permits if nobody is queued, else time out — without queueing.
      op->outcome = sem.try_acquire(n) ? errc{} : sem.refusal(n, errc::timeout);
      op->service_->add(*op);
      op->post_completion();
      return;
    }
    op->service_->add(*op);
    auto slot = boost::asio::get_associated_cancellation_slot(op->handler_);
    if (slot.is_connected()) slot.template emplace<cancel_handler>(op);
    if (deadline) {
      // Armed before the operation can complete, so that only the completion (on the executor) touches the timer
      // afterwards. If it fires before the node is queued, `expired_` tells the code below.
      op->refs_.fetch_add(1, std::memory_order_relaxed);
      op->timer_.emplace(op->executor_, *deadline);
      op->timer_->async_wait(deadline_handler(op));
    }
    // This call's own reference, until it is done with `op` below: once queued, a grant, a cancellation or the
    // deadline may complete it on another thread and drop every other reference before this call returns.
    op->refs_.fetch_add(1, std::memory_order_relaxed);
    op->queued_ = true;                      // before a grant can read it (begin_wait's mutex orders it)
    const auto begun = sem.begin_wait(*op);  // from here on a grant may post the completion at any moment
    if (!begun.queued) {
      op->queued_ = false;  // nobody else resolves a node that was not queued: the completion below reads this
      op->outcome = begun.error;
      op->post_completion();
    } else if (op->expired_.load()) {
      op->give_up(errc::timeout);
    }
    op->unref();
  }

 private:
  using work_executor =
      std::decay_t<decltype(boost::asio::prefer(boost::asio::get_associated_executor(std::declval<Handler&>()),
                                                boost::asio::execution::outstanding_work.tracked))>;
  using timer_type =
      boost::asio::basic_waitable_timer<Clock, boost::asio::wait_traits<Clock>, boost::asio::any_io_executor>;

  acquire_operation(Handler&& handler, admit::detail::semaphore_state& sem, std::int64_t n, Recorder&& recorder)
      : handler_(std::move(handler)),
        executor_(boost::asio::prefer(boost::asio::get_associated_executor(handler_),
                                      boost::asio::execution::outstanding_work.tracked)),
        service_(&boost::asio::use_service<parked_operation_service>(
            boost::asio::query(executor_, boost::asio::execution::context))),
        recorder_(std::move(recorder)),
        start_(Clock::now()) {
    this->state = &sem;
    this->needed = n;
    this->notify = &on_notify;
    this->abandon = &on_abandon;
  }

  // Leaves the queue if still in it (exactly one of a grant, a cancel and the deadline wins).
  void give_up(errc why) noexcept {
    if (state->cancel_wait(*this)) {
      outcome = why;
      post_completion();
    }
  }

  // Runs inside the emitter of the handler's cancellation signal.
  struct cancel_handler {
    explicit cancel_handler(acquire_operation* o) noexcept : op(o) {}  // (clang 14: no aggregate init with parens)
    acquire_operation* op;
    void operator()(boost::asio::cancellation_type_t type) const {
      using boost::asio::cancellation_type;
      if ((type & (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total)) !=
          cancellation_type::none) {
        op->give_up(errc::cancelled);  // if the grant came first, it stands
      }
    }
  };

  // The deadline timer's handler; holds a reference. Destroyed unrun (shutdown), it drops the reference.
  class deadline_handler {
   public:
    explicit deadline_handler(acquire_operation* op) noexcept : op_(op) {}
    deadline_handler(deadline_handler&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    deadline_handler& operator=(deadline_handler&&) = delete;
    ~deadline_handler() {
      if (op_ != nullptr) op_->unref();
    }
    void operator()(const boost::system::error_code& ec) {
      acquire_operation* op = std::exchange(op_, nullptr);
      if (!ec) {
        op->expired_.store(true);
        op->give_up(errc::timeout);
      }
      op->unref();
    }

   private:
    acquire_operation* op_;
  };

  // The posted completion; holds a reference. Destroyed unrun (context shutdown), it returns a granted permit.
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
    self->unref();
  }

  void post_completion() noexcept {
    const work_executor executor = executor_;  // the operation may be gone once the completion is queued
    boost::asio::post(executor, completion(this));
  }

  void clear_slot() noexcept {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
  }

  void stop_timer() noexcept {
    if (timer_) timer_->cancel();  // its handler runs (or is destroyed) later and drops its reference
  }

  void unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // On the handler's executor: take the permit, the handler and the recorder out, release the operation, then
  // record and call the handler. The recorder (the metrics event hook) may throw: by then the permit is owned by a
  // local (released as the exception unwinds) and the operation is gone, so nothing leaks.
  void finish() {
    service_->remove(*this);
    clear_slot();
    stop_timer();
    const errc result = outcome;
    const auto n = needed;
    const auto waited = queued_ ? std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_)
                                : std::chrono::nanoseconds::zero();
    Handler handler = std::move(handler_);  // before the permit: the permit goes back first if record throws
    permit granted = result == errc{} ? permit(*state, needed) : permit();
    Recorder record = std::move(recorder_);
    const work_executor work = std::move(executor_);  // keeps the work counted until the handler returns
    unref();
    record(result, n, waited);
    std::move(handler)(to_error_code(result), std::move(granted));
  }

  void discard() noexcept {
    service_->remove(*this);
    clear_slot();
    stop_timer();
    if (outcome == errc{}) permit(*state, needed).release();
    unref();
  }

  Handler handler_;
  work_executor executor_;
  parked_operation_service* service_;
  Recorder recorder_;
  time_point start_;
  std::optional<timer_type> timer_;
  bool queued_ = false;               // it waited in the queue (else resolved at once: waited 0)
  std::atomic<bool> expired_{false};  // the deadline passed (possibly before the node was queued)
  std::atomic<int> refs_{1};  // the completion (or the queue, until resolved) + the deadline handler if armed + start()
};

}  // namespace detail
}  // namespace admit::asio
