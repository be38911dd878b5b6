// admit/redis/client/client.hpp — what the distributed limiters talk to: something that sends one command to the right
// Redis server and completes with its reply. admit::redis::connection (one server) and admit::redis::cluster (a Redis
// Cluster, routing each command by its key) are clients.
//
//   void count(admit::redis::client& redis) { redis.async_execute_command(std::nullopt, {"INCR", "{app}:hits"}, h); }
//   admit::redis::gcra limiter(redis, "api", admit::rate::per_second(100), 20);   // a connection or a cluster
//
// Why an interface and not a template parameter: the limiters are compiled once (src/redis/*.cpp), and the cost of the
// indirection (one virtual call per command; the handler is type-erased in the request object every call allocates
// anyway) is nothing next to a round trip to Redis.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <system_error>
#include <type_traits>
#include <utility>

#include "admit/errc.hpp"
#include "admit/redis/client/command.hpp"
#include "admit/redis/client/detail/request.hpp"
#include "admit/redis/client/reply.hpp"

namespace admit::redis {

class client;

namespace detail {
// What a client shares with its client_links: whether it still exists.
struct client_anchor {
  explicit client_anchor(client* c) noexcept : target(c) {}
  std::shared_mutex mutex;
  client* target;  // guarded by mutex; null from the start of the client's destruction
};
}  // namespace detail

// The outcome of a blocking call: an I/O error, or a reply (which may be a Redis error reply).
struct [[nodiscard]] result {
  std::error_code error;
  reply value;
  // True when a reply came and it is not an error reply.
  bool ok() const noexcept { return !error && !value.is_error(); }
};

class client {
 public:
  using executor_type = boost::asio::any_io_executor;
  using clock = std::chrono::steady_clock;

  virtual ~client() = default;  // a final client calls detach() first

  // The executor the client's operations complete on when a handler has none of its own.
  virtual executor_type get_executor() const noexcept = 0;
  // now + the client's default command timeout, or none.
  virtual std::optional<clock::time_point> default_deadline() const noexcept = 0;

  // Sends `cmd` with a deadline (std::nullopt: none). Completion: void(error_code, reply), exactly once, through the
  // handler's associated executor (the client's when it has none), never inside this call. The errors and their
  // meaning are connection::async_execute's (errc::timeout, errc::outcome_unknown, errc::closed, operation_aborted);
  // a Redis error reply is a value. Cancellation: terminal and partial, through the handler's slot. Thread-safe.
  // Throws std::invalid_argument (before starting) for an empty command. `cmd` is read when the operation starts (a
  // deferred token keeps a copy until then): a connection encodes it at once, without a copy of its own.
  template <class CompletionToken>
  auto async_execute_command(std::optional<clock::time_point> deadline, const command& cmd, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, reply)>(
        [this](auto handler, std::optional<clock::time_point> when, const command& c) {
          do_async_execute(make_request(std::move(handler), when, get_executor()), c);
        },
        token, deadline, cmd);
  }

  // Blocking: waits on the calling thread, which must not run the client's executor, for the reply or the deadline.
  result execute_command(std::optional<clock::time_point> deadline, const command& cmd) {
    return do_execute(deadline, cmd);
  }

 protected:
  client() : anchor_(std::make_shared<detail::client_anchor>(this)) {}
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // The first thing a client's destructor does (before it closes anything): calls through client_links made from it
  // fail from then on instead of reaching the object being destroyed. Waits for a call being handed over right now.
  void detach() noexcept {
    const std::unique_lock lock(anchor_->mutex);
    anchor_->target = nullptr;
  }

  // Starts `cmd` for `req` (its deadline set, its cancellation attached): the implementation completes it with
  // req->try_finish(error, reply) exactly once, or leaves that to the deadline or a cancellation (whichever is first
  // wins; the others do nothing). Must not complete the handler inline (async_request::deliver posts it).
  virtual void do_async_execute(std::shared_ptr<detail::request_base> req, const command& cmd) = 0;
  virtual result do_execute(std::optional<clock::time_point> deadline, const command& cmd) = 0;

 private:
  friend class client_link;
  template <class Handler>
  static std::shared_ptr<detail::request_base> make_request(Handler&& handler, std::optional<clock::time_point> when,
                                                            const executor_type& fallback) {
    auto req = std::make_shared<detail::async_request<std::decay_t<Handler>>>(std::forward<Handler>(handler), fallback);
    req->deadline = when;
    req->attach_cancellation();
    return req;
  }

  std::shared_ptr<detail::client_anchor> anchor_;
};

// A handle on a client for work that may outlive it — work the client's owner cannot see, such as a semaphore's lease
// renewals and clean-up calls, whose handlers make further calls. A call through the link while the client lives is
// the client's async_execute_command; from the start of the client's destruction on it completes with errc::closed
// instead of reaching a destroyed object. Copyable; thread-safe.
class client_link {
 public:
  using executor_type = client::executor_type;
  using clock = client::clock;

  explicit client_link(client& c) : anchor_(c.anchor_), executor_(c.get_executor()) {}

  executor_type get_executor() const noexcept { return executor_; }

  template <class CompletionToken>
  auto async_execute_command(std::optional<clock::time_point> deadline, const command& cmd, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, reply)>(
        [anchor = anchor_, ex = executor_](auto handler, std::optional<clock::time_point> when, const command& c) {
          auto req = client::make_request(std::move(handler), when, ex);
          const std::shared_lock lock(anchor->mutex);  // the client is not destroyed while its call is handed over
          if (anchor->target != nullptr) return anchor->target->do_async_execute(std::move(req), c);
          req->try_finish(admit::asio::to_error_code(errc::closed), reply());
        },
        token, deadline, cmd);
  }

 private:
  std::shared_ptr<detail::client_anchor> anchor_;
  executor_type executor_;
};

}  // namespace admit::redis
