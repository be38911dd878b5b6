// admit_http_server — a Boost.Beast HTTP/1.1 server (C++20 coroutines) protected by admit's middleware: a GCRA rate
// limit per client IP (429 with Retry-After and RateLimit-* fields), then a global concurrency limit with a bounded
// queue and a wait deadline (503), optionally shedding instead of queueing. Every request is answered by a handler
// that "works" for --work milliseconds (a timer) and says "ok".
//
//   admit_http_server --port 0 --rate 10/s --burst 20 --concurrency 64 --queue 128 --deadline 1000 --work 5
//   admit_http_server --port 0 --no-admit        # the same server without the middleware, for the load test
//
// It prints "listening on <address>:<port>" once it accepts connections, and exits 0 on SIGINT or SIGTERM after
// closing the listener and the limiter (waiting requests are answered 503 closed if their connection is still up).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "admit/asio/middleware.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/rate.hpp"
#include "admit/semaphore.hpp"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct options {
  std::string address = "127.0.0.1";
  unsigned short port = 8080;
  admit::rate rate = admit::rate::per_second(100);
  std::int64_t burst = 100;
  std::int64_t concurrency = 64;
  std::size_t queue = 128;
  std::chrono::milliseconds deadline{1000};
  std::chrono::milliseconds work{0};
  std::size_t max_keys = 100'000;
  unsigned threads = 1;
  bool shed = false;
  bool admit = true;
  bool rate_fields = true;  // RateLimit-* fields on admitted responses too
};

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "admit_http_server: " << error << "\n"
            << "usage: admit_http_server [--address A] [--port N] [--rate R] [--burst N] [--concurrency N]\n"
            << "         [--queue N] [--deadline MS] [--work MS] [--max-keys N] [--threads N] [--shed]\n"
            << "         [--no-rate-fields] [--no-admit]\n"
            << "  --rate       per-client-IP rate, as admit::rate::parse reads it (\"10/s\", \"5/min\", \"inf\")\n"
            << "  --burst      per-client-IP burst\n"
            << "  --concurrency requests handled at once (global); --queue: requests that may wait for one\n"
            << "  --deadline   how long a request may wait for a concurrency permit (ms)\n"
            << "  --work       simulated handler time (ms); --shed: refuse at once instead of queueing\n"
            << "  --no-rate-fields: RateLimit-* fields only on 429s, not on admitted responses\n"
            << "  --no-admit   serve without the middleware\n";
  std::exit(2);
}

std::int64_t to_int(std::string_view name, const char* text, std::int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < min) usage(std::string(name) + ": not an integer >= " + std::to_string(min));
  return v;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--address")
      o.address = value();
    else if (arg == "--port")
      o.port = static_cast<unsigned short>(to_int(arg, value(), 0));
    else if (arg == "--rate") {
      try {
        o.rate = admit::rate::parse(value());
      } catch (const std::invalid_argument& e) {
        usage(e.what());
      }
    } else if (arg == "--burst")
      o.burst = to_int(arg, value(), 1);
    else if (arg == "--concurrency")
      o.concurrency = to_int(arg, value(), 1);
    else if (arg == "--queue")
      o.queue = static_cast<std::size_t>(to_int(arg, value(), 0));
    else if (arg == "--deadline")
      o.deadline = std::chrono::milliseconds(to_int(arg, value(), 0));
    else if (arg == "--work")
      o.work = std::chrono::milliseconds(to_int(arg, value(), 0));
    else if (arg == "--max-keys")
      o.max_keys = static_cast<std::size_t>(to_int(arg, value(), 1));
    else if (arg == "--threads")
      o.threads = static_cast<unsigned>(to_int(arg, value(), 1));
    else if (arg == "--shed")
      o.shed = true;
    else if (arg == "--no-admit")
      o.admit = false;
    else if (arg == "--no-rate-fields")
      o.rate_fields = false;
    else if (arg == "--help" || arg == "-h")
      usage("help");
    else
      usage("unknown option " + std::string(arg));
  }
  return o;
}

// What the middleware sees of a request: the parsed message and the client's address (the rate-limit key).
struct http_request {
  http::request<http::string_body> message;
  std::string_view client;
};
using http_response = http::response<http::string_body>;

// The service type of --no-admit.
struct no_service {};

// The protected work: waits --work milliseconds, then answers 200 "ok".
struct work_handler {
  std::chrono::milliseconds work;
  net::awaitable<http_response> operator()(http_request& req) const {
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
http_response render(const admit::asio::rejection& r, unsigned version) {
  http_response res{static_cast<http::status>(r.status()), version};
  for (const auto& f : r.fields()) res.set(f.name(), f.value());
  res.set(http::field::content_type, "text/plain");
  res.body() = std::string(admit::asio::to_string(r.reason)) + "\n";
  return res;
}

// One connection: read a request, answer it (through the service when there is one), until the client closes.
template <class Service>
net::awaitable<void> session(tcp::socket socket, const Service* service, work_handler handler, bool rate_fields) {
  beast::tcp_stream stream(std::move(socket));
  boost::system::error_code addr_ec;
  const auto endpoint = stream.socket().remote_endpoint(addr_ec);
  const std::string client = addr_ec ? std::string("unknown") : endpoint.address().to_string();
  beast::flat_buffer buffer;
  for (;;) {
    http_request req;
    req.client = client;
    auto [read_ec, read_n] = co_await http::async_read(stream, buffer, req.message, net::as_tuple(net::use_awaitable));
    if (read_ec) break;
    const bool keep_alive = req.message.keep_alive();
    const unsigned version = req.message.version();
    boost::system::error_code write_ec;
    if constexpr (!std::is_same_v<Service, no_service>) {
      auto out = co_await (*service)(req);
      // An admitted response is written where it is, in the outcome (no move); a refusal is rendered beside it.
      std::optional<http_response> refusal;
      http_response& res = out ? out.response() : refusal.emplace(render(out.rejected(), version));
      if (rate_fields && out && out.rate()) {
        for (const auto& f : admit::asio::rate_limit_fields(*out.rate())) res.set(f.name(), f.value());
      }
      res.keep_alive(keep_alive);
      res.prepare_payload();
      std::tie(write_ec, std::ignore) = co_await http::async_write(stream, res, net::as_tuple(net::use_awaitable));
      out.release();  // the concurrency permit is held until the response is written
    } else {
      http_response res = co_await handler(req);
      res.keep_alive(keep_alive);
      res.prepare_payload();
      std::tie(write_ec, std::ignore) = co_await http::async_write(stream, res, net::as_tuple(net::use_awaitable));
    }
    if (write_ec || !keep_alive) break;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

template <class Service>
net::awaitable<void> listen(tcp::acceptor& acceptor, const Service* service, work_handler handler, bool rate_fields) {
  for (;;) {
    auto [ec, socket] =
        co_await acceptor.async_accept(net::make_strand(acceptor.get_executor()), net::as_tuple(net::use_awaitable));
    if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. too many open files: keep serving the connections we have
    socket.set_option(tcp::no_delay(true));
    const auto ex = socket.get_executor();
    net::co_spawn(ex, session(std::move(socket), service, handler, rate_fields), net::detached);
  }
}

template <class Service>
int serve(const options& o, const Service* service, admit::semaphore* sem) {
  net::io_context ctx{static_cast<int>(o.threads)};
  tcp::acceptor acceptor(ctx);
  const tcp::endpoint endpoint(net::ip::make_address(o.address), o.port);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  std::cout << "listening on " << o.address << ":" << acceptor.local_endpoint().port() << std::endl;

  net::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    std::cout << "shutting down" << std::endl;
    boost::system::error_code ignored;
    acceptor.close(ignored);
    if (sem != nullptr) sem->close();
    ctx.stop();
  });
  net::co_spawn(ctx, listen(acceptor, service, work_handler{o.work}, o.rate_fields), net::detached);

  std::vector<std::jthread> pool;
  for (unsigned i = 1; i < o.threads; ++i) pool.emplace_back([&ctx] { ctx.run(); });
  ctx.run();
  pool.clear();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  try {
    if (!o.admit) {
      const no_service none;
      return serve(o, &none, nullptr);
    }
    // The limiters outlive the io_context inside serve(), and so every request that uses them.
    admit::keyed<admit::gcra> per_client{o.rate, o.burst, {.max_keys = o.max_keys}};
    admit::semaphore sem{o.concurrency, {.max_waiters = o.queue}};
    const auto client_of = [](const http_request& r) { return r.client; };
    const auto base = admit::asio::middleware<http_request, http_response>{}.keyed_rate_limit(per_client, client_of);
    if (o.shed) {
      const auto svc = base.load_shed().concurrency_limit(sem).bind(work_handler{o.work});
      return serve(o, &svc, &sem);
    }
    const auto svc = base.deadline(o.deadline).concurrency_limit(sem).bind(work_handler{o.work});
    return serve(o, &svc, &sem);
  } catch (const std::exception& e) {
    std::cerr << "admit_http_server: " << e.what() << "\n";
    return 1;
  }
}
