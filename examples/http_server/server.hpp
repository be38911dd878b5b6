// examples/http_server/server.hpp — admit_http_server's serving: a session per connection (read a request, answer it
// through the service or outside every limit, until the client closes or the server shuts down), the listener, and
// serve(), which runs them on an io_context with the signals and the shutdown timers. Templates over the service: the
// middleware's stack (its type differs with --shed) or no_service for --no-admit.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "admit/asio/middleware.hpp"
#include "admit/metrics/prometheus.hpp"
#include "admit/semaphore.hpp"
#include "connections.hpp"
#include "options.hpp"
#include "responses.hpp"

namespace http_server {

// What every session shares; it lives in serve() and outlives the sessions.
struct context {
  server_state* state;
  admit::semaphore* sem;
  const admit::metrics::registry* metrics;
  work_handler handler;
  bool rate_fields;
};

// One connection: read a request, answer it (through the service when there is one), until the client closes or the
// server shuts down.
template <class Service>
net::awaitable<void> session(std::shared_ptr<connection> c, const Service* service, const context& cx) {
  using namespace net::experimental::awaitable_operators;
  server_state& st = *cx.state;
  const unlist_on_exit unlist{st, *c};
  boost::system::error_code addr_ec;
  const auto endpoint = c->stream.socket().remote_endpoint(addr_ec);
  const std::string client = addr_ec ? std::string("unknown") : endpoint.address().to_string();
  beast::flat_buffer buffer;
  while (!st.stopping.load()) {
    http_request req;
    req.client = client;
    c->idle = true;
    auto [read_ec, read_n] =
        co_await http::async_read(c->stream, buffer, req.message, net::as_tuple(net::use_awaitable));
    c->idle = false;
    if (read_ec) break;
    bool keep_alive = req.message.keep_alive();
    const unsigned version = req.message.version();
    boost::system::error_code write_ec;
    // The answer: written where it is; an admitted outcome holds its permit until the answer is written.
    auto write = [&](http_response& res) -> net::awaitable<void> {
      keep_alive = keep_alive && !st.stopping.load();
      res.keep_alive(keep_alive);
      res.prepare_payload();
      std::tie(write_ec, std::ignore) = co_await http::async_write(c->stream, res, net::as_tuple(net::use_awaitable));
    };
    if (!host_ok(req.message)) {
      keep_alive = false;  // the request is malformed: the rest of the stream cannot be trusted
      auto res = plain(http::status::bad_request, version, "an HTTP/1.1 request needs exactly one Host field\n");
      co_await write(res);
    } else if (req.message.method() == http::verb::get && req.message.target() == "/stats") {
      auto res = stats(st, cx.sem, version);
      co_await write(res);
    } else if (req.message.method() == http::verb::get && req.message.target() == "/metrics") {
      auto res = metrics(cx.metrics, version);
      co_await write(res);
    } else {
      auto call = [&]() {
        if constexpr (std::is_same_v<Service, no_service>) {
          return cx.handler(req);
        } else {
          return (*service)(req);
        }
      };
      auto result = co_await (call() || watch(*c));
      if (result.index() == 1) {
        if (std::get<1>(result) == interruption::client_closed) break;  // nobody to answer
        auto res = render(admit::asio::rejection{.reason = admit::asio::rejection_reason::closed}, version);
        co_await write(res);
        break;
      }
      auto& out = std::get<0>(result);
      if constexpr (std::is_same_v<Service, no_service>) {
        co_await write(out);
      } else {
        // An admitted response is written where it is, in the outcome (no move); a refusal is rendered beside it.
        std::optional<http_response> refusal;
        http_response& res = out ? out.response() : refusal.emplace(render(out.rejected(), version));
        if (cx.rate_fields && out && out.rate()) {
          for (const auto& f : admit::asio::rate_limit_fields(*out.rate())) res.set(f.name(), f.value());
        }
        co_await write(res);
        out.release();  // the concurrency permit is held until the response is written
      }
    }
    if (write_ec || !keep_alive) break;
  }
  boost::system::error_code ignored;
  c->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  c->stream.socket().close(ignored);
}

template <class Service>
net::awaitable<void> listen(tcp::acceptor& acceptor, const Service* service, const context& cx) {
  for (;;) {
    auto [ec, socket] =
        co_await acceptor.async_accept(net::make_strand(acceptor.get_executor()), net::as_tuple(net::use_awaitable));
    if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. too many open files: keep serving the connections we have
    socket.set_option(tcp::no_delay(true));
    auto c = std::make_shared<connection>(std::move(socket));
    cx.state->add(c);
    const auto ex = c->stream.get_executor();
    net::co_spawn(ex, session(std::move(c), service, cx), net::detached);
  }
}

// Listens on --address:--port, prints "listening on <address>:<port>", and serves with --threads threads until a
// signal has shut the server down and every connection has closed (see server_state). Returns the exit status, 0.
// Throws boost::system::system_error when the address cannot be bound.
template <class Service>
int serve(const options& o, const Service* service, admit::semaphore* sem, const admit::metrics::registry* reg,
          server_state& st, work_handler handler) {
  net::io_context ctx{static_cast<int>(o.threads)};
  // The listener, the signals and the shutdown timers share one strand.
  const auto control = net::make_strand(ctx);
  tcp::acceptor acceptor(control);
  const tcp::endpoint endpoint(net::ip::make_address(o.address), o.port);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  std::cout << "listening on " << o.address << ":" << acceptor.local_endpoint().port() << std::endl;

  net::steady_timer grace(control);  // then requests in flight give up
  net::steady_timer hard(control);   // then the connections left are closed
  const context cx{&st, sem, reg, handler, o.rate_fields};
  st.set_on_last([&] {
    net::post(control, [&] {
      grace.cancel();
      hard.cancel();
    });
  });

  net::signal_set signals(control, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    std::cout << "shutting down" << std::endl;
    boost::system::error_code ignored;
    acceptor.close(ignored);
    if (sem != nullptr) sem->close();  // every queued request: 503 closed
    if (!st.shutdown()) return;        // no connection left: run() returns
    grace.expires_after(o.grace);
    grace.async_wait([&](const boost::system::error_code& e) {
      if (e) return;
      st.abort_all();
      hard.expires_after(std::chrono::seconds(1));
      hard.async_wait([&](const boost::system::error_code& e2) {
        if (!e2) st.close_all();
      });
    });
  });
  net::co_spawn(control, listen(acceptor, service, cx), net::detached);

  std::vector<std::jthread> pool;
  for (unsigned i = 1; i < o.threads; ++i) pool.emplace_back([&ctx] { ctx.run(); });
  ctx.run();
  pool.clear();
  st.set_on_last(nullptr);  // it refers to this function's timers
  return 0;
}

}  // namespace http_server
