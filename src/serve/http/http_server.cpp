#include "serve/http/http_server.hpp"

#include <google/protobuf/util/json_util.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <exception>
#include <list>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/host_port.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "serve/command/log.hpp"

namespace admit::serve {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using response = http::response<http::string_body>;

constexpr auto idle_timeout = std::chrono::seconds(60);  // a connection with no request for this long is closed

// One accepted connection; `busy` (on the connection's strand) says whether it is between reading a request and
// writing its answer, which a shutdown lets finish.
struct connection {
  explicit connection(tcp::socket s) : stream(std::move(s)) {}
  beast::tcp_stream stream;
  bool busy = false;
};

response text(http::status status, std::string body, const char* type = "text/plain; charset=utf-8") {
  response res{status, 11};
  res.set(http::field::content_type, type);
  res.body() = std::move(body);
  return res;
}

response json(http::status status, const nlohmann::json& body) {
  return text(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// Calls service::should_rate_limit from a coroutine: the completion may come inline or on another thread. What the
// service throws (it then never calls the completion) is rethrown in the coroutine (the session answers 500), not out
// of the I/O thread (which would end the process).
net::awaitable<rls_result> decide(service& svc, rls_request req) {
  co_return co_await net::async_initiate<decltype(net::use_awaitable), void(std::exception_ptr, rls_result)>(
      [&svc](auto handler, rls_request r) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        const auto deliver = [h](std::exception_ptr e, rls_result result) {
          auto ex = net::get_associated_executor(*h);
          net::dispatch(ex, [h, e, result = std::move(result)]() mutable { (*h)(e, std::move(result)); });
        };
        try {
          svc.should_rate_limit(std::move(r), [deliver](rls_result result) { deliver(nullptr, std::move(result)); });
        } catch (...) {
          deliver(std::current_exception(), rls_result{});
        }
      },
      net::use_awaitable, std::move(req));
}

net::awaitable<release_result> release(service& svc, std::string lease) {
  co_return co_await net::async_initiate<decltype(net::use_awaitable), void(release_result)>(
      [&svc](auto handler, std::string l) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        svc.release(std::move(l), [h](release_result r) {
          auto ex = net::get_associated_executor(*h);
          net::dispatch(ex, [h, r = std::move(r)]() mutable { (*h)(std::move(r)); });
        });
      },
      net::use_awaitable, std::move(lease));
}

}  // namespace

struct http_server::impl {
  impl(service& s, const http_server_options& o) : svc(s), opts(o), control(net::make_strand(ctx)), acceptor(control) {}

  service& svc;
  http_server_options opts;
  net::io_context ctx;
  net::strand<net::io_context::executor_type> control;  // the acceptor's: accepting and closing it never overlap
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::atomic<bool> serving{false};
  std::atomic<bool> stopping{false};
  int port = 0;

  admit::detail::mutex mutex;
  std::condition_variable all_closed;
  std::list<std::shared_ptr<connection>> connections ADMIT_GUARDED_BY(mutex);
  std::size_t busy ADMIT_GUARDED_BY(mutex) = 0;  // requests read and not yet answered (all_closed tells each answer)
  bool stopped ADMIT_GUARDED_BY(mutex) = false;

  net::awaitable<response> answer(http::request<http::string_body>& req);
  net::awaitable<response> answer_json(const std::string& body);
  net::awaitable<response> answer_release(const std::string& body);
  net::awaitable<void> session(std::shared_ptr<connection> c);
  net::awaitable<void> listen();
};

net::awaitable<response> http_server::impl::answer_json(const std::string& body) {
  const auto arrived = std::chrono::steady_clock::now();
  rls_pb::RateLimitRequest message;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = false;
  if (const auto parsed = google::protobuf::util::JsonStringToMessage(body, &message, parse); !parsed.ok()) {
    svc.record_invalid_request(std::chrono::steady_clock::now() - arrived);
    co_return text(http::status::bad_request,
                   "the body is not a RateLimitRequest in JSON: " + std::string(parsed.message()) + "\n");
  }
  rls_request req;
  if (auto refused = from_proto(message, opts.limits, req)) {
    svc.record_invalid_request(std::chrono::steady_clock::now() - arrived);
    co_return text(http::status::bad_request, *refused + "\n");
  }
  rls_result result = co_await decide(svc, std::move(req));
  if (result.failure) co_return text(http::status::bad_request, result.failure->message + "\n");
  rls_pb::RateLimitResponse out;
  to_proto(result.response, out);
  std::string body_out;
  if (const auto printed = google::protobuf::util::MessageToJsonString(out, &body_out); !printed.ok()) {
    co_return text(http::status::internal_server_error, std::string(printed.message()) + "\n");
  }
  const http::status status = result.response.overall_code == rls_code::over_limit ? http::status::too_many_requests
                              : result.response.overall_code == rls_code::ok       ? http::status::ok
                                                                             : http::status::internal_server_error;
  co_return text(status, std::move(body_out), "application/json");
}

net::awaitable<response> http_server::impl::answer_release(const std::string& body) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("lease") || !doc["lease"].is_string() ||
      doc["lease"].get_ref<const std::string&>().empty()) {
    co_return json(http::status::bad_request, {{"error", "expected a JSON object {\"lease\": \"<lease id>\"}"}});
  }
  const release_result r = co_await release(svc, doc["lease"].get<std::string>());
  switch (r.result) {
    case release_result::state::released:
      co_return json(http::status::ok, {{"released", true}});
    case release_result::state::not_held:
      co_return json(http::status::not_found,
                     {{"released", false}, {"error", "no such lease is held (unknown, already released, or expired)"}});
    case release_result::state::failed:
      break;
  }
  // Not "not held": the backend could not say, and the lease may still hold its permits until it expires.
  co_return json(http::status::service_unavailable,
                 {{"released", false},
                  {"error", "the backend could not be asked (" + r.error +
                                "): whether the lease is still held is unknown; try again, or let it expire"}});
}

net::awaitable<response> http_server::impl::answer(http::request<http::string_body>& req) {
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  auto only = [&](http::verb v) -> std::optional<response> {
    if (req.method() == v) return std::nullopt;
    response res = text(http::status::method_not_allowed, "use " + std::string(http::to_string(v)) + "\n");
    res.set(http::field::allow, http::to_string(v));
    return res;
  };
  if (path == "/json") {
    if (auto refused = only(http::verb::post)) co_return std::move(*refused);
    co_return co_await answer_json(req.body());
  }
  if (path == "/release") {
    if (auto refused = only(http::verb::post)) co_return std::move(*refused);
    co_return co_await answer_release(req.body());
  }
  if (path == "/healthcheck") {
    if (auto refused = only(http::verb::get)) co_return std::move(*refused);
    if (serving.load()) co_return text(http::status::ok, "OK");
    co_return text(http::status::internal_server_error, "not serving\n");
  }
  if (path == "/metrics") {
    if (auto refused = only(http::verb::get)) co_return std::move(*refused);
    co_return text(http::status::ok, svc.metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  }
  if (path == "/rules") {
    if (auto refused = only(http::verb::get)) co_return std::move(*refused);
    co_return text(http::status::ok, svc.current()->to_json(), "application/json");
  }
  co_return text(http::status::not_found, "no such path; try /json, /release, /healthcheck, /metrics or /rules\n");
}

net::awaitable<void> http_server::impl::session(std::shared_ptr<connection> c) {
  beast::flat_buffer buffer;
  for (;;) {
    // A shutdown sets `stopping` before it cancels idle connections' reads: a connection that comes back here after
    // the cancel ran leaves instead of reading again.
    if (stopping.load()) break;
    http::request_parser<http::string_body> parser;
    parser.body_limit(opts.max_body_bytes);
    c->stream.expires_after(idle_timeout);
    // The header first: a client that sent `Expect: 100-continue` (curl does for a body over 1 KiB) waits for the
    // interim answer before it sends the body — a second, by curl's default, when none comes. A body over the limit is
    // refused on its Content-Length alone (body_limit, below), before any of it is sent.
    auto [read_ec, n] = co_await http::async_read_header(c->stream, buffer, parser, net::as_tuple(net::use_awaitable));
    std::ignore = n;
    if (!read_ec && parser.get().version() >= 11 && beast::iequals(parser.get()[http::field::expect], "100-continue")) {
      http::response<http::empty_body> go_on{http::status::continue_, parser.get().version()};
      std::tie(read_ec, n) = co_await http::async_write(c->stream, go_on, net::as_tuple(net::use_awaitable));
    }
    if (!read_ec && !parser.is_done()) {
      std::tie(read_ec, n) = co_await http::async_read(c->stream, buffer, parser, net::as_tuple(net::use_awaitable));
    }
    if (read_ec == http::error::body_limit) {
      svc.record_invalid_request(std::chrono::nanoseconds::zero());  // refused as it came: no decision's latency
      response res = text(http::status::payload_too_large,
                          "the body is larger than " + std::to_string(opts.max_body_bytes) + " bytes\n");
      res.keep_alive(false);
      res.prepare_payload();
      co_await http::async_write(c->stream, res, net::as_tuple(net::use_awaitable));
      break;
    }
    if (read_ec) {
      if (read_ec != http::error::end_of_stream && read_ec != net::error::operation_aborted &&
          read_ec != beast::error::timeout && read_ec != net::error::connection_reset) {
        response res = text(http::status::bad_request, "malformed HTTP request: " + read_ec.message() + "\n");
        res.keep_alive(false);
        res.prepare_payload();
        co_await http::async_write(c->stream, res, net::as_tuple(net::use_awaitable));
      }
      break;
    }
    c->busy = true;
    {
      const admit::detail::lock_guard lock(mutex);
      ++busy;
    }
    http::request<http::string_body> req = parser.release();
    response res;
    try {
      res = co_await answer(req);
    } catch (const std::exception& e) {
      log::error("http request failed", {{"error", e.what()}});
      res = text(http::status::internal_server_error, std::string("the request failed: ") + e.what() + "\n");
    }
    // Not serving (a drain has begun, or the server has not started serving yet): the answer closes the connection.
    const bool keep = req.keep_alive() && serving.load() && !stopping.load();
    res.keep_alive(keep);
    res.prepare_payload();
    c->stream.expires_after(idle_timeout);
    auto [write_ec, w] = co_await http::async_write(c->stream, res, net::as_tuple(net::use_awaitable));
    std::ignore = w;
    c->busy = false;
    {
      const admit::detail::lock_guard lock(mutex);
      if (--busy == 0) all_closed.notify_all();
    }
    if (write_ec || !keep) break;
  }
  beast::error_code ignored;
  c->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  c->stream.close();
  const admit::detail::lock_guard lock(mutex);
  connections.remove(c);
  if (connections.empty()) all_closed.notify_all();
}

net::awaitable<void> http_server::impl::listen() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(net::make_strand(ctx), net::as_tuple(net::use_awaitable));
    if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      log::warn("http accept failed", {{"error", ec.message()}});
      continue;
    }
    auto c = std::make_shared<connection>(std::move(socket));
    {
      const admit::detail::lock_guard lock(mutex);
      if (stopping.load()) continue;  // closes the socket
      if (connections.size() >= opts.max_connections) {
        log::debug("http connection refused",
                   {{"reason", "max_connections reached"}, {"max_connections", opts.max_connections}});
        continue;  // closes the socket
      }
      connections.push_back(c);
    }
    auto ex = c->stream.get_executor();
    net::co_spawn(ex, session(std::move(c)), net::detached);
  }
}

http_server::http_server(service& svc, const http_server_options& opts) : impl_(std::make_unique<impl>(svc, opts)) {
  boost::system::error_code ec;
  const auto address = net::ip::make_address(opts.host, ec);
  const std::string where = admit::detail::host_port(opts.host, static_cast<unsigned>(opts.port));
  if (ec) throw std::runtime_error("cannot listen for HTTP on " + where + ": not an IP address");
  if (opts.max_connections == 0) {
    throw std::invalid_argument("http_server: max_connections must be at least 1, got 0");
  }
  if (opts.answer_grace.count() < 0) {
    throw std::invalid_argument("http_server: answer_grace must not be negative, got " +
                                std::to_string(opts.answer_grace.count()) + " ms");
  }
  auto& acceptor = impl_->acceptor;
  // Opens, sets the options and binds to `at`, listening; the error, if any, with the acceptor closed again.
  const auto listen_on = [&](const tcp::endpoint& at, bool dual_stack) {
    boost::system::error_code e;
    acceptor.open(at.protocol(), e);
    if (!e && dual_stack) acceptor.set_option(net::ip::v6_only(false), e);
    if (!e) acceptor.set_option(net::socket_base::reuse_address(true), e);
    if (!e && opts.reuse_port)
      acceptor.set_option(net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true), e);
    if (!e) acceptor.bind(at, e);
    if (!e) acceptor.listen(net::socket_base::max_listen_connections, e);
    if (e) {
      boost::system::error_code ignored;
      acceptor.close(ignored);
    }
    return e;
  };
  const auto port = static_cast<unsigned short>(opts.port);
  // 0.0.0.0 is every address, IPv6 ones too, as gRPC reads it for the gRPC port (and Go's net.Listen for
  // envoyproxy/ratelimit's): one socket on [::] that takes IPv4 as well; IPv4 alone where that socket cannot be had
  // (no IPv6), unless the port is busy.
  if (address.is_v4() && address.is_unspecified()) {
    ec = listen_on(tcp::endpoint(tcp::v6(), port), true);
    if (ec && ec != net::error::address_in_use) ec = listen_on(tcp::endpoint(address, port), false);
  } else {
    ec = listen_on(tcp::endpoint(address, port), false);
  }
  if (ec == net::error::address_in_use) {
    throw std::runtime_error("cannot listen for HTTP on " + where + ": " + ec.message() +
                             " (another admit serve, or another program, listens on port " + std::to_string(opts.port) +
                             ")");
  }
  if (ec) throw std::runtime_error("cannot listen for HTTP on " + where + ": " + ec.message());
  impl_->port = acceptor.local_endpoint().port();
  net::co_spawn(impl_->control, impl_->listen(), net::detached);
  for (int i = 0; i < std::max(1, opts.threads); ++i) impl_->threads.emplace_back([this] { impl_->ctx.run(); });
}

http_server::~http_server() {
  if (impl_) shutdown(std::chrono::system_clock::now());
}

int http_server::port() const noexcept { return impl_->port; }

void http_server::set_serving(bool serving) noexcept { impl_->serving.store(serving); }

void http_server::shutdown(std::chrono::system_clock::time_point deadline) {
  {
    const admit::detail::lock_guard lock(impl_->mutex);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  impl_->serving.store(false);
  {
    // While requests are in flight the port stays open and answers (GET /healthcheck: 500), so that a prober sees the
    // instance fail its health check, not a refused connection.
    admit::detail::unique_lock lock(impl_->mutex);
    impl_->all_closed.wait_until(lock.native(), deadline,
                                 [this]() ADMIT_REQUIRES(impl_->mutex) { return impl_->busy == 0; });
  }
  impl_->stopping.store(true);
  net::post(impl_->control, [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
  // Idle connections (waiting for a request) close now; busy ones after their answer.
  admit::detail::unique_lock lock(impl_->mutex);
  for (const auto& c : impl_->connections) {
    net::post(c->stream.get_executor(), [c] {
      beast::error_code ignored;  // the session may have closed its socket already
      if (!c->busy) c->stream.socket().cancel(ignored);
    });
  }
  // Until the deadline, and answer_grace past it: what still waits for the backend then is answered by admit serve's
  // failure policy at the deadline, and the answer is written.
  impl_->all_closed.wait_until(lock.native(), deadline + impl_->opts.answer_grace,
                               [this]() ADMIT_REQUIRES(impl_->mutex) { return impl_->connections.empty(); });
  // Then every connection left is closed: what it reads or writes next fails at once. A session still
  // waiting for its decision ends when the decision comes (the backend bounds how long that takes), and the threads
  // keep running until then, so that the decision's completion has somewhere to go.
  for (const auto& c : impl_->connections) {
    net::post(c->stream.get_executor(), [c] {
      beast::error_code ignored;
      c->stream.socket().close(ignored);
    });
  }
  impl_->all_closed.wait(lock.native(), [this]() ADMIT_REQUIRES(impl_->mutex) { return impl_->connections.empty(); });
  lock.unlock();
  impl_->ctx.stop();
  for (std::thread& t : impl_->threads) t.join();
}

}  // namespace admit::serve
