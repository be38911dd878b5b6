// tests/redis/io_thread.hpp — an io_context run by N background threads until destroyed (declare it before the
// connections that use it, so that they are destroyed first).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>
#include <vector>

namespace admit::redis::testing {

class io_thread {
 public:
  explicit io_thread(int threads = 1) : guard_(io_.get_executor()) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  ~io_thread() {
    guard_.reset();
    for (auto& t : threads_) t.join();
  }
  boost::asio::io_context& context() { return io_; }
  boost::asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
};

}  // namespace admit::redis::testing
