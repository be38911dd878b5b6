// examples/http_server/connections.cpp — admit_http_server's connections (connections.hpp).
#include "connections.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <tuple>
#include <utility>
#include <variant>

namespace http_server {

std::size_t server_state::connections() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

void server_state::set_on_last(std::function<void()> on_last) {
  std::lock_guard lock(mutex_);
  on_last_ = std::move(on_last);
}

void server_state::add(const std::shared_ptr<connection>& c) {
  std::lock_guard lock(mutex_);
  c->self = live_.insert(live_.end(), c);
}

void server_state::remove(connection& c) {
  std::function<void()> last;
  {
    std::lock_guard lock(mutex_);
    live_.erase(c.self);
    if (stopping.load() && live_.empty()) last = on_last_;
  }
  if (last) last();
}

bool server_state::shutdown() {
  std::lock_guard lock(mutex_);
  stopping.store(true);
  for (const auto& c : live_) {
    net::post(c->stream.get_executor(), [c] {
      boost::system::error_code ignored;
      if (c->idle) c->stream.socket().close(ignored);
    });
  }
  return !live_.empty();
}

void server_state::abort_all() {
  std::lock_guard lock(mutex_);
  for (const auto& c : live_) net::post(c->stream.get_executor(), [c] { c->abort.cancel(); });
}

void server_state::close_all() {
  std::lock_guard lock(mutex_);
  for (const auto& c : live_) {
    net::post(c->stream.get_executor(), [c] {
      boost::system::error_code ignored;
      c->stream.socket().close(ignored);
    });
  }
}

net::awaitable<interruption> watch(connection& c) {
  using namespace net::experimental::awaitable_operators;
  auto first = co_await (c.stream.socket().async_wait(tcp::socket::wait_read, net::as_tuple(net::use_awaitable)) ||
                         c.abort.async_wait(net::as_tuple(net::use_awaitable)));
  if (first.index() == 1) co_return interruption::aborted;
  if (std::get<0>(std::get<0>(first))) co_return interruption::client_closed;  // the wait failed: the socket is gone
  char byte = 0;
  boost::system::error_code ec;
  (void)c.stream.socket().receive(net::buffer(&byte, 1), tcp::socket::message_peek, ec);
  if (ec) co_return interruption::client_closed;  // eof (the client closed) or a reset
  co_await c.abort.async_wait(net::as_tuple(net::use_awaitable));
  co_return interruption::aborted;
}

}  // namespace http_server
