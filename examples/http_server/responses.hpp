// examples/http_server/responses.hpp — what admit_http_server answers: the request as the middleware sees it, the
// protected work's 200 "ok", a refusal's 429 or 503, and the answers outside every limit (GET /stats, GET /metrics,
// the 400 of a request without exactly one Host field).
#pragma once

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "admit/asio/middleware.hpp"
#include "admit/metrics/prometheus.hpp"
#include "admit/semaphore.hpp"

namespace http_server {

namespace net = boost::asio;
namespace http = boost::beast::http;

class server_state;

// What the middleware sees of a request: the parsed message and the client's address (the rate-limit key).
struct http_request {
  http::request<http::string_body> message;
  std::string_view client;
};
using http_response = http::response<http::string_body>;

// The service type of --no-admit.
struct no_service {};

// The protected work: waits --work milliseconds, then answers 200 "ok". Counts the requests it starts (/stats).
struct work_handler {
  std::chrono::milliseconds work;
  std::atomic<std::uint64_t>* started;
  net::awaitable<http_response> operator()(http_request& req) const {
    started->fetch_add(1, std::memory_order_relaxed);
    if (work.count() > 0) {
      net::steady_timer timer(co_await net::this_coro::executor, work);
      co_await timer.async_wait(net::as_tuple(net::use_awaitable));
    }
    http_response res{http::status::ok, req.message.version()};
    res.set(http::field::content_type, "text/plain");
    res.body() = "ok\n";
    co_return res;
  }
};

// 429 or 503 with the rejection's fields.
http_response render(const admit::asio::rejection& r, unsigned version);

// A text/plain response.
http_response plain(http::status status, unsigned version, std::string body);

// GET /stats: the permit counts (none when `sem` is null), answered outside every limit. Lines "name value".
http_response stats(const server_state& st, const admit::semaphore* sem, unsigned version);

// RFC 9112 section 3.2: an HTTP/1.1 request must carry exactly one Host field (it may be empty).
bool host_ok(const http::request<http::string_body>& m);

// GET /metrics: the registry's Prometheus text exposition (empty when `reg` is null), answered outside every limit.
http_response metrics(const admit::metrics::registry* reg, unsigned version);

}  // namespace http_server
