// admit::redis::connection's lifecycle (the class: connection_impl.hpp): connecting (through the sentinels when
// configured, by name or unix socket), the TLS handshake, the session's handshake (AUTH, SELECT, ROLE, a probe), ready;
// a failed attempt or a lost connection and the backoff before the next; the graceful close and its end. All on the
// strand.
#include <fcntl.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "connection_impl.hpp"
#include "reply_reader.hpp"

namespace admit::redis::detail {

void connection_impl::start_connect() {
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

void connection_impl::connect_to(const std::string& host, std::uint16_t port) {
  target_host_ = host;
  state_ = state::connecting;
  const std::uint64_t gen = ++gen_;
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = make_reply_reader();
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

void connection_impl::on_connected(std::uint64_t gen, const boost::system::error_code& ec) {
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
    // sockets without SOCK_CLOEXEC; a fork between the open and this line is the one window left, which `admit run`
    // closes in its child before exec.)
    ::fcntl(socket_.native_handle(), F_SETFD, FD_CLOEXEC);
  }
  if (tls_context_) {
    start_tls_handshake(gen);
    return;
  }
  start_session(gen);
}

void connection_impl::start_tls_handshake(std::uint64_t gen) {
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

void connection_impl::start_session(std::uint64_t gen) {
  handshake_.clear();
  std::string hello;
  if (!options_.password.empty()) {
    command auth{"AUTH"};
    if (!options_.user.empty()) auth.arg(options_.user);
    auth.arg(options_.password);
    append_command(hello, auth);
    handshake_.push_back(handshake_step::auth);
  }
  if (options_.db != 0) {
    append_command(hello, command{"SELECT"}.arg(options_.db));
    handshake_.push_back(handshake_step::select);
  }
  if (sentinel_) {  // Sentinel: use the node only if it says it is a master
    append_command(hello, command{"ROLE"});
    handshake_.push_back(handshake_step::role);
  }
  if (tls_ && hello.empty()) {
    append_command(hello, command{"PING"});
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

void connection_impl::become_ready() {
  state_ = state::ready;
  connect_timer_.cancel();
  backoff_.reset();
  connects_.fetch_add(1, std::memory_order_relaxed);
  connected_.store(true, std::memory_order_release);
  for (auto& w : std::exchange(connect_waiters_, {})) w->try_finish({}, reply());
  flush();
}

void connection_impl::shut_socket() {
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

void connection_impl::fail_attempt(const boost::system::error_code& socket_error) {
  const std::error_code why = connect_error(socket_error);
  const boost::system::error_code ec(why);
  {
    const admit::detail::lock_guard lock(mutex_);
    last_connect_error_ = why;
  }
  shut_socket();
  connect_timer_.cancel();
  for (auto& w : std::exchange(connect_waiters_, {})) w->try_finish(ec, reply());
  schedule_reconnect();
  check_closing();
}

void connection_impl::lose(boost::system::error_code ec, std::string what) {
  set_last_error(std::move(what));
  if (state_ != state::ready) {
    fail_attempt(ec);
    return;
  }
  {
    const admit::detail::lock_guard lock(mutex_);
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

void connection_impl::schedule_reconnect() {
  state_ = state::backoff;
  connect_timer_.expires_after(backoff_.next(splitmix64(rng_state_)));
  connect_timer_.async_wait([self = shared_from_this(), gen = gen_](const boost::system::error_code& ec) {
    if (!ec && gen == self->gen_ && self->state_ == state::backoff) self->start_connect();
  });
}

void connection_impl::start_closing(std::optional<clock::time_point> deadline) {
  if (deadline && clock::now() >= *deadline) return finish_close();
  closing_ = true;
  for (auto& w : std::exchange(connect_waiters_, {})) w->try_finish(admit::asio::to_error_code(errc::closed), reply());
  if (deadline) {
    close_timer_.expires_at(*deadline);
    close_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->finish_close();
    });
  }
  drain();  // takes what is queued (another drain may be posted: it finds nothing) and checks whether all is done
}

void connection_impl::finish_close() {
  if (state_ == state::closed) return;
  state_ = state::closed;
  if (sentinel_) sentinel_->cancel();
  closing_ = false;
  shut_socket();
  connected_.store(false, std::memory_order_release);
  connect_timer_.cancel();
  deadline_timer_.cancel();
  deadline_timer_at_.reset();
  close_timer_.cancel();
  std::vector<request_ptr> incoming;
  {
    const admit::detail::lock_guard lock(mutex_);
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

}  // namespace admit::redis::detail
