// admit::redis::connection — the I/O engine: one socket on a strand, a FIFO of calls written in batches, hiredis's
// reader for replies, a deadline map with one timer, and the connect / handshake / backoff state machine.
//
// Threads. submit(), close() and add_connect_waiter() run on any thread; they touch only `incoming_` (under `mutex_`)
// and post to the strand. Everything else runs on the strand. A request completes through its atomic `done` flag, so
// a blocked caller's deadline, a cancellation slot and the strand never complete it twice.
#include <fcntl.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <limits>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/detail/backoff.hpp"
#include "sentinel_discovery.hpp"
#include "tls.hpp"

namespace admit::redis::detail {
namespace {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
using request_ptr = std::shared_ptr<request_base>;

constexpr std::size_t max_write_bytes = 256 * 1024;
// Calls, or bytes of calls, queued behind a pending drain that make submit() drain at once (see submit()). The bytes
// count for calls that carry many decisions each (a limiter's batch): 2 KiB is about 12 one-decision GCRA calls, or
// four batches of 8 (measured: 1.6-2.2x the decisions/s of a count of 16 calls alone at 64 callers,
// docs/perf/redis.md).
constexpr std::size_t early_flush_calls = 16;
constexpr std::size_t early_flush_bytes = 2048;
constexpr std::size_t read_buffer_bytes = 64 * 1024;

reply convert(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
      return reply::string(std::string(r->str, r->len));
    case REDIS_REPLY_STATUS:
      return reply::status(std::string(r->str, r->len));
    case REDIS_REPLY_ERROR:
      return reply::error(std::string(r->str, r->len));
    case REDIS_REPLY_INTEGER:
      return reply::integer(r->integer);
    case REDIS_REPLY_ARRAY: {
      std::vector<reply> elements;
      elements.reserve(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) elements.push_back(convert(r->element[i]));
      return reply::array(std::move(elements));
    }
    default:
      return reply();
  }
}

}  // namespace

class connection_impl : public std::enable_shared_from_this<connection_impl> {
 public:
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
  void submit(request_ptr req) {
    if (req->deadline && clock::now() >= *req->deadline) {
      req->try_finish(admit::asio::to_error_code(errc::timeout), reply());
      return;
    }
    bool post_needed = false;
    bool early = false;
    {
      std::lock_guard lock(mutex_);
      if (closed_) {
        req->try_finish(admit::asio::to_error_code(errc::closed), reply());
        return;
      }
      req->count_in(live_);
      const std::size_t bytes_before = incoming_bytes_;
      incoming_bytes_ += req->payload.size();
      incoming_.push_back(std::move(req));
      post_needed = !drain_posted_;
      drain_posted_ = true;
      // Many calls queued behind a drain that has not run yet (typically: the completions of one read each issuing
      // the next call, all ahead of the posted drain on a busy executor): write them now instead of after all those
      // completions, so the server works on this batch while the client processes the rest (no lock-step batches).
      early = !post_needed && (incoming_.size() == early_flush_calls ||
                               (bytes_before < early_flush_bytes && incoming_bytes_ >= early_flush_bytes));
    }
    if (post_needed) {
      // Posted to the underlying executor, entering the strand only when it runs: a drain queued on the strand itself
      // would hold the strand, and the early drain below could not run before it.
      asio::post(strand_.get_inner_executor(),
                 [self = shared_from_this()] { asio::dispatch(self->strand_, [self] { self->drain(); }); });
    } else if (early) {
      // Inline when this thread runs the executor and the strand is free, else queued as a post would be.
      asio::dispatch(strand_, [self = shared_from_this()] { self->drain(); });
    }
  }

  // Any thread.
  void add_connect_waiter(request_ptr req) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) {
        req->try_finish(admit::asio::to_error_code(errc::closed), reply());
        return;
      }
    }
    asio::post(strand_, [self = shared_from_this(), req = std::move(req)]() mutable {
      if (self->state_ == state::closed) {
        req->try_finish(admit::asio::to_error_code(errc::closed), reply());
      } else if (self->state_ == state::ready) {
        req->try_finish({}, reply());
      } else {
        self->connect_waiters_.push_back(std::move(req));
        if (self->state_ == state::idle) self->start_connect();
      }
    });
  }

  // Any thread. Starts the graceful close (the first call does; later ones do nothing): from now on new calls
  // complete with errc::closed; what was queued before is still written and its replies awaited until `deadline`
  // (std::nullopt: no limit); then whatever is left completes with errc::closed (finish_close).
  void begin_close(std::optional<clock::time_point> deadline) {
    live_->watch();
    {
      std::lock_guard lock(mutex_);
      if (closed_) return;
      closed_ = true;
    }
    asio::post(strand_, [self = shared_from_this(), deadline] { self->start_closing(deadline); });
  }

  // Any thread, after begin_close. Waits until no call made before the close is left unanswered, or until `deadline`,
  // when this thread completes what is left with errc::closed itself (the strand does the same at the deadline; this
  // does not depend on the executor running). Returns the counts of calls completed with errc::closed.
  close_result await_close(std::optional<clock::time_point> deadline) {
    if (!deadline) {
      live_->wait();
    } else if (!live_->wait_until(*deadline)) {
      live_->close_all();
    }
    const auto [unsent, unanswered] = live_->closed_counts();
    return close_result{.unsent = unsent, .unanswered = unanswered};
  }

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
    std::lock_guard lock(mutex_);
    return last_error_;
  }
  std::error_code last_connect_error() const {
    std::lock_guard lock(mutex_);
    return last_connect_error_;
  }

 private:
  enum class state { idle, connecting, handshaking, ready, backoff, closed };
  // role: Sentinel's check that the node is a master; probe: any reply (even an error: NOPERM) will do
  enum class handshake_step { auth, select, role, probe };

  void set_last_error(std::string what) {
    std::lock_guard lock(mutex_);
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

  void drain() {
    std::vector<request_ptr> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(incoming_);
      incoming_bytes_ = 0;
      drain_posted_ = false;
    }
    if (state_ == state::closed) {
      for (auto& r : batch) r->try_finish(admit::asio::to_error_code(errc::closed), reply());
      return;
    }
    bool earliest_changed = false;
    for (auto& r : batch) {
      if (r->done()) continue;
      if (r->deadline) {
        r->deadline_entry = deadlines_.emplace(*r->deadline, r);
        r->has_deadline_entry = true;
        if (r->deadline_entry == deadlines_.begin()) earliest_changed = true;
      }
      pending_.push_back(std::move(r));
    }
    if (earliest_changed) arm_deadline_timer();
    if (state_ == state::idle && !pending_.empty()) {
      start_connect();
    } else if (state_ == state::ready) {
      flush();
    }
    check_closing();
  }

  void arm_deadline_timer() {
    if (deadlines_.empty()) return;
    deadline_timer_.expires_at(deadlines_.begin()->first);
    deadline_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->on_deadlines();
    });
  }

  void on_deadlines() {
    if (state_ == state::closed) return;
    const auto now = clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      request_ptr r = deadlines_.begin()->second.lock();
      deadlines_.erase(deadlines_.begin());
      if (r) {
        r->has_deadline_entry = false;
        r->try_finish(admit::asio::to_error_code(errc::timeout), reply());
      }
    }
    arm_deadline_timer();
    check_closing();
  }

  void drop_deadline(request_base& r) {
    if (r.has_deadline_entry) {
      deadlines_.erase(r.deadline_entry);
      r.has_deadline_entry = false;
    }
  }

  void finish(const request_ptr& r, boost::system::error_code ec, reply&& value) {
    drop_deadline(*r);
    r->try_finish(ec, std::move(value));
  }

  void flush() {
    if (state_ != state::ready || writing_) return;
    write_buffer_.clear();
    std::uint64_t n = 0;
    while (!pending_.empty() && write_buffer_.size() < max_write_bytes) {
      request_ptr r = std::move(pending_.front());
      pending_.pop_front();
      if (r->done()) {  // timed out or cancelled before it was sent: never sent
        drop_deadline(*r);
        continue;
      }
      write_buffer_ += r->payload;
      std::string().swap(r->payload);
      r->written.store(true, std::memory_order_release);
      in_flight_.push_back(std::move(r));
      ++n;
    }
    if (n == 0) {
      check_closing();
      return;
    }
    writes_.fetch_add(1, std::memory_order_relaxed);
    commands_written_.fetch_add(n, std::memory_order_relaxed);
    start_write();
  }

  void start_write() {
    writing_ = true;
    if (tls_) {  // no immediate attempt: OpenSSL owns the record layer
      asio::async_write(*tls_, asio::buffer(write_buffer_),
                        [self = shared_from_this(), gen = gen_, stream = tls_](
                            const boost::system::error_code& e, std::size_t) { self->on_written(gen, e); });
      return;
    }
    // Try the write at once (the socket is non-blocking): usually the kernel takes the whole batch and the write
    // completes without a trip through the reactor; whatever is left (or an error) goes the asynchronous way.
    boost::system::error_code ec;
    const std::size_t sent = socket_.write_some(asio::buffer(write_buffer_), ec);
    if (!ec && sent == write_buffer_.size()) {
      asio::post(strand_, [self = shared_from_this(), gen = gen_] { self->on_written(gen, {}); });
      return;
    }
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
      asio::post(strand_, [self = shared_from_this(), gen = gen_, ec] { self->on_written(gen, ec); });
      return;
    }
    asio::async_write(socket_, asio::buffer(write_buffer_) + (ec ? 0 : sent),
                      [self = shared_from_this(), gen = gen_](const boost::system::error_code& e, std::size_t) {
                        self->on_written(gen, e);
                      });
  }

  void on_written(std::uint64_t gen, const boost::system::error_code& ec) {
    if (gen != gen_) return;
    writing_ = false;
    if (ec) {
      lose(ec, "write: " + ec.message());
      return;
    }
    flush();
  }

  void start_read(std::uint64_t gen) {
    if (tls_) {
      tls_->async_read_some(asio::buffer(read_buffer_),
                            [self = shared_from_this(), gen, stream = tls_](
                                const boost::system::error_code& ec, std::size_t n) { self->on_read(gen, ec, n); });
      return;
    }
    socket_.async_read_some(asio::buffer(read_buffer_),
                            [self = shared_from_this(), gen](const boost::system::error_code& ec, std::size_t n) {
                              self->on_read(gen, ec, n);
                            });
  }

  void on_read(std::uint64_t gen, const boost::system::error_code& ec, std::size_t n) {
    if (gen != gen_) return;
    if (ec && tls_ && state_ == state::handshaking) {  // e.g. TLS 1.3: the server refused the client's certificate
      set_last_error("TLS session with " + endpoint() + " refused by the server: " + ec.message());
      fail_attempt(admit::asio::to_error_code(errc::tls_handshake_failed));
      return;
    }
    if (ec) {
      lose(ec, "read: " + ec.message());
      return;
    }
    if (redisReaderFeed(reader_, read_buffer_.data(), n) != REDIS_OK) {
      lose(admit::asio::to_error_code(errc::protocol_error), std::string("protocol: ") + reader_->errstr);
      return;
    }
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
        lose(admit::asio::to_error_code(errc::protocol_error), std::string("protocol: ") + reader_->errstr);
        return;
      }
      if (raw == nullptr) break;
      reply value = convert(static_cast<const redisReply*>(raw));
      freeReplyObject(raw);
      on_reply(std::move(value));
      if (gen != gen_) return;  // the reply ended this connection (handshake failure, unexpected reply)
    }
    start_read(gen);
    check_closing();
  }

  void on_reply(reply&& value) {
    if (state_ == state::handshaking) {
      const handshake_step step = handshake_.front();
      handshake_.pop_front();
      if (step == handshake_step::role) {  // Sentinel (sentinel.cpp)
        if (auto why = sentinel_->check_role(value)) {
          set_last_error(std::move(*why));
          fail_attempt(admit::asio::to_error_code(errc::not_master));
          return;
        }
      } else if (value.is_error() && step != handshake_step::probe) {
        // Never the password: the message ends up in logs.
        const std::string who =
            options_.user.empty() ? "AUTH (default user): " : "AUTH as user '" + options_.user + "': ";
        set_last_error((step == handshake_step::auth ? who : "SELECT " + std::to_string(options_.db) + ": ") +
                       value.str());
        fail_attempt(
            admit::asio::to_error_code(step == handshake_step::auth ? errc::auth_failed : errc::select_failed));
        return;
      }
      if (handshake_.empty()) become_ready();
      return;
    }
    if (state_ != state::ready || in_flight_.empty()) {
      lose(admit::asio::to_error_code(errc::protocol_error), "protocol: a reply nobody asked for");
      return;
    }
    if (in_flight_.front()->skip_replies != 0) {  // e.g. the OK of the cluster's ASKING before its command
      --in_flight_.front()->skip_replies;
      return;
    }
    request_ptr r = std::move(in_flight_.front());
    in_flight_.pop_front();
    replies_.fetch_add(1, std::memory_order_relaxed);
    // Sentinel: a node that answers READONLY is a replica now; a new connection asks the sentinels again.
    const bool demoted = sentinel_ && value.is_error("READONLY");
    if (r->done()) {
      discarded_.fetch_add(1, std::memory_order_relaxed);
      drop_deadline(*r);
    } else {
      finish(r, {}, std::move(value));
    }
    if (demoted)
      lose(admit::asio::to_error_code(errc::connection_lost), "Sentinel: the node answered READONLY (now a replica)");
  }

  void start_connect() {
    // Sentinel (sentinel.cpp): every attempt first asks the sentinels where the master is, then connects there.
    if (sentinel_) {
      state_ = state::connecting;
      const std::uint64_t gen = ++gen_;
      sentinel_->async_discover([weak = weak_from_this(), gen](discovered_master m) {
        const auto self = weak.lock();
        if (!self || gen != self->gen_ || self->state_ != state::connecting) return;
        if (m.error) {
          self->set_last_error(std::move(m.words));
          self->fail_attempt(boost::system::error_code(m.error));
          return;
        }
        self->connect_to(m.host, m.port);
      });
      return;
    }
    connect_to(options_.host, options_.port);
  }

  void connect_to(const std::string& host, std::uint16_t port) {
    target_host_ = host;
    state_ = state::connecting;
    const std::uint64_t gen = ++gen_;
    if (reader_ != nullptr) redisReaderFree(reader_);
    reader_ = redisReaderCreate();
    if (reader_ == nullptr) throw std::bad_alloc();
    // Calls that gave up while we were away leave the queue now.
    std::erase_if(pending_, [&](const request_ptr& r) {
      if (!r->done()) return false;
      drop_deadline(*r);
      return true;
    });
    connect_timer_.expires_after(options_.connect_timeout);
    connect_timer_.async_wait([self = shared_from_this(), gen](const boost::system::error_code& ec) {
      if (!ec && gen == self->gen_ && (self->state_ == state::connecting || self->state_ == state::handshaking)) {
        self->set_last_error(self->tls_handshaking_
                                 ? "TLS handshake with " + self->endpoint() + ": timed out (is the port a TLS port?)"
                                 : "connect: timed out");
        self->fail_attempt(admit::asio::to_error_code(errc::connect_timeout));
      }
    });
    if (!options_.unix_path.empty() && !sentinel_) {
      const asio::generic::stream_protocol::endpoint ep{asio::local::stream_protocol::endpoint(options_.unix_path)};
      socket_.async_connect(
          ep, [self = shared_from_this(), gen](const boost::system::error_code& ec) { self->on_connected(gen, ec); });
      return;
    }
    resolver_.async_resolve(host, std::to_string(port),
                            [self = shared_from_this(), gen](const boost::system::error_code& ec,
                                                             const asio::ip::tcp::resolver::results_type& results) {
                              if (gen != self->gen_) return;
                              if (ec) {
                                self->set_last_error("resolve " + self->target_host_ + ": " + ec.message());
                                self->fail_attempt(admit::asio::to_error_code(resolve_failure(ec)));
                                return;
                              }
                              std::vector<asio::generic::stream_protocol::endpoint> endpoints;
                              for (const auto& entry : results) endpoints.emplace_back(entry.endpoint());
                              asio::async_connect(self->socket_, endpoints,
                                                  [self, gen](const boost::system::error_code& e,
                                                              const asio::generic::stream_protocol::endpoint&) {
                                                    self->on_connected(gen, e);
                                                  });
                            });
  }

  void on_connected(std::uint64_t gen, const boost::system::error_code& ec) {
    if (gen != gen_) return;
    if (ec) {
      set_last_error("connect: " + ec.message());
      fail_attempt(ec);
      return;
    }
    {
      boost::system::error_code ignored;
      if (options_.unix_path.empty() || sentinel_) socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
      socket_.non_blocking(true, ignored);  // for start_write's immediate attempt
      // Not inherited by a program this process starts (fork and exec): its copy would keep the connection, and the
      // server's state of it (a blocked BLMPOP, an authenticated session), alive, and could write into it. (Asio opens
      // sockets without SOCK_CLOEXEC; a fork between the open and this line is the one window left.)
      ::fcntl(socket_.native_handle(), F_SETFD, FD_CLOEXEC);
    }
    if (tls_context_) {
      start_tls_handshake(gen);
      return;
    }
    start_session(gen);
  }

  // TLS: the handshake (within the connect timeout, which is still armed), then the session as over TCP.
  void start_tls_handshake(std::uint64_t gen) {
    tls_ = std::make_shared<tls_stream>(socket_, *tls_context_);
    tls_handshaking_ = true;
    std::string why;
    if (!prepare_tls_session(tls_->native_handle(), options_, why)) {
      set_last_error(why);
      fail_attempt(admit::asio::to_error_code(errc::tls_handshake_failed));
      return;
    }
    tls_->async_handshake(asio::ssl::stream_base::client,
                          [self = shared_from_this(), gen, stream = tls_](const boost::system::error_code& ec) {
                            if (gen != self->gen_) return;
                            self->tls_handshaking_ = false;
                            if (ec) {
                              std::string reason;
                              const errc e = classify_tls_failure(stream->native_handle(), ec, reason);
                              self->set_last_error("TLS handshake with " + self->endpoint() + ": " + reason);
                              self->fail_attempt(admit::asio::to_error_code(e));
                              return;
                            }
                            self->start_session(gen);
                          });
  }

  std::string endpoint() const {
    return options_.unix_path.empty() ? options_.host + ":" + std::to_string(options_.port) : options_.unix_path;
  }

  // The connection is up (TLS included): AUTH and SELECT, then ready. Over TLS a PING is added when nothing else is
  // sent: a server that refuses the client's certificate says so only after the client's side of the handshake (TLS
  // 1.3), and the attempt should fail then, not a caller's first command.
  void start_session(std::uint64_t gen) {
    handshake_.clear();
    std::string hello;
    if (!options_.password.empty()) {
      command auth{"AUTH"};
      if (!options_.user.empty()) auth.arg(options_.user);
      auth.arg(options_.password);
      hello += format_command(auth);
      handshake_.push_back(handshake_step::auth);
    }
    if (options_.db != 0) {
      hello += format_command(command{"SELECT"}.arg(options_.db));
      handshake_.push_back(handshake_step::select);
    }
    if (sentinel_) {  // Sentinel: use the node only if it says it is a master
      hello += format_command(command{"ROLE"});
      handshake_.push_back(handshake_step::role);
    }
    if (tls_ && hello.empty()) {
      hello += format_command(command{"PING"});
      handshake_.push_back(handshake_step::probe);
    }
    start_read(gen);
    if (hello.empty()) {
      become_ready();
      return;
    }
    state_ = state::handshaking;
    write_buffer_ = std::move(hello);
    start_write();
  }

  void become_ready() {
    state_ = state::ready;
    connect_timer_.cancel();
    backoff_.reset();
    connects_.fetch_add(1, std::memory_order_relaxed);
    connected_.store(true, std::memory_order_release);
    for (auto& w : std::exchange(connect_waiters_, {})) w->try_finish({}, reply());
    flush();
  }

  void shut_socket() {
    ++gen_;
    boost::system::error_code ignored;
    socket_.close(ignored);
    tls_handshaking_ = false;
    tls_.reset();  // the handlers of its pending operations keep it alive until they complete (aborted)
    resolver_.cancel();
    writing_ = false;
    write_buffer_.clear();
    handshake_.clear();
  }

  // A connection attempt failed (connecting or handshaking): nothing of the callers' was written. Its error is kept
  // (last_connect_error).
  void fail_attempt(const boost::system::error_code& socket_error) {
    const std::error_code why = connect_error(socket_error);
    const boost::system::error_code ec(why);
    {
      std::lock_guard lock(mutex_);
      last_connect_error_ = why;
    }
    shut_socket();
    connect_timer_.cancel();
    for (auto& w : std::exchange(connect_waiters_, {})) w->try_finish(ec, reply());
    schedule_reconnect();
    check_closing();
  }

  // The connection failed. Established: every call written (or being written) has an unknown outcome.
  void lose(boost::system::error_code ec, std::string what) {
    set_last_error(std::move(what));
    if (state_ != state::ready) {
      fail_attempt(ec);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      last_connect_error_ =
          ec == errc::protocol_error ? make_error_code(errc::protocol_error) : make_error_code(errc::connection_lost);
    }
    shut_socket();
    connected_.store(false, std::memory_order_release);
    losses_.fetch_add(1, std::memory_order_relaxed);
    for (auto& r : std::exchange(in_flight_, {})) finish(r, admit::asio::to_error_code(errc::outcome_unknown), reply());
    schedule_reconnect();
    check_closing();
  }

  void schedule_reconnect() {
    state_ = state::backoff;
    connect_timer_.expires_after(backoff_.next(splitmix64(rng_state_)));
    connect_timer_.async_wait([self = shared_from_this(), gen = gen_](const boost::system::error_code& ec) {
      if (!ec && gen == self->gen_ && self->state_ == state::backoff) self->start_connect();
    });
  }

  // The graceful close starts (see begin_close): what is queued is drained into pending_ as usual, connect waiters
  // complete with errc::closed, and the close deadline is armed. An idle connection with calls queued connects.
  void start_closing(std::optional<clock::time_point> deadline) {
    if (deadline && clock::now() >= *deadline) return finish_close();
    closing_ = true;
    for (auto& w : std::exchange(connect_waiters_, {}))
      w->try_finish(admit::asio::to_error_code(errc::closed), reply());
    if (deadline) {
      close_timer_.expires_at(*deadline);
      close_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (!ec) self->finish_close();
      });
    }
    drain();  // takes what is queued (another drain may be posted: it finds nothing) and checks whether all is done
  }

  // While closing: finishes the close once no call is left unanswered (calls that completed otherwise — deadline,
  // cancellation — are not waited for).
  void check_closing() {
    if (!closing_ || state_ == state::closed) return;
    const auto live = [](const request_ptr& r) { return !r->done(); };
    if (std::any_of(in_flight_.begin(), in_flight_.end(), live)) return;
    if (std::any_of(pending_.begin(), pending_.end(), live)) return;
    {
      std::lock_guard lock(mutex_);
      if (!incoming_.empty()) return;
    }
    finish_close();
  }

  // The end of the connection: the socket closed, every call not answered yet completes with errc::closed.
  void finish_close() {
    if (state_ == state::closed) return;
    state_ = state::closed;
    if (sentinel_) sentinel_->cancel();
    closing_ = false;
    shut_socket();
    connected_.store(false, std::memory_order_release);
    connect_timer_.cancel();
    deadline_timer_.cancel();
    close_timer_.cancel();
    std::vector<request_ptr> incoming;
    {
      std::lock_guard lock(mutex_);
      incoming.swap(incoming_);
      incoming_bytes_ = 0;
    }
    // Completed with errc::closed, each is counted by the registry (unanswered if written, else unsent).
    const auto closed = admit::asio::to_error_code(errc::closed);
    for (auto& r : std::exchange(in_flight_, {})) r->try_finish(closed, reply());
    for (auto& r : std::exchange(pending_, {})) r->try_finish(closed, reply());
    for (auto& r : incoming) r->try_finish(closed, reply());
    for (auto& w : std::exchange(connect_waiters_, {})) w->try_finish(closed, reply());
    deadlines_.clear();
  }

  using tls_stream = asio::ssl::stream<asio::generic::stream_protocol::socket&>;

  const connection_options options_;
  asio::strand<asio::any_io_executor> strand_;
  asio::generic::stream_protocol::socket socket_;
  const std::shared_ptr<asio::ssl::context> tls_context_;  // null without TLS
  std::shared_ptr<tls_stream> tls_;                        // over socket_, one per connection attempt
  bool tls_handshaking_ = false;                           // strand only
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer connect_timer_;   // connect deadline, then backoff delay
  asio::steady_timer deadline_timer_;  // the earliest call deadline
  asio::steady_timer close_timer_;     // the deadline of a graceful close

  // Guarded by mutex_.
  mutable std::mutex mutex_;
  std::vector<request_ptr> incoming_;
  std::size_t incoming_bytes_ = 0;  // the payloads of incoming_
  bool drain_posted_ = false;
  bool closed_ = false;  // close began: new calls are refused
  std::string last_error_;
  std::error_code last_connect_error_;  // of the last failed attempt or lost connection; empty if none

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

std::shared_ptr<connection_impl> make_connection_impl(boost::asio::any_io_executor ex, connection_options options) {
  validate(options);
  return std::make_shared<connection_impl>(std::move(ex), std::move(options));
}

std::string format_command(const command& cmd) {
  if (cmd.empty()) throw std::invalid_argument("redis command: empty (no arguments)");
  const auto& args = cmd.args();
  if (args.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument("redis command: too many arguments");
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* out = nullptr;
  const int n = redisFormatCommandArgv(&out, static_cast<int>(args.size()), argv.data(), lengths.data());
  if (n < 0 || out == nullptr) throw std::bad_alloc();
  std::string formatted(out, static_cast<std::size_t>(n));
  redisFreeCommand(out);
  return formatted;
}

void submit(connection_impl& impl, std::shared_ptr<request_base> req) { impl.submit(std::move(req)); }

void add_connect_waiter(connection_impl& impl, std::shared_ptr<request_base> req) {
  impl.add_connect_waiter(std::move(req));
}

result execute_blocking(connection_impl& impl, const command& cmd, std::optional<clock::time_point> deadline) {
  auto req = std::make_shared<blocking_request>();
  req->payload = format_command(cmd);
  if (deadline && clock::now() >= *deadline) return result{errc::timeout, reply()};
  impl.submit(req);  // the waiting thread enforces the deadline (req->deadline stays empty)
  auto [ec, value] = req->wait(deadline);
  return result{ec, std::move(value)};
}

errc resolve_failure(const boost::system::error_code& ec) noexcept {
  if (ec == asio::error::host_not_found || ec == asio::error::no_data || ec == asio::error::service_not_found) {
    return errc::unknown_host;
  }
  return errc::connection_failed;
}

std::error_code connect_blocking(connection_impl& impl, std::optional<clock::time_point> deadline) {
  if (deadline && clock::now() >= *deadline) return errc::timeout;
  auto req = std::make_shared<blocking_request>();
  impl.add_connect_waiter(req);
  return req->wait(deadline).first;
}

void begin_close(connection_impl& impl, std::optional<clock::time_point> deadline) { impl.begin_close(deadline); }

close_result await_close(connection_impl& impl, std::optional<clock::time_point> deadline) {
  return impl.await_close(deadline);
}

close_result close(connection_impl& impl, std::optional<clock::time_point> deadline, bool wait) {
  impl.begin_close(deadline);
  if (!wait) return close_result{.waited = false};
  return impl.await_close(deadline);
}

bool running_in_this_thread(const boost::asio::any_io_executor& ex) noexcept {
  using tracked = std::decay_t<decltype(asio::prefer(std::declval<asio::io_context::executor_type>(),
                                                     asio::execution::outstanding_work.tracked))>;
  if (const auto* e = ex.target<asio::io_context::executor_type>()) return e->running_in_this_thread();
  if (const auto* e = ex.target<tracked>()) return e->running_in_this_thread();
  if (const auto* e = ex.target<asio::thread_pool::executor_type>()) return e->running_in_this_thread();
  if (const auto* s = ex.target<asio::strand<asio::io_context::executor_type>>()) {
    return s->get_inner_executor().running_in_this_thread();
  }
  if (const auto* s = ex.target<asio::strand<asio::any_io_executor>>()) {
    return running_in_this_thread(s->get_inner_executor());
  }
  return true;  // cannot be told: never block a thread that may have to run the I/O waited for
}
connection_statistics statistics(const connection_impl& impl) noexcept { return impl.statistics(); }
bool is_connected(const connection_impl& impl) noexcept { return impl.is_connected(); }
std::string last_error(const connection_impl& impl) { return impl.last_error(); }
std::error_code last_connect_error(const connection_impl& impl) { return impl.last_connect_error(); }

}  // namespace admit::redis::detail
