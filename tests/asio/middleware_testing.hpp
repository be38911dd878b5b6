// tests/asio/middleware_testing.hpp — what the tests of admit::asio::middleware share: starting mw.call(req, handler)
// as a coroutine on an io_context, its outcome (or exception) caught for the test to look at once the context has run.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <optional>

namespace admit::asio::testing {

// Starts mw.call(req, handler) on ctx (restarted first: a context that ran out of work earlier in a test stopped);
// the outcome lands in `out`, or the exception in `*error` when `error` is not null. `mw`, `req` and `out` must outlive
// the run of ctx that completes the call.
template <class Middleware, class Request, class Handler, class Outcome>
void start(boost::asio::io_context& ctx, const Middleware& mw, Request& req, Handler handler,
           std::optional<Outcome>& out, std::exception_ptr* error = nullptr) {
  ctx.restart();
  boost::asio::co_spawn(
      ctx,
      [&mw, &req, handler, &out]() -> boost::asio::awaitable<void> { out.emplace(co_await mw.call(req, handler)); },
      [error](std::exception_ptr e) {
        if (error != nullptr) *error = e;
      });
}

}  // namespace admit::asio::testing
