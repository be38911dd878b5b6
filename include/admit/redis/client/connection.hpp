// admit/redis/client/connection.hpp — one connection to a Redis server (TCP or unix socket) shared by many callers:
// concurrent commands are pipelined (batched into one write; replies matched in order), with a blocking and an Asio
// asynchronous interface, per-call deadlines, and reconnection with backoff.
//
//   admit::redis::connection conn(io.get_executor(), "redis://127.0.0.1:6379/0");
//   auto [ec, r] = co_await conn.async_execute("INCR", "hits", boost::asio::as_tuple(boost::asio::use_awaitable));
//
// Guarantees.
// - Pipelining: calls from any threads and coroutines queue in one FIFO; whenever no write is in progress, everything
//   queued is written in one write (at most ~256 KiB per write) and the replies are matched to the calls in order.
//   No call waits for another's reply before being sent. A write does not wait for a busy executor either: once 16
//   calls are queued behind a drain that has not run yet (e.g. the completions of one read each issuing the next
//   call), they are written at once, so that the server works while the client completes the rest.
// - Completion: a call completes exactly once, with (error_code, reply). A Redis error reply (NOSCRIPT, MOVED, ...)
//   is a value with an empty error_code. Errors: errc::timeout (deadline passed; a late reply is read and discarded),
//   errc::outcome_unknown (connection lost after the command was possibly written: it may or may not have run — it is
//   never retried), errc::closed, boost::asio::error::operation_aborted (cancelled through the handler's slot).
// - Asynchronous handlers run on their associated executor (the connection's executor when they have none) through a
//   post, never inside the initiating call. Blocking calls wake the calling thread directly.
// - Connecting: the first call (or connect()) starts it; each attempt is bounded by connect_timeout and runs resolve,
//   connect, the TLS handshake (rediss://), AUTH and SELECT. Calls made while not connected wait (bounded by their
//   deadlines) and are written once connected; they were never sent, so they are safe (one that times out so fails with
//   errc::timeout, and last_connect_error() says why the connection is down). After a failure or a lost connection the
//   connection retries forever with exponential, capped, jittered backoff until closed.
// - Threads: the connection's I/O runs on a strand of its executor; every member is thread-safe. Blocking members
//   must not be called from a thread running the connection's executor (they would wait for themselves).
// - Closing: close() and the destructor deliver the calls made before them (written and answered, within
//   connection_options::close_timeout) and report what they could not (close_result).
// - Lifetime: destroy (or close) the connection before its execution context. Handles passed to asynchronous calls
//   (the command) are copied; nothing needs to outlive the call.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include "admit/detail/deadline.hpp"
#include "admit/errc.hpp"
#include "admit/redis/client/client.hpp"
#include "admit/redis/client/command.hpp"
#include "admit/redis/client/detail/request.hpp"
#include "admit/redis/client/options.hpp"
#include "admit/redis/client/pipeline.hpp"
#include "admit/redis/client/reply.hpp"

namespace admit::redis {

// Counters since the connection was created (relaxed reads; each is exact once the connection is quiet).
struct connection_statistics {
  std::uint64_t writes = 0;             // write operations (each carries one batch)
  std::uint64_t commands_written = 0;   // calls in those batches (commands_written / writes = batching; a pipeline: 1)
  std::uint64_t replies = 0;            // calls answered (including discarded replies; a pipeline's replies: 1)
  std::uint64_t discarded_replies = 0;  // late replies of calls that had already timed out or been cancelled
  std::uint64_t connects = 0;           // successful connections (handshake included)
  std::uint64_t connection_losses = 0;  // established connections that were lost
};

// What a close could not deliver. close() writes the calls queued before it and waits for their replies, up to its
// deadline; the calls still unanswered then complete with errc::closed and are counted here.
struct close_result {
  std::size_t unsent = 0;      // never written: they did not run
  std::size_t unanswered = 0;  // written, no reply by the deadline: they may have run or not
  // False when close could not wait: it ran on a thread of the connection's executor (see close()). The delivery then
  // goes on in the background while the executor runs, and the counts above are not known (zero).
  bool waited = true;
  // True when every call made before the close was answered (or completed otherwise: deadline, cancellation).
  bool delivered() const noexcept { return waited && unsent == 0 && unanswered == 0; }
};

namespace detail {
class connection_impl;
std::shared_ptr<connection_impl> make_connection_impl(boost::asio::any_io_executor ex, connection_options options);
// `cmd` in RESP (detail::append_command, pipeline.hpp); throws std::invalid_argument for an empty command.
std::string format_command(const command& cmd);
void submit(connection_impl& impl, std::shared_ptr<request_base> req);
void add_connect_waiter(connection_impl& impl, std::shared_ptr<request_base> req);
result execute_blocking(connection_impl& impl, const command& cmd,
                        std::optional<std::chrono::steady_clock::time_point> deadline);
std::error_code connect_blocking(connection_impl& impl, std::optional<std::chrono::steady_clock::time_point> deadline);
// Starts the close (once; later calls do nothing), then waits for its outcome (any number of times).
void begin_close(connection_impl& impl, std::optional<std::chrono::steady_clock::time_point> deadline);
close_result await_close(connection_impl& impl, std::optional<std::chrono::steady_clock::time_point> deadline);
// Starts the close; when `wait`, waits for its outcome.
close_result close(connection_impl& impl, std::optional<std::chrono::steady_clock::time_point> deadline, bool wait);
// Whether the calling thread may be running `ex`, so that blocking it for a reply could hang: exact for an
// io_context's executor (with or without tracked work), a thread_pool's and strands of them; true for an executor of
// another kind (it cannot be told). The connection's close() and the semaphore's blocking releases ask it.
bool running_in_this_thread(const boost::asio::any_io_executor& ex) noexcept;
connection_statistics statistics(const connection_impl& impl) noexcept;
bool is_connected(const connection_impl& impl) noexcept;
std::string last_error(const connection_impl& impl);
std::error_code last_connect_error(const connection_impl& impl);
// What a failed name resolution (Asio's resolver error `ec`) is: unknown_host when the name does not exist
// (host_not_found: EAI_NONAME, EAI_NODATA; service_not_found), connection_failed for anything else — the resolver
// could not answer now (host_not_found_try_again: EAI_AGAIN, a DNS server down or slow; no_recovery: EAI_FAIL), or a
// local failure. Waiting may fix the second, not the first.
errc resolve_failure(const boost::system::error_code& ec) noexcept;
}  // namespace detail

class connection final : public client {
 public:
  // Does not connect yet (the first call or connect() does). Throws std::invalid_argument for invalid options or URL.
  connection(executor_type ex, connection_options options)
      : executor_(std::move(ex)),
        options_(std::move(options)),
        impl_(detail::make_connection_impl(executor_, options_)) {}
  connection(executor_type ex, std::string_view url) : connection(std::move(ex), parse_url(url)) {}

  // Closes the connection as close() does, waiting for the flush (up to options().close_timeout) — except on a thread
  // that runs the connection's executor, where it cannot wait: there the flush goes on in the background while the
  // executor runs.
  ~connection() override {
    detach();
    (void)detail::close(*impl_, deadline_after(options_.close_timeout), !detail::running_in_this_thread(executor_));
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // The executor given at construction (the connection's I/O runs on a strand of it).
  executor_type get_executor() const noexcept override { return executor_; }
  const connection_options& options() const noexcept { return options_; }

  // now + options().command_timeout, or none when that is nanoseconds::max().
  std::optional<clock::time_point> default_deadline() const noexcept override {
    return deadline_after(options_.command_timeout);
  }

  // Completes when connected (handshake done) — at once if already — or with the error of the current attempt (or
  // of the next one, while waiting out a backoff): errc::connection_refused, unknown_host, connection_failed,
  // connect_timeout, tls_handshake_failed, tls_verify_failed, auth_failed, select_failed or protocol_error;
  // last_error() has the system's, OpenSSL's or the server's words.
  // Completion: void(error_code). Thread-safe.
  template <class CompletionToken>
  auto async_connect(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [impl = impl_, ex = executor_](auto handler) {
          auto req =
              std::make_shared<detail::async_request<std::decay_t<decltype(handler)>, false>>(std::move(handler), ex);
          req->attach_cancellation();
          detail::add_connect_waiter(*impl, std::move(req));
        },
        token);
  }
  // Blocking connect; the same results.
  std::error_code connect() { return detail::connect_blocking(*impl_, std::nullopt); }
  // The same, giving up at `deadline` with errc::timeout (the attempt goes on without this caller).
  std::error_code connect_until(clock::time_point deadline) { return detail::connect_blocking(*impl_, deadline); }

  // async_execute(arg, arg..., token) or async_execute(command, token): sends the command with the default deadline
  // (options().command_timeout). Arguments are string-like or integers. Completion: void(error_code, reply).
  // Throws std::invalid_argument (before starting) for an empty command.
  template <class... ArgsThenToken>
  auto async_execute(ArgsThenToken&&... args) {
    return split_and_initiate(default_deadline(), std::forward<ArgsThenToken>(args)...);
  }
  // The same with a deadline of now + timeout (a zero or negative timeout completes with errc::timeout unsent).
  template <class Rep, class Period, class... ArgsThenToken>
  auto async_execute_for(std::chrono::duration<Rep, Period> timeout, ArgsThenToken&&... args) {
    return split_and_initiate(deadline_after(timeout), std::forward<ArgsThenToken>(args)...);
  }
  // The same with an explicit deadline (std::nullopt: none). A deadline already passed completes with errc::timeout
  // and sends nothing.
  template <class... ArgsThenToken>
  auto async_execute_until(std::optional<clock::time_point> deadline, ArgsThenToken&&... args) {
    return split_and_initiate(deadline, std::forward<ArgsThenToken>(args)...);
  }

  // A pipeline: sends `commands` back to back, in one write with no other call's command between them, and completes
  // once, when the last reply is in, with an array reply of each command's reply in order. A Redis error reply is one
  // element (the other commands still run). Not a transaction: other clients' commands may run between them. The
  // deadline and the errors are async_execute_until's, for the whole pipeline (errc::outcome_unknown: any of the
  // commands may have run). Completion: void(error_code, reply). Throws std::invalid_argument (before starting) for
  // an empty list or an empty command.
  template <class CompletionToken>
  auto async_execute_pipeline_until(std::optional<clock::time_point> deadline, const std::vector<command>& commands,
                                    CompletionToken&& token) {
    if (commands.empty()) throw std::invalid_argument("redis pipeline: no commands");
    pipeline p;
    for (const command& c : commands) p.add(c);
    return async_execute_pipeline_until(deadline, std::move(p), std::forward<CompletionToken>(token));
  }
  // The same for commands already encoded (pipeline.hpp): no copy of them is made. Throws std::invalid_argument
  // (before starting) for an empty pipeline.
  template <class CompletionToken>
  auto async_execute_pipeline_until(std::optional<clock::time_point> deadline, pipeline commands,
                                    CompletionToken&& token) {
    if (commands.empty()) throw std::invalid_argument("redis pipeline: no commands");
    const auto count = static_cast<std::uint32_t>(commands.size());
    return initiate_payload(deadline, std::move(commands).payload(), count, std::forward<CompletionToken>(token));
  }

  // Blocking forms: wait on the calling thread (which must not run the connection's executor) for the reply or the
  // deadline. execute uses the default deadline.
  template <class... Args>
  result execute(const Args&... args) {
    return detail::execute_blocking(*impl_, detail::make_command(args...), default_deadline());
  }
  template <class Rep, class Period, class... Args>
  result execute_for(std::chrono::duration<Rep, Period> timeout, const Args&... args) {
    return detail::execute_blocking(*impl_, detail::make_command(args...), deadline_after(timeout));
  }
  template <class... Args>
  result execute_until(std::optional<clock::time_point> deadline, const Args&... args) {
    return detail::execute_blocking(*impl_, detail::make_command(args...), deadline);
  }

  // Stops for good, delivering first what was asked before: calls made before close() are still written (connecting
  // if need be) and their replies awaited, until options().close_timeout has passed; then every call still
  // unanswered completes with errc::closed — if written, it may still run — and is counted in the result
  // (result.delivered() is true when none was left). Calls made from the start of close() on, and connect waiters,
  // complete with errc::closed at once. Blocks until done; a fire-and-forget call made just before close() is thus
  // written and answered before close() returns. A call waiting on a blocking command (BLPOP 0...) holds close until
  // its own deadline or close's; close_for(0s) drops everything at once.
  // At the deadline close() completes what is left from the calling thread, so it returns on time even if the
  // executor does not run. Thread-safe and idempotent: a later close() waits in the same way (with its own deadline)
  // and counts every call closed so far. Must not be called from a thread that runs the connection's executor (the
  // I/O could not progress): where that is detected (io_context, thread_pool and strands of them) close() does not
  // wait and returns {.waited = false}.
  close_result close() { return close_until(deadline_after(options_.close_timeout)); }
  // The same with a deadline of now + timeout (zero or negative: drop what is unanswered at once).
  template <class Rep, class Period>
  close_result close_for(std::chrono::duration<Rep, Period> timeout) {
    return close_until(deadline_after(timeout));
  }
  // The same with an explicit deadline (std::nullopt: none — wait until every call is answered).
  close_result close_until(std::optional<clock::time_point> deadline) {
    return detail::close(*impl_, deadline, !detail::running_in_this_thread(executor_));
  }

  bool is_connected() const noexcept { return detail::is_connected(*impl_); }
  connection_statistics statistics() const noexcept { return detail::statistics(*impl_); }
  // The last connection-level failure in words (e.g. the server's answer to AUTH), empty if none.
  std::string last_error() const { return detail::last_error(*impl_); }
  // Why the connection last failed: the error of the last failed attempt (as async_connect said it) or of the last
  // lost connection (errc::connection_lost, or protocol_error when the server sent what is not RESP); empty if it
  // never failed. While is_connected() is false it says why the connection is down: a call that times out then
  // fails with errc::timeout (it was never sent), and this has the cause (connection_refused, unknown_host,
  // auth_failed, ...). Thread-safe.
  std::error_code last_connect_error() const { return detail::last_connect_error(*impl_); }

 private:
  void do_async_execute(std::shared_ptr<detail::request_base> req, const command& cmd) override {
    req->payload = detail::format_command(cmd);
    detail::submit(*impl_, std::move(req));
  }
  result do_execute(std::optional<clock::time_point> deadline, const command& cmd) override {
    return detail::execute_blocking(*impl_, cmd, deadline);
  }

  template <class Rep, class Period>
  static std::optional<clock::time_point> deadline_after(std::chrono::duration<Rep, Period> timeout) noexcept {
    return admit::detail::optional_deadline_after<clock>(clock::now(), timeout);
  }

  template <class... ArgsThenToken>
  auto split_and_initiate(std::optional<clock::time_point> deadline, ArgsThenToken&&... args) {
    constexpr std::size_t n = sizeof...(ArgsThenToken);
    static_assert(n >= 2, "async_execute(command arguments..., completion token)");
    auto all = std::forward_as_tuple(std::forward<ArgsThenToken>(args)...);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return initiate(deadline, detail::make_command(std::get<I>(all)...), std::get<n - 1>(std::move(all)));
    }
    (std::make_index_sequence<n - 1>{});
  }

  template <class CompletionToken>
  auto initiate(std::optional<clock::time_point> deadline, const command& cmd, CompletionToken&& token) {
    return initiate_payload(deadline, detail::format_command(cmd), 0, std::forward<CompletionToken>(token));
  }
  // `gather`: the replies of a pipeline (0: one command).
  template <class CompletionToken>
  auto initiate_payload(std::optional<clock::time_point> deadline, std::string payload, std::uint32_t gather,
                        CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, reply)>(
        [impl = impl_, ex = executor_](auto handler, std::optional<clock::time_point> when, std::string bytes,
                                       std::uint32_t replies) {
          auto req = std::make_shared<detail::async_request<std::decay_t<decltype(handler)>>>(std::move(handler), ex);
          req->payload = std::move(bytes);
          req->gather = replies;
          req->deadline = when;
          req->attach_cancellation();
          detail::submit(*impl, std::move(req));
        },
        token, deadline, std::move(payload), gather);
  }

  executor_type executor_;
  connection_options options_;
  std::shared_ptr<detail::connection_impl> impl_;
};

}  // namespace admit::redis
