// admit/asio/detail/admission_operation.hpp — one asynchronous request waiting in an admit::admission's class queue:
// its handler, its executor (work counted), its cancellation slot, its timer, and the posted completion; plus the
// execution context service that owns the operations still queued when their context shuts down.
//
// The timer. An admission serves its heads whenever something changes; when only time can change a head's decision
// (its tokens, or its class's assured token, are not there yet), someone must be awake at that time to serve it. A
// blocking waiter sleeps until then; an asynchronous one keeps one timer of Clock on its handler's executor, armed at
// the earlier of its head's token time and its deadline. The admission re-arms it (under its mutex, from whichever
// thread changed the token time: the `rearm` callback); when it goes off, its handler takes the admission's mutex and
// serves the heads (timer_fired), which admits this operation, times it out at its deadline, or arms it again.
//
// Ownership. The operation is freed when its completion (posted once the admission resolved it: granted, refused at
// once, cancelled, timed out) and every timer handler it armed are done — run, or destroyed unrun when the execution
// context shuts down. Exactly one of a grant, a cancellation and the deadline resolves it, under the admission's mutex.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "admit/admission.hpp"
#include "admit/asio/error_code.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/errc.hpp"
#include "admit/permit.hpp"

namespace admit::asio::detail {

// An asynchronous admission waiter as its context's service sees it.
struct admission_parked : admit::detail::admission_waiter {
  bool (*leave)(admission_parked*) = nullptr;             // out of the admission's queue: true if it was still queued
  void (*abandon)(admission_parked*) noexcept = nullptr;  // destroys it without calling its handler
  admission_parked* service_prev = nullptr;               // guarded by the service's mutex
  admission_parked* service_next = nullptr;
};

// Destroying the context (io_context::~io_context, or shutdown) takes its operations still queued out of their
// admission's queue and destroys their handlers without calling them, as Asio does with every pending operation.
// Those already resolved have posted (or are posting) their completion to the context, which destroys it.
class admission_operation_service final : public boost::asio::execution_context::service {
 public:
  using key_type = admission_operation_service;
  inline static boost::asio::execution_context::id id;

  explicit admission_operation_service(boost::asio::execution_context& context)
      : boost::asio::execution_context::service(context) {}

  void add(admission_parked& op) noexcept {
    std::lock_guard lock(mutex_);
    op.service_prev = nullptr;
    op.service_next = head_;
    if (head_ != nullptr) head_->service_prev = &op;
    head_ = &op;
  }
  void remove(admission_parked& op) noexcept {
    std::lock_guard lock(mutex_);
    unlink(op);
  }

 private:
  void unlink(admission_parked& op) noexcept {
    (op.service_prev != nullptr ? op.service_prev->service_next : head_) = op.service_next;
    if (op.service_next != nullptr) op.service_next->service_prev = op.service_prev;
    op.service_prev = op.service_next = nullptr;
  }

  void shutdown() override {
    admission_parked* abandoned = nullptr;  // linked through service_next
    {
      std::lock_guard lock(mutex_);
      for (admission_parked* p = head_; p != nullptr;) {
        admission_parked* next = p->service_next;
        if (p->leave(p)) {
          unlink(*p);
          p->service_next = abandoned;
          abandoned = p;
        }
        p = next;
      }
    }
    while (abandoned != nullptr) {
      admission_parked* op = abandoned;
      abandoned = op->service_next;
      op->abandon(op);
    }
  }

  std::mutex mutex_;
  admission_parked* head_ = nullptr;
};

// Handler: void(error_code, permit).
template <class Handler, class Clock>
class admission_operation final : public admission_parked {
 public:
  using admission_type = basic_admission<Clock>;
  using time_point = typename Clock::time_point;

  static void start(Handler handler, admission_type& adm, std::size_t priority, std::int64_t count,
                    std::optional<time_point> deadline) {
    auto* op = new admission_operation(std::move(handler), adm, priority, count, deadline);
    op->service_->add(*op);
    auto slot = boost::asio::get_associated_cancellation_slot(op->handler_);
    if (slot.is_connected()) slot.template emplace<cancel_handler>(op);
    // From here on a grant may post the completion at any moment, and the admission may arm the timer.
    const auto begun = adm.begin_wait(*op, deadline, true);
    if (!begun.queued) {
      op->immediate_ = true;
      op->resolve(begun.error);
    }
  }

 private:
  using work_executor =
      std::decay_t<decltype(boost::asio::prefer(boost::asio::get_associated_executor(std::declval<Handler&>()),
                                                boost::asio::execution::outstanding_work.tracked))>;
  using timer_type =
      boost::asio::basic_waitable_timer<Clock, boost::asio::wait_traits<Clock>, boost::asio::any_io_executor>;

  admission_operation(Handler&& handler, admission_type& adm, std::size_t priority, std::int64_t count,
                      std::optional<time_point> deadline)
      : handler_(std::move(handler)),
        executor_(boost::asio::prefer(boost::asio::get_associated_executor(handler_),
                                      boost::asio::execution::outstanding_work.tracked)),
        service_(&boost::asio::use_service<admission_operation_service>(
            boost::asio::query(executor_, boost::asio::execution::context))),
        admission_(&adm),
        deadline_(deadline),
        timer_(executor_),
        start_(Clock::now()) {
    cls = priority;
    n = count;
    rearm = &on_rearm;
    notify = &on_notify;
    leave = &on_leave;
    abandon = &on_abandon;
  }

  static admission_operation* from(admit::detail::admission_waiter& w) noexcept {
    return static_cast<admission_operation*>(static_cast<admission_parked*>(&w));
  }

  // Resolved (not by a grant from the queue, which calls on_notify): posts the completion with `why`.
  void resolve(errc why) noexcept {
    outcome_ = why;
    post_completion();
  }

  // Under the admission's mutex, from any thread: the head's token time changed, or the timer went off and the
  // operation still waits. Arms the timer at the earlier of the token time and the deadline (or stops it).
  static void on_rearm(admit::detail::admission_waiter& w) noexcept {
    admission_operation* op = from(w);
    time_point until =
        w.wake_ns == admit::detail::ns_max ? time_point::max() : admit::detail::ceil_time_point<time_point>(w.wake_ns);
    if (op->deadline_) until = std::min(until, *op->deadline_);
    if (until == time_point::max()) {
      op->timer_.cancel();
      return;
    }
    op->refs_.fetch_add(1, std::memory_order_relaxed);
    op->timer_.expires_at(until);  // cancels the wait armed before (its handler drops its reference)
    op->timer_.async_wait(timer_handler(op));
  }

  // After the admission's mutex was released: granted from the queue.
  static void on_notify(admit::detail::admission_waiter& w) noexcept { from(w)->resolve(errc{}); }

  static bool on_leave(admission_parked* p) {
    auto* self = static_cast<admission_operation*>(p);
    return self->admission_->cancel_wait(*self);
  }
  static void on_abandon(admission_parked* p) noexcept {
    auto* self = static_cast<admission_operation*>(p);
    self->clear_slot();
    self->unref();  // a timer wait still armed is destroyed by the context too, and drops its reference
  }

  // Runs inside the emitter of the handler's cancellation signal.
  struct cancel_handler {
    explicit cancel_handler(admission_operation* o) noexcept : op(o) {}
    admission_operation* op;
    void operator()(boost::asio::cancellation_type_t type) const {
      using boost::asio::cancellation_type;
      if ((type & (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total)) !=
              cancellation_type::none &&
          op->admission_->cancel_wait(*op)) {
        op->resolve(errc::cancelled);  // if the grant came first, it stands
      }
    }
  };

  // A timer wait's handler; holds a reference. Destroyed unrun (shutdown), it drops the reference.
  class timer_handler {
   public:
    explicit timer_handler(admission_operation* op) noexcept : op_(op) {}
    timer_handler(timer_handler&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    timer_handler& operator=(timer_handler&&) = delete;
    ~timer_handler() {
      if (op_ != nullptr) op_->unref();
    }
    void operator()(const boost::system::error_code& ec) {
      admission_operation* op = std::exchange(op_, nullptr);
      if (!ec && op->admission_->timer_fired(*op, op->deadline_)) op->resolve(errc::timeout);
      op->unref();
    }

   private:
    admission_operation* op_;
  };

  // The posted completion; holds the operation's first reference. Destroyed unrun, it returns a granted permit.
  class completion {
   public:
    explicit completion(admission_operation* op) noexcept : op_(op) {}
    completion(completion&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    completion& operator=(completion&&) = delete;
    ~completion() {
      if (op_ != nullptr) op_->discard();
    }
    void operator()() { std::exchange(op_, nullptr)->finish(); }

   private:
    admission_operation* op_;
  };

  void post_completion() noexcept {
    const work_executor executor = executor_;  // the operation may be gone once the completion is queued
    boost::asio::post(executor, completion(this));
  }

  void clear_slot() noexcept {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
  }

  void unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // On the handler's executor: record the outcome (and call on_admitted), release the operation, call the handler.
  void finish() {
    service_->remove(*this);
    clear_slot();
    timer_.cancel();  // resolved: nobody else touches the timer now
    const auto waited = immediate_ ? std::chrono::nanoseconds{0}
                                   : std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_);
    const admit::detail::admission_waiter w = *this;
    admission_type* adm = admission_;
    const errc result = outcome_;
    Handler handler = std::move(handler_);
    const work_executor work = std::move(executor_);  // keeps the work counted until the handler returns
    unref();
    acquire_result r = adm->complete(w, result, waited);
    if (r) {
      std::move(handler)(boost::system::error_code{}, std::move(*r));
    } else {
      std::move(handler)(to_error_code(r.error()), permit());
    }
  }

  void discard() noexcept {
    service_->remove(*this);
    clear_slot();
    timer_.cancel();
    if (outcome_ == errc{}) admission_->discard(*this);
    unref();
  }

  Handler handler_;
  work_executor executor_;
  admission_operation_service* service_;
  admission_type* admission_;
  std::optional<time_point> deadline_;
  timer_type timer_;
  time_point start_;
  errc outcome_{};
  bool immediate_ = false;    // resolved inside the initiating call: it did not wait
  std::atomic<int> refs_{1};  // the completion (or the queue, until resolved) + one per timer wait armed
};

}  // namespace admit::asio::detail
