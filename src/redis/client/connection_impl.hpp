// connection_impl — the engine behind admit::redis::connection (private to the client's room): one socket on a strand,
// a FIFO of calls written in batches, hiredis's reader for replies, a deadline map with one timer, and the connect /
// handshake / backoff state machine. Its members are defined in two files: connection.cpp (the calls from any
// thread, the deadlines, writing and reading) and connection_lifecycle.cpp (connecting, TLS, the session's handshake,
// losing the connection and reconnecting, the graceful close).
//
// Threads. submit(), begin_close(), await_close() and add_connect_waiter() run on any thread; they touch only
// `incoming_` (under `mutex_`) and post to the strand. Everything else runs on the strand. A request completes through
// its atomic `done` flag, so a blocked caller's deadline, a cancellation slot and the strand never complete it twice.
#pragma once

#include <hiredis/hiredis.h>

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/host_port.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/detail/backoff.hpp"
#include "sentinel_discovery.hpp"
#include "tls.hpp"

namespace admit::redis::detail {

namespace asio = boost::asio;

class connection_impl : public std::enable_shared_from_this<connection_impl> {
 public:
  using clock = std::chrono::steady_clock;
  using request_ptr = std::shared_ptr<request_base>;
  static constexpr std::size_t read_buffer_bytes = 64 * 1024;

  connection_impl(asio::any_io_executor ex, connection_options options)
      : options_(std::move(options)),
        strand_(asio::make_strand(std::move(ex))),
        socket_(strand_),
        tls_context_(options_.tls ? make_tls_context(options_) : nullptr),
        resolver_(strand_),
        connect_timer_(strand_),
        deadline_timer_(strand_),
        close_timer_(strand_),
        backoff_(options_.reconnect_initial, options_.reconnect_max),
        rng_state_(std::random_device{}()),
        read_buffer_(read_buffer_bytes) {
    if (!options_.sentinel.master_name.empty()) {
      sentinel_ = std::make_shared<sentinel_discovery>(strand_, options_);
    }
  }

  ~connection_impl() {
    if (reader_ != nullptr) redisReaderFree(reader_);
  }

  // Any thread.
  void submit(request_ptr req);

  // Any thread.
  void add_connect_waiter(request_ptr req);

  // Any thread. Starts the graceful close (the first call does; later ones do nothing): from now on new calls
  // complete with errc::closed; what was queued before is still written and its replies awaited until `deadline`
  // (std::nullopt: no limit); then whatever is left completes with errc::closed (finish_close).
  void begin_close(std::optional<clock::time_point> deadline);

  // Any thread, after begin_close. Waits until no call made before the close is left unanswered, or until `deadline`,
  // when this thread completes what is left with errc::closed itself (the strand does the same at the deadline; this
  // does not depend on the executor running). Returns the counts of calls completed with errc::closed.
  close_result await_close(std::optional<clock::time_point> deadline);

  connection_statistics statistics() const noexcept {
    connection_statistics s;
    s.writes = writes_.load(std::memory_order_relaxed);
    s.commands_written = commands_written_.load(std::memory_order_relaxed);
    s.replies = replies_.load(std::memory_order_relaxed);
    s.discarded_replies = discarded_.load(std::memory_order_relaxed);
    s.connects = connects_.load(std::memory_order_relaxed);
    s.connection_losses = losses_.load(std::memory_order_relaxed);
    return s;
  }
  bool is_connected() const noexcept { return connected_.load(std::memory_order_acquire); }
  std::string last_error() const {
    const admit::detail::lock_guard lock(mutex_);
    return last_error_;
  }
  std::error_code last_connect_error() const {
    const admit::detail::lock_guard lock(mutex_);
    return last_connect_error_;
  }

 private:
  enum class state { idle, connecting, handshaking, ready, backoff, closed };
  // role: Sentinel's check that the node is a master; probe: any reply (even an error: NOPERM) will do
  enum class handshake_step { auth, select, role, probe };

  void set_last_error(std::string what) {
    const admit::detail::lock_guard lock(mutex_);
    last_error_ = std::move(what);
  }

  // A failed attempt's error in admit::errc terms: ours as they are; a refused connection (a unix socket path
  // with nothing there included) is connection_refused; any other socket error connection_failed.
  static std::error_code connect_error(const boost::system::error_code& ec) {
    if (const std::error_code ours(ec); ours.category() == error_category()) return ours;
    if (is_tls_error(ec)) return make_error_code(errc::tls_handshake_failed);
    if (ec == asio::error::connection_refused || ec == boost::system::errc::no_such_file_or_directory) {
      return make_error_code(errc::connection_refused);
    }
    return make_error_code(errc::connection_failed);
  }

  // ---- everything below runs on the strand ----

  void drain();

  // Arms deadline_timer_ for the earliest deadline, unless it already waits for a time no later than that: it then
  // fires first, and on_deadlines arms it for what is left. (Most calls' deadlines come after those before them:
  // re-arming at each call would cancel and reschedule the timer at each, about 4,000 instructions a call.)
  void arm_deadline_timer();

  void on_deadlines();

  void drop_deadline(request_base& r);

  void finish(const request_ptr& r, boost::system::error_code ec, reply&& value);

  void flush();

  void start_write();

  void on_written(std::uint64_t gen, const boost::system::error_code& ec);

  void start_read(std::uint64_t gen);

  void on_read(std::uint64_t gen, const boost::system::error_code& ec, std::size_t n);

  void on_reply(reply&& value);

  void start_connect();

  void connect_to(const std::string& host, std::uint16_t port);

  void on_connected(std::uint64_t gen, const boost::system::error_code& ec);

  // TLS: the handshake (within the connect timeout, which is still armed), then the session as over TCP.
  void start_tls_handshake(std::uint64_t gen);

  std::string endpoint() const {
    return options_.unix_path.empty() ? admit::detail::host_port(options_.host, options_.port) : options_.unix_path;
  }

  // The connection is up (TLS included): AUTH and SELECT, then ready. Over TLS a PING is added when nothing else is
  // sent: a server that refuses the client's certificate says so only after the client's side of the handshake (TLS
  // 1.3), and the attempt should fail then, not a caller's first command.
  void start_session(std::uint64_t gen);

  void become_ready();

  void shut_socket();

  // A connection attempt failed (connecting or handshaking): nothing of the callers' was written. Its error is kept
  // (last_connect_error).
  void fail_attempt(const boost::system::error_code& socket_error);

  // The connection failed. Established: every call written (or being written) has an unknown outcome.
  void lose(boost::system::error_code ec, std::string what);

  void schedule_reconnect();

  // The graceful close starts (see begin_close): what is queued is drained into pending_ as usual, connect waiters
  // complete with errc::closed, and the close deadline is armed. An idle connection with calls queued connects.
  void start_closing(std::optional<clock::time_point> deadline);

  // While closing: finishes the close once no call is left unanswered (calls that completed otherwise — deadline,
  // cancellation — are not waited for).
  void check_closing();

  // The end of the connection: the socket closed, every call not answered yet completes with errc::closed.
  void finish_close();

  using tls_stream = asio::ssl::stream<asio::generic::stream_protocol::socket&>;

  const connection_options options_;
  asio::strand<asio::any_io_executor> strand_;
  asio::generic::stream_protocol::socket socket_;
  const std::shared_ptr<asio::ssl::context> tls_context_;  // null without TLS
  std::shared_ptr<tls_stream> tls_;                        // over socket_, one per connection attempt
  bool tls_handshaking_ = false;                           // strand only
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer connect_timer_;   // connect deadline, then backoff delay
  asio::steady_timer deadline_timer_;  // no later than the earliest call deadline (strand only)
  // When deadline_timer_ waits, the time it waits for (strand only).
  std::optional<clock::time_point> deadline_timer_at_;
  asio::steady_timer close_timer_;  // the deadline of a graceful close

  mutable admit::detail::mutex mutex_;
  std::vector<request_ptr> incoming_ ADMIT_GUARDED_BY(mutex_);
  std::size_t incoming_bytes_ ADMIT_GUARDED_BY(mutex_) = 0;  // the payloads of incoming_
  bool drain_posted_ ADMIT_GUARDED_BY(mutex_) = false;
  bool closed_ ADMIT_GUARDED_BY(mutex_) = false;  // close began: new calls are refused
  std::string last_error_ ADMIT_GUARDED_BY(mutex_);
  // Of the last failed attempt or lost connection; empty if none.
  std::error_code last_connect_error_ ADMIT_GUARDED_BY(mutex_);

  // Strand only.
  state state_ = state::idle;
  bool closing_ = false;   // a graceful close is delivering what was queued before it
  std::uint64_t gen_ = 0;  // bumped whenever the socket is closed: handlers of an older socket do nothing
  redisReader* reader_ = nullptr;
  std::deque<request_ptr> pending_;    // not yet written, FIFO
  std::deque<request_ptr> in_flight_;  // written, awaiting replies, FIFO (completed ones stay until their reply)
  std::vector<request_ptr> connect_waiters_;
  std::deque<handshake_step> handshake_;
  deadline_map deadlines_;
  std::string write_buffer_;
  bool writing_ = false;
  backoff backoff_;
  std::shared_ptr<sentinel_discovery> sentinel_;  // set when options_.sentinel.master_name is not empty
  std::string target_host_;                       // the host of the current attempt (options_.host or a sentinel's)
  std::uint64_t rng_state_;
  std::vector<char> read_buffer_;

  std::atomic<bool> connected_{false};
  const std::shared_ptr<live_calls> live_ = std::make_shared<live_calls>();  // the calls not completed yet
  std::atomic<std::uint64_t> writes_{0}, commands_written_{0}, replies_{0}, discarded_{0}, connects_{0}, losses_{0};
};

}  // namespace admit::redis::detail
