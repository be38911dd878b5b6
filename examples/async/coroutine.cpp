// Waiting for a permit in a coroutine: co_await async_acquire(..., use_awaitable). as_tuple turns errors into values;
// a timeout is a timer raced against the wait (awaitable operators): whichever completes first cancels the other.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <iostream>
#include <string>

#include "admit/asio/async_acquire.hpp"
#include "admit/semaphore.hpp"

namespace net = boost::asio;
using namespace std::chrono_literals;
using namespace net::experimental::awaitable_operators;

// Takes a permit, works (here: yields to the other coroutines twice), returns the permit at the end of its scope.
net::awaitable<void> worker(admit::semaphore& sem, std::string name) {
  auto [ec, permit] = co_await admit::asio::async_acquire(sem, 1, net::as_tuple(net::use_awaitable));
  if (ec) co_return;
  std::cout << name << " starts\n";
  co_await net::post(co_await net::this_coro::executor, net::use_awaitable);
  co_await net::post(co_await net::this_coro::executor, net::use_awaitable);
  std::cout << name << " ends\n";
}

// Waits at most 20 ms for a permit.
net::awaitable<void> impatient(admit::semaphore& sem) {
  net::steady_timer timer(co_await net::this_coro::executor, 20ms);
  auto result =
      co_await (admit::asio::async_acquire(sem, 1, net::use_awaitable) || timer.async_wait(net::use_awaitable));
  std::cout << (result.index() == 0 ? "impatient got a permit\n" : "impatient gave up after 20 ms\n");
}

int main() {
  net::io_context ctx;
  admit::semaphore sem{2};
  for (const char* name : {"a", "b", "c"}) net::co_spawn(ctx, worker(sem, name), net::detached);
  ctx.run();  // a and b run at once; c waits for a's permit (FIFO)

  auto held = sem.try_acquire(2);  // both permits busy
  net::co_spawn(ctx, impatient(sem), net::detached);
  ctx.restart();
  ctx.run();
  std::cout << "waiting: " << sem.waiting() << "\n";
}
