// The cost of admit's request middleware (<admit/asio/middleware.hpp>) per request, admitted at once: one coroutine
// awaiting a trivial handler directly, and through stacks of layers (the same coroutine, one io_context, one thread).
// The difference to BM_Direct is what the middleware adds to a request. The *Beast cases answer with a Boost.Beast
// response (as examples/http_server does), which costs something to move: they count what the middleware adds when the
// response travels through the outcome. bench/http_load.sh measures the same under a real HTTP load.
#include <benchmark/benchmark.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>
#include <string_view>

#include "admit/asio/middleware.hpp"
#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/semaphore.hpp"

namespace {

namespace net = boost::asio;

struct request {
  std::string client = "192.168.100.200";
};
using response = int;

net::awaitable<response> handler(request&) { co_return 200; }

// Runs `body` (a coroutine that loops over the benchmark's iterations) on a fresh io_context.
template <class Body>
void run(benchmark::State& state, Body body) {
  net::io_context ctx{1};
  net::co_spawn(ctx, body(state), net::detached);
  ctx.run();
}

void BM_Direct(benchmark::State& state) {
  run(state, [](benchmark::State& s) -> net::awaitable<void> {
    request req;
    for (auto _ : s) benchmark::DoNotOptimize(co_await handler(req));
  });
}
BENCHMARK(BM_Direct);

template <class Middleware>
net::awaitable<void> loop(benchmark::State& s, const Middleware& mw) {
  request req;
  for (auto _ : s) {
    auto out = co_await mw.call(req, handler);
    if (!out) s.SkipWithError("refused");
    benchmark::DoNotOptimize(out.response());
  }  // the outcome, and its permits, die here: the release is counted
}

void BM_EmptyStack(benchmark::State& state) {
  const auto mw = admit::asio::middleware<request, response>{};
  run(state, [&](benchmark::State& s) { return loop(s, mw); });
}
BENCHMARK(BM_EmptyStack);

void BM_ConcurrencyLimit(benchmark::State& state) {
  admit::semaphore sem{1 << 20};
  const auto mw = admit::asio::middleware<request, response>{}.concurrency_limit(sem);
  run(state, [&](benchmark::State& s) { return loop(s, mw); });
}
BENCHMARK(BM_ConcurrencyLimit);

void BM_RateLimit(benchmark::State& state) {
  admit::gcra limiter{admit::rate::per_second(1e9), 1'000'000'000};
  const auto mw = admit::asio::middleware<request, response>{}.rate_limit(limiter);
  run(state, [&](benchmark::State& s) { return loop(s, mw); });
}
BENCHMARK(BM_RateLimit);

void BM_KeyedRateLimit(benchmark::State& state) {
  admit::keyed<admit::gcra> per_client{admit::rate::per_second(1e9), 1'000'000'000};
  const auto mw = admit::asio::middleware<request, response>{}.keyed_rate_limit(
      per_client, [](const request& r) -> std::string_view { return r.client; });
  run(state, [&](benchmark::State& s) { return loop(s, mw); });
}
BENCHMARK(BM_KeyedRateLimit);

// The HTTP example's stack: keyed rate limit, deadline, concurrency limit.
void BM_ServerStack(benchmark::State& state) {
  admit::keyed<admit::gcra> per_client{admit::rate::per_second(1e9), 1'000'000'000};
  admit::semaphore sem{1 << 20, {.max_waiters = 1024}};
  const auto mw = admit::asio::middleware<request, response>{}
                      .keyed_rate_limit(per_client, [](const request& r) -> std::string_view { return r.client; })
                      .deadline(std::chrono::seconds(1))
                      .concurrency_limit(sem);
  run(state, [&](benchmark::State& s) { return loop(s, mw); });
}
BENCHMARK(BM_ServerStack);

// A request that is shed at once (load_shed + a concurrency limit with no free permit): the refusal path.
void BM_Shed(benchmark::State& state) {
  admit::semaphore sem{1};
  auto held = sem.try_acquire();
  const auto mw = admit::asio::middleware<request, response>{}.load_shed().concurrency_limit(sem);
  run(state, [&](benchmark::State& s) -> net::awaitable<void> {
    request req;
    for (auto _ : s) {
      auto out = co_await mw.call(req, handler);
      if (out) s.SkipWithError("admitted");
      benchmark::DoNotOptimize(out.rejected().status());
    }
  });
}
BENCHMARK(BM_Shed);

// The same with a Boost.Beast response (one header field, a short body), built by the handler as an HTTP handler does.
using beast_response = boost::beast::http::response<boost::beast::http::string_body>;

net::awaitable<beast_response> beast_handler(request&) {
  beast_response res{boost::beast::http::status::ok, 11};
  res.set(boost::beast::http::field::content_type, "text/plain");
  res.body() = "ok\n";
  co_return res;
}

void BM_DirectBeast(benchmark::State& state) {
  run(state, [](benchmark::State& s) -> net::awaitable<void> {
    request req;
    for (auto _ : s) {
      beast_response res = co_await beast_handler(req);
      benchmark::DoNotOptimize(res.body().data());
    }
  });
}
BENCHMARK(BM_DirectBeast);

void BM_ServerStackBeast(benchmark::State& state) {
  admit::keyed<admit::gcra> per_client{admit::rate::per_second(1e9), 1'000'000'000};
  admit::semaphore sem{1 << 20, {.max_waiters = 1024}};
  const auto mw = admit::asio::middleware<request, beast_response>{}
                      .keyed_rate_limit(per_client, [](const request& r) -> std::string_view { return r.client; })
                      .deadline(std::chrono::seconds(1))
                      .concurrency_limit(sem);
  run(state, [&](benchmark::State& s) -> net::awaitable<void> {
    request req;
    for (auto _ : s) {
      auto out = co_await mw.call(req, beast_handler);
      if (!out) s.SkipWithError("refused");
      benchmark::DoNotOptimize(out.response().body().data());
    }
  });
}
BENCHMARK(BM_ServerStackBeast);

}  // namespace

// main(): bench/threaded_main.cpp (every case in a threaded process).
