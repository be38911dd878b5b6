// The middleware: a stack of admission layers around a coroutine handler, for any Request and Response types.
// Here: a per-client rate limit (2 requests, then one a minute), load shedding, and at most one request at once.
// A refused request is a value: its status (429/503) and the fields to send (Retry-After, RateLimit-*).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <iostream>
#include <string>
#include <string_view>

#include "admit/asio/middleware.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/semaphore.hpp"

namespace net = boost::asio;
using namespace std::chrono_literals;

struct request {
  std::string client;
  std::string path;
};
using response = std::string;

// The protected handler: takes 10 ms.
net::awaitable<response> handle(request& req) {
  net::steady_timer work(co_await net::this_coro::executor, 10ms);
  co_await work.async_wait(net::use_awaitable);
  co_return "hello " + req.client;
}

int main() {
  net::io_context ctx;
  admit::keyed<admit::gcra> per_client{admit::rate::per(1, std::chrono::minutes(1)), 2};
  admit::semaphore sem{1};
  const auto service = admit::asio::middleware<request, response>{}
                           .keyed_rate_limit(per_client, [](const request& r) -> std::string_view { return r.client; })
                           .load_shed()
                           .concurrency_limit(sem)
                           .bind(handle);

  // Sends one request and prints what a server would answer.
  auto send = [&](request req) -> net::awaitable<void> {
    auto out = co_await service(req);
    if (out) {
      std::cout << req.client << " " << req.path << ": 200 " << out.response();
      for (const auto& f : admit::asio::rate_limit_fields(*out.rate()))
        std::cout << ", " << f.name() << ": " << f.value();
      std::cout << "\n";
    } else {
      const auto& r = out.rejected();
      std::cout << req.client << " " << req.path << ": " << r.status() << " " << to_string(r.reason);
      for (const auto& f : r.fields()) std::cout << ", " << f.name() << ": " << f.value();
      std::cout << "\n";
    }
    // out.release() here, after writing the response, would return the concurrency permit; its destructor does.
  };

  for (const char* path : {"/1", "/2", "/3"}) {  // one after the other: the third is over alice's limit
    net::co_spawn(ctx, send({"alice", path}), net::detached);
    ctx.run();
    ctx.restart();
  }
  // Two at once: the second finds the only permit taken and is shed instead of queueing.
  net::co_spawn(ctx, send({"bob", "/a"}), net::detached);
  net::co_spawn(ctx, send({"carol", "/b"}), net::detached);
  ctx.run();
}
