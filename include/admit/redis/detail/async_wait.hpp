// admit/redis/detail/async_wait.hpp — what the public headers' asynchronous waits (redis::semaphore's and
// redis::admission's async_acquire, the rate limiters' async waits) share: the posted completion, and the waiting
// operation's start and cancellation (src/redis/semaphore/waiter.cpp). Not part of the API.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

namespace admit::redis::detail {

// The completion of an asynchronous operation, to call once from any thread: it posts handler(args...) through the
// handler's associated executor (`fallback` when it has none), never inline, with that executor's outstanding work
// counted from this call until the handler has run. The handler and the counted work travel in the posted function,
// so the calling thread touches nothing of the handler's executor after the post (a context run with run_one and
// destroyed right after the handler is safe). The handler's cancellation slot, if the operation connected it, is
// cleared before the handler runs.
template <class... Args, class Handler>
std::function<void(Args...)> posted_completion(Handler handler, const boost::asio::any_io_executor& fallback) {
  const auto associated = boost::asio::get_associated_executor(handler, fallback);
  using work_type =
      std::decay_t<decltype(boost::asio::prefer(associated, boost::asio::execution::outstanding_work.tracked))>;
  struct pending {
    Handler handler;
    work_type work;
  };
  auto p = std::make_shared<pending>(
      pending{std::move(handler), boost::asio::prefer(associated, boost::asio::execution::outstanding_work.tracked)});
  return [p](Args... args) {
    // Posted through an untracked copy of the counted work: this function keeps no executor of the handler's (the
    // completion object that owns it may outlive the handler's io_context), and the counted work travels in p.
    const auto executor = boost::asio::prefer(p->work, boost::asio::execution::outstanding_work.untracked);
    boost::asio::post(executor, [p, ... args = std::move(args)]() mutable {
      Handler h = std::move(p->handler);
      [[maybe_unused]] const work_type work = std::move(p->work);  // released once the handler has run
      auto slot = boost::asio::get_associated_cancellation_slot(h);
      if (slot.is_connected()) slot.clear();
      std::move(h)(std::move(args)...);
    });
  };
}
// A waiting acquisition in a semaphore's queue (waiter.cpp): started once; cancel() gives up with errc::cancelled
// (thread-safe, any number of times, also after it completed).
class async_acquire_op;
void start(const std::shared_ptr<async_acquire_op>& op);
void cancel(const std::shared_ptr<async_acquire_op>& op);
// Connects `slot` (a handler's, if connected) to `op`: a terminal cancellation cancels it.
template <class Slot>
void cancel_on_terminal(Slot slot, const std::shared_ptr<async_acquire_op>& op) {
  if (!slot.is_connected()) return;
  slot.assign([weak = std::weak_ptr<async_acquire_op>(op)](boost::asio::cancellation_type_t type) {
    if ((type & boost::asio::cancellation_type::terminal) == boost::asio::cancellation_type::none) return;
    if (auto o = weak.lock()) cancel(o);
  });
}

}  // namespace admit::redis::detail
