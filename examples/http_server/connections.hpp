// examples/http_server/connections.hpp — admit_http_server's connections: one accepted connection, the state every
// connection shares (the live connections, the steps of the shutdown, the counters of GET /stats), and the watch that
// notices a client that leaves while its request waits or runs.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <utility>

namespace http_server {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

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
//
// Thread safety: every member may be called from any thread (a mutex guards the list).
class server_state {
 public:
  std::atomic<std::uint64_t> started{0};  // requests admitted to the handler
  std::atomic<bool> stopping{false};

  std::size_t connections() const;

  // What the last session to end after shutdown() calls.
  void set_on_last(std::function<void()> on_last);

  void add(const std::shared_ptr<connection>& c);

  // Called as a session ends, however it ends (its coroutine returns, throws, or is destroyed with the io_context);
  // the last one to end after shutdown() calls on_last.
  void remove(connection& c);

  // Starts the shutdown: closes idle connections (each on its strand). Returns whether any connection is left.
  bool shutdown();

  // The grace period is over: every request in flight gives up (its session answers 503 "closed").
  void abort_all();

  // One second after that: the sockets of the connections left are closed (each on its strand), so that a write that
  // a client never reads fails and its session ends. Every session then ends on its own and run() returns: nothing
  // is left for the io_context's destructor to tear down.
  void close_all();

 private:
  mutable std::mutex mutex_;
  std::list<std::shared_ptr<connection>> live_;
  std::function<void()> on_last_;
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

// Why watch() ended before the request's answer was ready.
enum class interruption { client_closed, aborted };

// Completes when the client closes (or resets) its side of the connection, or when the grace period after SIGTERM
// ends. Runs beside a request's admission and handler, so a client that gives up while it waits for a permit leaves
// the queue at once (the request's coroutine is cancelled). Consumes no data: when the client sends more (a pipelined
// request) instead of closing, only the end of the grace period ends the watch. On the connection's strand.
net::awaitable<interruption> watch(connection& c);

}  // namespace http_server
