// admit/redis/client/detail/request.hpp — one pending call on a connection: its formatted command, its deadline, and
// the way it completes (an Asio handler posted to its executor, or a blocked thread woken).
//
// A request's payload is usually one command. It may hold more than one: the cluster's "ASKING" + command, which must
// reach the node back to back (`skip_replies` leading replies are then read and dropped, and the last one completes
// the request), or a pipeline (connection::async_execute_pipeline: `gather` replies are collected, and complete the
// request as one array reply).
//
// Exactly one of the reply, the deadline, a cancellation, a connection loss and close() completes a request: the
// first to flip `done_`. Whoever loses does nothing; a request completed before it was written is never written, and
// one completed after it was written stays in the connection's FIFO until its reply comes (then discarded), so that
// later replies still match their requests.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "admit/asio/error_code.hpp"
#include "admit/errc.hpp"
#include "admit/redis/client/reply.hpp"

namespace admit::redis::detail {

class request_base;

// The calls a connection holds that have not completed yet: a registry that close() reads from any thread — even when
// the connection's executor does not run — to learn that nothing is left to deliver, or to complete what is left at
// its deadline. A connection registers a request (request_base::count_in) when it queues it; the request leaves when
// it completes, whoever completes it; one that completes with errc::closed is counted as unsent or unanswered (by
// whether it was written). Thread-safe; the list is guarded by the mutex.
class live_calls {
 public:
  void add(request_base& r) noexcept;
  void remove(request_base& r, bool closed) noexcept;
  std::size_t count() const noexcept { return count_.load(std::memory_order_seq_cst); }
  // From now on, the count reaching zero wakes wait_until.
  void watch() noexcept { watched_.store(true, std::memory_order_seq_cst); }
  // Waits until no call is registered, or until `until` (false then).
  bool wait_until(std::chrono::steady_clock::time_point until) {
    std::unique_lock lock(mutex_);
    return cv_.wait_until(lock, until, [&] { return count() == 0; });
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return count() == 0; });
  }
  // Completes every registered call with errc::closed, then waits (briefly: they are completing) for those that
  // another thread completed meanwhile to leave.
  void close_all();
  // The calls that completed with errc::closed: {never written, written}.
  std::pair<std::size_t, std::size_t> closed_counts() const {
    const std::lock_guard lock(mutex_);
    return {unsent_, unanswered_};
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  request_base* head_ = nullptr;  // intrusive list through request_base::live_prev_ / live_next_
  std::atomic<std::size_t> count_{0};
  std::atomic<bool> watched_{false};
  std::size_t unsent_ = 0, unanswered_ = 0;
};

using deadline_map = std::multimap<std::chrono::steady_clock::time_point, std::weak_ptr<request_base>>;

class request_base : public std::enable_shared_from_this<request_base> {
 public:
  request_base() = default;
  request_base(const request_base&) = delete;
  request_base& operator=(const request_base&) = delete;
  virtual ~request_base() {
    if (auto counted = live_.exchange(nullptr, std::memory_order_seq_cst)) counted->remove(*this, false);
  }

  // Completes the request unless something else did first; returns whether this call did. Thread-safe.
  bool try_finish(boost::system::error_code ec, reply&& r) noexcept {
    if (done_.exchange(true, std::memory_order_seq_cst)) return false;
    if (auto counted = live_.exchange(nullptr, std::memory_order_seq_cst)) counted->remove(*this, ec == errc::closed);
    deliver(ec, std::move(r));
    return true;
  }
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }

  // The connection that queues the request registers it in `calls` until it completes (whoever completes it, on any
  // thread, even concurrently with this call). Call once, before the request is queued.
  void count_in(const std::shared_ptr<live_calls>& calls) noexcept {
    calls->add(*this);
    live_.store(calls, std::memory_order_seq_cst);
    // Completed meanwhile: try_finish may have run before the store and missed the registry; whoever takes it out of
    // live_ (try_finish or this) unregisters the request, exactly once (seq_cst: one of the two sees the other).
    if (done_.load(std::memory_order_seq_cst)) {
      if (auto counted = live_.exchange(nullptr, std::memory_order_seq_cst)) counted->remove(*this, false);
    }
  }

  std::string payload;                                            // the RESP bytes; set before submission
  std::optional<std::chrono::steady_clock::time_point> deadline;  // enforced by the connection's deadline timer
  // Replies to drop before the one that completes the request (payload = that many commands + the call's); set before
  // submission, then touched only on the connection's strand.
  std::uint8_t skip_replies = 0;
  // A pipeline's commands (0: not a pipeline): that many replies complete the request, as one array. Set before
  // submission; `gathered` is then touched only on the connection's strand.
  std::uint32_t gather = 0;
  std::vector<reply> gathered;
  // Set by the connection's strand when the request is written (close() counts it as unanswered rather than unsent).
  std::atomic<bool> written{false};
  // Touched only on the connection's strand: the request's entry in the deadline map, if any.
  bool has_deadline_entry = false;
  deadline_map::iterator deadline_entry;

 protected:
  virtual void deliver(boost::system::error_code ec, reply&& r) noexcept = 0;

 private:
  std::atomic<bool> done_{false};
  std::atomic<std::shared_ptr<live_calls>> live_;  // see count_in
  friend class live_calls;
  request_base* live_prev_ = nullptr;  // guarded by live_calls' mutex
  request_base* live_next_ = nullptr;
};

inline void live_calls::add(request_base& r) noexcept {
  const std::lock_guard lock(mutex_);
  r.live_prev_ = nullptr;
  r.live_next_ = head_;
  if (head_ != nullptr) head_->live_prev_ = &r;
  head_ = &r;
  count_.fetch_add(1, std::memory_order_seq_cst);
}

inline void live_calls::remove(request_base& r, bool closed) noexcept {
  const std::lock_guard lock(mutex_);
  if (r.live_prev_ != nullptr) {
    r.live_prev_->live_next_ = r.live_next_;
  } else {
    head_ = r.live_next_;
  }
  if (r.live_next_ != nullptr) r.live_next_->live_prev_ = r.live_prev_;
  r.live_prev_ = r.live_next_ = nullptr;
  if (closed) ++(r.written.load(std::memory_order_acquire) ? unanswered_ : unsent_);
  if (count_.fetch_sub(1, std::memory_order_seq_cst) == 1 && watched_.load(std::memory_order_seq_cst)) {
    cv_.notify_all();
  }
}

inline void live_calls::close_all() {
  std::vector<std::shared_ptr<request_base>> calls;
  {
    const std::lock_guard lock(mutex_);
    for (request_base* r = head_; r != nullptr; r = r->live_next_) {
      if (auto alive = r->weak_from_this().lock()) calls.push_back(std::move(alive));  // not one being destroyed
    }
  }
  for (auto& r : calls) r->try_finish(admit::asio::to_error_code(errc::closed), reply());
  calls.clear();
  // Those completed or destroyed on other threads meanwhile leave within their try_finish or destructor.
  (void)wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(1));
}

// A request whose completion is an Asio handler — void(error_code, reply), or void(error_code) when WithReply is
// false (connect) — posted to the handler's associated executor (work counted while pending), never called from
// inside the initiating function.
template <class Handler, bool WithReply = true>
class async_request final : public request_base {
 public:
  // `fallback` (the connection's executor) runs the handler when it has no associated executor.
  async_request(Handler&& handler, const boost::asio::any_io_executor& fallback)
      : handler_(std::move(handler)),
        work_(boost::asio::prefer(boost::asio::get_associated_executor(handler_, fallback),
                                  boost::asio::execution::outstanding_work.tracked)) {}

  // Connects the handler's cancellation slot: terminal and partial cancellation complete the call with
  // operation_aborted (a command already written may still run; its reply is discarded). Total cancellation is not
  // supported — a written command may have side effects — and is ignored.
  void attach_cancellation() {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.template emplace<cancel_handler>(weak_from_this());
  }

 private:
  using work_executor = std::decay_t<decltype(boost::asio::prefer(
      boost::asio::get_associated_executor(std::declval<Handler&>(), std::declval<boost::asio::any_io_executor>()),
      boost::asio::execution::outstanding_work.tracked))>;

  struct cancel_handler {
    explicit cancel_handler(std::weak_ptr<request_base> r) noexcept : req(std::move(r)) {}
    std::weak_ptr<request_base> req;
    void operator()(boost::asio::cancellation_type_t type) const {
      using boost::asio::cancellation_type;
      if ((type & (cancellation_type::terminal | cancellation_type::partial)) == cancellation_type::none) return;
      if (auto r = req.lock()) r->try_finish(boost::asio::error::operation_aborted, reply());
    }
  };

  // The posted completion. Destroyed unrun (the execution context shut down), it only disconnects the slot.
  class completion {
   public:
    completion(std::shared_ptr<async_request> self, boost::system::error_code ec, reply&& r) noexcept
        : self_(std::move(self)), ec_(ec), reply_(std::move(r)) {}
    completion(completion&&) noexcept = default;
    completion& operator=(completion&&) = delete;
    ~completion() {
      if (self_) self_->clear_slot();
    }
    void operator()() {
      std::shared_ptr<async_request> self = std::move(self_);
      self->clear_slot();
      Handler handler = std::move(self->handler_);
      [[maybe_unused]] const work_executor work =
          std::move(self->work_);  // keeps the work counted until the handler returns
      self.reset();
      if constexpr (WithReply) {
        std::move(handler)(ec_, std::move(reply_));
      } else {
        std::move(handler)(ec_);
      }
    }

   private:
    std::shared_ptr<async_request> self_;
    boost::system::error_code ec_;
    reply reply_;
  };

  void clear_slot() noexcept {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
  }

  void deliver(boost::system::error_code ec, reply&& r) noexcept override {
    auto self = std::static_pointer_cast<async_request>(shared_from_this());
    const work_executor executor = work_;
    boost::asio::post(executor, completion(std::move(self), ec, std::move(r)));
  }

  Handler handler_;
  work_executor work_;
};

// A request made by a blocked thread: the thread waits on a condition variable and enforces its own deadline (leave
// `deadline` empty when submitting it to a connection).
class blocking_request final : public request_base {
 public:
  // Waits for the completion or until `until` (std::nullopt: no limit), when it completes the request with
  // errc::timeout itself unless something else did first. Returns the completion's error and reply. Call once.
  std::pair<boost::system::error_code, reply> wait(std::optional<std::chrono::steady_clock::time_point> until) {
    std::unique_lock lock(mutex_);
    if (until && !cv_.wait_until(lock, *until, [&] { return ready_; })) {
      lock.unlock();
      try_finish(admit::asio::to_error_code(errc::timeout),
                 reply());  // loses if the reply came meanwhile; either way ready_
      lock.lock();
    }
    cv_.wait(lock, [&] { return ready_; });
    return {error_, std::move(value_)};
  }

 private:
  void deliver(boost::system::error_code ec, reply&& r) noexcept override {
    {
      std::lock_guard lock(mutex_);
      error_ = ec;
      value_ = std::move(r);
      ready_ = true;
    }
    cv_.notify_one();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  bool ready_ = false;
  boost::system::error_code error_;
  reply value_;
};

}  // namespace admit::redis::detail
