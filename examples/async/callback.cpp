// Waiting for a permit with a callback: async_acquire(sem, n, handler) never blocks the thread; the handler is
// posted to its executor once the permit is granted (or the wait fails), never called inside async_acquire or
// inside the release() that grants it.
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <iostream>

#include "admit/asio/async_acquire.hpp"
#include "admit/semaphore.hpp"

int main() {
  namespace net = boost::asio;
  net::io_context ctx;
  admit::semaphore sem{1};
  auto busy = sem.try_acquire();  // the only permit is taken

  admit::asio::async_acquire(sem, 1, net::bind_executor(ctx, [&](boost::system::error_code ec, admit::permit p) {
                               std::cout << "first waiter: " << (ec ? ec.message() : "granted") << ", holds "
                                         << p.count() << "\n";
                             }));  // p is released when the handler returns

  net::cancellation_signal signal;  // the second waiter can be cancelled through its handler's slot
  admit::asio::async_acquire(
      sem, 1,
      net::bind_cancellation_slot(signal.slot(),
                                  net::bind_executor(ctx, [](boost::system::error_code ec, admit::permit p) {
                                    std::cout << "second waiter: " << ec.message() << ", holds " << p.count() << "\n";
                                  })));

  std::cout << "waiting: " << sem.waiting() << "\n";
  signal.emit(net::cancellation_type::terminal);  // the second waiter leaves the queue
  busy->release();                                // hands the permit to the first waiter
  std::cout << "handlers run so far: none (they are posted)\n";
  ctx.run();
  std::cout << "available: " << sem.available() << "\n";
}
