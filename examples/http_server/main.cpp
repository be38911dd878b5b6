// admit_http_server — a Boost.Beast HTTP/1.1 server (C++20 coroutines) protected by admit's middleware: a GCRA rate
// limit per client IP (429 with Retry-After and RateLimit-* fields), then a global concurrency limit with a bounded
// queue and a wait deadline (503), optionally shedding instead of queueing. Every request is answered by a handler
// that "works" for --work milliseconds (a timer) and says "ok".
//
//   admit_http_server --port 0 --rate 10/s --burst 20 --concurrency 64 --queue 128 --deadline 1000 --work 5
//   admit_http_server --port 0 --no-admit        # the same server without the middleware, for the load test
//
// It prints "listening on <address>:<port>" once it accepts connections.
// - GET /stats answers, outside every limit, the permit counts: lines "capacity N", "available N", "in_use N",
//   "waiting N" (requests queued for a permit), "started N" (requests the handler has started) and "connections N".
// - GET /metrics answers, outside every limit, the limits' metrics in the Prometheus text format
//   (admit::metrics::registry: the limiters "per_client" and "concurrency", with the label route="/"); empty with
//   --no-admit.
// - A client that closes its connection while its request waits for a permit leaves the queue at once; one that
//   closes while its request runs cancels it. Either way the permit is not held for a client that is gone.
// - An HTTP/1.1 request without exactly one Host field is answered 400 and the connection closed (RFC 9112, 3.2).
// - On SIGINT or SIGTERM: the listener closes; every request queued for a permit is answered 503 "closed" with
//   Connection: close; idle keep-alive connections close; requests already admitted run to the end and are answered
//   with Connection: close, or, if still running when --grace milliseconds have passed, are answered 503 "closed".
//   The process exits 0 once every connection is closed (at most one second after the grace period).
#include <atomic>
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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "admit/asio/middleware.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/metrics/prometheus.hpp"
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
  std::chrono::milliseconds grace{10000};
  std::size_t max_keys = 100'000;
  unsigned threads = 1;
  bool shed = false;
  bool admit = true;
  bool rate_fields = true;  // RateLimit-* fields on admitted responses too
};

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "admit_http_server: " << error << "\n"
            << "usage: admit_http_server [--address A] [--port N] [--rate R] [--burst N] [--concurrency N]\n"
            << "         [--queue N] [--deadline MS] [--work MS] [--max-keys N] [--threads N] [--grace MS]\n"
            << "         [--shed] [--no-rate-fields] [--no-admit]\n"
            << "  --rate       per-client-IP rate, as admit::rate::parse reads it (\"10/s\", \"5/min\", \"inf\")\n"
            << "  --burst      per-client-IP burst\n"
            << "  --concurrency requests handled at once (global); --queue: requests that may wait for one\n"
            << "  --deadline   how long a request may wait for a concurrency permit (ms)\n"
            << "  --work       simulated handler time (ms); --shed: refuse at once instead of queueing\n"
            << "  --grace      after SIGTERM, how long admitted requests may still run (ms)\n"
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
    else if (arg == "--grace")
      o.grace = std::chrono::milliseconds(to_int(arg, value(), 0));
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
http_response render(const admit::asio::rejection& r, unsigned version) {
  http_response res{static_cast<http::status>(r.status()), version};
  for (const auto& f : r.fields()) res.set(f.name(), f.value());
  res.set(http::field::content_type, "text/plain");
  res.body() = std::string(admit::asio::to_string(r.reason)) + "\n";
  return res;
}

http_response plain(http::status status, unsigned version, std::string body) {
  http_response res{status, version};
  res.set(http::field::content_type, "text/plain");
  res.body() = std::move(body);
  return res;
}

// One accepted connection. Its members are used only on the connection's strand, except through server_state, which
// reaches them by posting to that strand.
struct connection {
  explicit connection(tcp::socket socket) : stream(std::move(socket)), abort(stream.get_executor()) {
    abort.expires_at(net::steady_timer::time_point::max());
  }
  beast::tcp_stream stream;
  net::steady_timer abort;  // cancelled when the grace period after SIGTERM ends: the request in flight gives up
  bool idle = false;        // reading the next request (nothing admitted, nothing to answer)
  std::list<std::shared_ptr<connection>>::iterator self;
};

// The state every connection shares: the live connections (for shutdown) and the counters of GET /stats.
//
// Shutdown, on SIGINT or SIGTERM: the listener closes; the semaphore closes, so every request queued for a permit is
// answered 503 "closed" with Connection: close; idle keep-alive connections close; requests already admitted run to
// the end and are answered with Connection: close. Requests still running when the grace period (--grace) ends are
// answered 503 "closed" too; one second later the connections still open (a client that does not take its answer)
// are closed. The process exits 0 once every connection has closed.
class server_state {
 public:
  std::atomic<std::uint64_t> started{0};  // requests admitted to the handler
  std::atomic<bool> stopping{false};

  std::size_t connections() const {
    std::lock_guard lock(mutex_);
    return live_.size();
  }

  // What the last session to end after shutdown() calls.
  void set_on_last(std::function<void()> on_last) {
    std::lock_guard lock(mutex_);
    on_last_ = std::move(on_last);
  }

  void add(const std::shared_ptr<connection>& c) {
    std::lock_guard lock(mutex_);
    c->self = live_.insert(live_.end(), c);
  }

  // Called as a session ends, however it ends (its coroutine returns, throws, or is destroyed with the io_context);
  // the last one to end after shutdown() calls on_last.
  void remove(connection& c) {
    std::function<void()> last;
    {
      std::lock_guard lock(mutex_);
      live_.erase(c.self);
      if (stopping.load() && live_.empty()) last = on_last_;
    }
    if (last) last();
  }

  // Starts the shutdown: closes idle connections (each on its strand). Returns whether any connection is left.
  bool shutdown() {
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

  // The grace period is over: every request in flight gives up (its session answers 503 "closed").
  void abort_all() {
    std::lock_guard lock(mutex_);
    for (const auto& c : live_) net::post(c->stream.get_executor(), [c] { c->abort.cancel(); });
  }

  // One second after that: the sockets of the connections left are closed (each on its strand), so that a write that
  // a client never reads fails and its session ends. Every session then ends on its own and run() returns: nothing
  // is left for the io_context's destructor to tear down.
  void close_all() {
    std::lock_guard lock(mutex_);
    for (const auto& c : live_) {
      net::post(c->stream.get_executor(), [c] {
        boost::system::error_code ignored;
        c->stream.socket().close(ignored);
      });
    }
  }

 private:
  mutable std::mutex mutex_;
  std::list<std::shared_ptr<connection>> live_;
  std::function<void()> on_last_;
};

// Why watch() ended before the request's answer was ready.
enum class interruption { client_closed, aborted };

// Completes when the client closes (or resets) its side of the connection, or when the grace period after SIGTERM
// ends. Runs beside a request's admission and handler, so a client that gives up while it waits for a permit leaves
// the queue at once (the request's coroutine is cancelled). Consumes no data: when the client sends more (a pipelined
// request) instead of closing, only the end of the grace period ends the watch.
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

// GET /stats: the permit counts, answered outside every limit. Lines "name value".
http_response stats(const server_state& st, const admit::semaphore* sem, unsigned version) {
  std::string body;
  if (sem != nullptr) {
    body += "capacity " + std::to_string(sem->capacity()) + "\n";
    body += "available " + std::to_string(sem->available()) + "\n";
    body += "in_use " + std::to_string(sem->in_use()) + "\n";
    body += "waiting " + std::to_string(sem->waiting()) + "\n";
  }
  body += "started " + std::to_string(st.started.load()) + "\n";
  body += "connections " + std::to_string(st.connections()) + "\n";
  return plain(http::status::ok, version, std::move(body));
}

// RFC 9112 section 3.2: an HTTP/1.1 request must carry exactly one Host field (it may be empty).
bool host_ok(const http::request<http::string_body>& m) { return m.version() < 11 || m.count(http::field::host) == 1; }

// GET /metrics: the registry's Prometheus text exposition, answered outside every limit.
http_response metrics(const admit::metrics::registry* reg, unsigned version) {
  auto res = plain(http::status::ok, version, reg != nullptr ? reg->text() : std::string());
  res.set(http::field::content_type, admit::metrics::registry::content_type);
  return res;
}

struct context {
  server_state* state;
  admit::semaphore* sem;
  const admit::metrics::registry* metrics;
  work_handler handler;
  bool rate_fields;
};

// Takes a connection off server_state's list when its session ends, however it ends.
struct unlist_on_exit {
  unlist_on_exit(server_state& s, connection& conn) : state(s), c(conn) {}
  server_state& state;
  connection& c;
  unlist_on_exit(const unlist_on_exit&) = delete;
  unlist_on_exit& operator=(const unlist_on_exit&) = delete;
  ~unlist_on_exit() { state.remove(c); }
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

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  try {
    server_state state;
    const work_handler handler{o.work, &state.started};
    if (!o.admit) {
      const no_service none;
      return serve(o, &none, nullptr, nullptr, state, handler);
    }
    // The limiters outlive the io_context inside serve(), and so every request that uses them.
    admit::keyed<admit::gcra> per_client{o.rate, o.burst, {.max_keys = o.max_keys}};
    admit::semaphore sem{o.concurrency, {.max_waiters = o.queue}};
    per_client.enable_metrics();  // before any request uses them
    sem.enable_metrics();
    admit::metrics::registry reg;  // declared after the limiters: destroyed before them
    reg.add("per_client", {{"route", "/"}}, per_client);
    reg.add("concurrency", {{"route", "/"}}, sem);
    const auto client_of = [](const http_request& r) { return r.client; };
    const auto base = admit::asio::middleware<http_request, http_response>{}.keyed_rate_limit(per_client, client_of);
    if (o.shed) {
      const auto svc = base.load_shed().concurrency_limit(sem).bind(handler);
      return serve(o, &svc, &sem, &reg, state, handler);
    }
    const auto svc = base.deadline(o.deadline).concurrency_limit(sem).bind(handler);
    return serve(o, &svc, &sem, &reg, state, handler);
  } catch (const std::exception& e) {
    std::cerr << "admit_http_server: " << e.what() << "\n";
    return 1;
  }
}
