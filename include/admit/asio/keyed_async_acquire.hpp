// admit/asio/keyed_async_acquire.hpp — wait for permits of one key of an admit::keyed_concurrency_limiter without
// blocking a thread: Asio completion tokens, per-operation cancellation, FIFO with the key's blocking waiters.
//
//   auto [ec, p] = co_await admit::asio::async_acquire(per_client, client_ip, 1, net::as_tuple(net::use_awaitable));
//   if (!ec) co_await handle(request);   // p releases the key's permit when it goes out of scope
//
// Completion signature: void(boost::system::error_code, Limiter::permit). Errors: operation_aborted (cancelled
// through the handler's cancellation slot), and as an admit::errc: queue_full (the key's max_waiters already wait,
// or a new key refused at the key cap), exceeds_capacity (n above the per-key limit), closed, timeout (the limiter's
// default timeout, or async_acquire_for's).
//
// It is <admit/asio/async_acquire.hpp>'s operation on the key's semaphore, with every guarantee stated there (one
// FIFO queue with the blocking waiters, the handler called exactly once through a post on its executor, cancellation
// of every type, a grant racing the cancel wins, shutdown without leaks). The key's entry is referenced from the
// start of the operation until its permit is released or the operation fails (or is destroyed unrun), so it is never
// freed under a waiting operation. The key is looked up when the operation starts (for deferred tokens: when it is
// launched); it is copied into the operation until then. Each acquisition is recorded once in the limiter's metrics.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "admit/asio/detail/acquire_operation.hpp"
#include "admit/asio/detail/converting_handler.hpp"
#include "admit/asio/error_code.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/keyed_concurrency_limiter.hpp"

namespace admit::asio {

namespace detail {

// Holds the reference to the key's entry: adopts the granted permits into the keyed permit, or drops the reference.
template <class Limiter>
class keyed_convert {
 public:
  using entry_ref = typename Limiter::entry_ref;
  explicit keyed_convert(entry_ref ref) noexcept : ref_(ref) {}
  keyed_convert(keyed_convert&& other) noexcept : ref_(std::exchange(other.ref_, entry_ref{})) {}
  keyed_convert& operator=(keyed_convert&&) = delete;
  ~keyed_convert() { std::move(ref_).drop(); }

  template <class Handler>
  void operator()(Handler&& handler, boost::system::error_code ec, admit::permit p) && {
    typename Limiter::permit out;
    if (!ec) {
      out = std::move(ref_).adopt(std::move(p));
    } else {
      std::move(ref_).drop();
    }
    std::move(handler)(ec, std::move(out));
  }

 private:
  entry_ref ref_;
};

template <class Limiter>
struct keyed_recorder {
  Limiter* limiter;
  void operator()(errc outcome, std::int64_t n, std::chrono::nanoseconds waited) const {
    limiter->record(outcome, n, waited);
  }
};

template <class Limiter>
struct initiate_keyed_acquire {
  template <class Handler>
  void operator()(Handler&& handler, Limiter* limiter, const typename Limiter::key_type& key, std::int64_t n,
                  std::optional<typename Limiter::time_point> deadline) const {
    using clock = typename Limiter::clock_type;
    errc why{};
    typename Limiter::entry_ref ref;
    if (n > limiter->limit()) {
      why = limiter->is_closed() ? errc::closed : errc::exceeds_capacity;
    } else {
      ref = limiter->native_ref(key, why);
    }
    if (ref.e == nullptr) {  // refused before waiting: complete through a post, never inside this call
      limiter->record(why, n, std::chrono::nanoseconds::zero());
      auto executor = boost::asio::get_associated_executor(handler);
      boost::asio::post(executor, [h = std::forward<Handler>(handler), why]() mutable {
        std::move(h)(to_error_code(why), typename Limiter::permit{});
      });
      return;
    }
    admit::detail::semaphore_state& state = ref.state();
    using wrapped = converting_handler<std::decay_t<Handler>, keyed_convert<Limiter>>;
    acquire_operation<wrapped, clock, keyed_recorder<Limiter>>::start(
        wrapped(std::forward<Handler>(handler), keyed_convert<Limiter>(ref)), state, n, deadline,
        keyed_recorder<Limiter>{limiter});
  }
};

template <class Limiter, class CompletionToken>
auto initiate_keyed(Limiter& limiter, typename Limiter::key_type key, std::int64_t n,
                    std::optional<typename Limiter::time_point> deadline, CompletionToken&& token) {
  admit::detail::semaphore_state::check_count("n", n, 1);
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, typename Limiter::permit)>(
      initiate_keyed_acquire<Limiter>{}, token, &limiter, std::move(key), n, deadline);
}

}  // namespace detail

// Waits for n permits (n >= 1; throws std::invalid_argument otherwise, before starting) of `key`, at most the
// limiter's default timeout. See the top of the file. Thread safety: may be called concurrently with every member of
// the limiter.
template <class Key, steady_clock_like Clock, class Hash, class Eq, class CompletionToken>
auto async_acquire(basic_keyed_concurrency_limiter<Key, Clock, Hash, Eq>& limiter, std::type_identity_t<Key> key,
                   std::int64_t n, CompletionToken&& token) {
  std::optional<typename Clock::time_point> deadline;
  if (limiter.default_timeout() != std::chrono::nanoseconds::max()) {
    deadline = admit::detail::deadline_after<Clock>(Clock::now(), limiter.default_timeout());
  }
  return detail::initiate_keyed(limiter, std::move(key), n, deadline, std::forward<CompletionToken>(token));
}

// As async_acquire, at most `timeout` (instead of the default timeout; zero or negative: do not wait).
template <class Key, steady_clock_like Clock, class Hash, class Eq, class Rep, class Period, class CompletionToken>
auto async_acquire_for(basic_keyed_concurrency_limiter<Key, Clock, Hash, Eq>& limiter, std::type_identity_t<Key> key,
                       std::chrono::duration<Rep, Period> timeout, std::int64_t n, CompletionToken&& token) {
  return detail::initiate_keyed(limiter, std::move(key), n, admit::detail::deadline_after<Clock>(Clock::now(), timeout),
                                std::forward<CompletionToken>(token));
}

}  // namespace admit::asio
