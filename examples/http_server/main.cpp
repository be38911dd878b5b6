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
//
// The files: options.hpp (the command line), connections.hpp (a connection, the state they share, the shutdown and
// the watch for a client that leaves), responses.hpp (what it answers), server.hpp (the sessions, the listener and
// serve()); here, the limiters and the middleware's stack.
#include <exception>
#include <iostream>

#include "admit/asio/middleware.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/metrics/prometheus.hpp"
#include "admit/semaphore.hpp"
#include "options.hpp"
#include "responses.hpp"
#include "server.hpp"

int main(int argc, char** argv) {
  using namespace http_server;
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
