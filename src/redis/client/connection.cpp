// admit::redis::connection: the calls from any thread (submit, connect waiters, close), the deadlines, and the I/O
// path (writing batches, reading replies through hiredis's reader and completing the calls in order); then the free
// functions the public header calls. Connecting, the handshake, losing the connection and closing it are in
// connection_lifecycle.cpp; the class and its threading rules in connection_impl.hpp.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "connection_impl.hpp"
#include "reply_reader.hpp"

namespace admit::redis::detail {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::size_t max_write_bytes = 256 * 1024;
// Calls, or bytes of calls, queued behind a pending drain that make submit() drain at once (see submit()). The bytes
// count for calls that carry many decisions each (a limiter's batch): 2 KiB is about 12 one-decision GCRA calls, or
// four batches of 8 (measured: 1.6-2.2x the decisions/s of a count of 16 calls alone at 64 callers,
// docs/perf/redis.md).
constexpr std::size_t early_flush_calls = 16;
constexpr std::size_t early_flush_bytes = 2048;

}  // namespace

void connection_impl::submit(request_ptr req) {
  if (req->deadline && clock::now() >= *req->deadline) {
    req->try_finish(admit::asio::to_error_code(errc::timeout), reply());
    return;
  }
  bool post_needed = false;
  bool early = false;
  {
    const admit::detail::lock_guard lock(mutex_);
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

void connection_impl::add_connect_waiter(request_ptr req) {
  {
    const admit::detail::lock_guard lock(mutex_);
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

void connection_impl::begin_close(std::optional<clock::time_point> deadline) {
  live_->watch();
  {
    const admit::detail::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
  }
  asio::post(strand_, [self = shared_from_this(), deadline] { self->start_closing(deadline); });
}

close_result connection_impl::await_close(std::optional<clock::time_point> deadline) {
  if (!deadline) {
    live_->wait();
  } else if (!live_->wait_until(*deadline)) {
    live_->close_all();
  }
  const auto [unsent, unanswered] = live_->closed_counts();
  return close_result{.unsent = unsent, .unanswered = unanswered};
}

void connection_impl::drain() {
  std::vector<request_ptr> batch;
  {
    const admit::detail::lock_guard lock(mutex_);
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

void connection_impl::arm_deadline_timer() {
  if (deadlines_.empty()) return;
  const clock::time_point earliest = deadlines_.begin()->first;
  if (deadline_timer_at_ && *deadline_timer_at_ <= earliest) return;
  deadline_timer_at_ = earliest;
  deadline_timer_.expires_at(earliest);
  deadline_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: re-armed for an earlier deadline, or closed
    self->deadline_timer_at_.reset();
    self->on_deadlines();
  });
}

void connection_impl::on_deadlines() {
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

void connection_impl::drop_deadline(request_base& r) {
  if (r.has_deadline_entry) {
    deadlines_.erase(r.deadline_entry);
    r.has_deadline_entry = false;
  }
}

void connection_impl::finish(const request_ptr& r, boost::system::error_code ec, reply&& value) {
  drop_deadline(*r);
  r->try_finish(ec, std::move(value));
}

void connection_impl::flush() {
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

void connection_impl::start_write() {
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

void connection_impl::on_written(std::uint64_t gen, const boost::system::error_code& ec) {
  if (gen != gen_) return;
  writing_ = false;
  if (ec) {
    lose(ec, "write: " + ec.message());
    return;
  }
  flush();
}

void connection_impl::start_read(std::uint64_t gen) {
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

void connection_impl::on_read(std::uint64_t gen, const boost::system::error_code& ec, std::size_t n) {
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
    on_reply(take_reply(raw));
    if (gen != gen_) return;  // the reply ended this connection (handshake failure, unexpected reply)
  }
  start_read(gen);
  check_closing();
}

void connection_impl::on_reply(reply&& value) {
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
      fail_attempt(admit::asio::to_error_code(step == handshake_step::auth ? errc::auth_failed : errc::select_failed));
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
  if (request_base& front = *in_flight_.front(); front.gather != 0) {  // a pipeline: its replies as one array
    front.gathered.push_back(std::move(value));
    if (front.gathered.size() < front.gather) return;
    value = reply::array(std::move(front.gathered));
  }
  request_ptr r = std::move(in_flight_.front());
  in_flight_.pop_front();
  replies_.fetch_add(1, std::memory_order_relaxed);
  // Sentinel: a node that answers READONLY is a replica now; a new connection asks the sentinels again.
  const auto readonly = [](const reply& v) { return v.is_error("READONLY"); };
  const bool demoted =
      sentinel_ && (readonly(value) || std::any_of(value.elements().begin(), value.elements().end(), readonly));
  if (r->done()) {
    discarded_.fetch_add(1, std::memory_order_relaxed);
    drop_deadline(*r);
  } else {
    finish(r, {}, std::move(value));
  }
  if (demoted)
    lose(admit::asio::to_error_code(errc::connection_lost), "Sentinel: the node answered READONLY (now a replica)");
}

// Defined here rather than with the rest of the close (connection_lifecycle.cpp): the I/O path calls it after every
// drain, write and read, and here the compiler can inline its first test.
void connection_impl::check_closing() {
  if (!closing_ || state_ == state::closed) return;
  const auto live = [](const request_ptr& r) { return !r->done(); };
  if (std::any_of(in_flight_.begin(), in_flight_.end(), live)) return;
  if (std::any_of(pending_.begin(), pending_.end(), live)) return;
  {
    const admit::detail::lock_guard lock(mutex_);
    if (!incoming_.empty()) return;
  }
  finish_close();
}

std::shared_ptr<connection_impl> make_connection_impl(boost::asio::any_io_executor ex, connection_options options) {
  validate(options);
  return std::make_shared<connection_impl>(std::move(ex), std::move(options));
}

std::string format_command(const command& cmd) {
  std::string out;
  append_command(out, cmd);
  return out;
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
