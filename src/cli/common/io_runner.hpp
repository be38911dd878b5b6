// cli/common/io_runner.hpp — the io_context a command's Redis connection runs on, on its own thread while the command
// lives (the blocking calls of admit::redis must not run on the executor's thread).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <thread>

namespace admit::cli {

class io_runner {
 public:
  io_runner()
      : guard_(io_.get_executor()), thread_([this] {
          io_.run();
          ran_out_.set_value();
        }) {}
  // Lets the context run out of work first (bounded): a connection or semaphore destroyed just before leaves its
  // closing handlers queued, and stopping the context before they run would leave what they own unfreed.
  ~io_runner() {
    guard_.reset();
    if (done_.wait_for(std::chrono::seconds(1)) != std::future_status::ready) io_.stop();
    thread_.join();
  }
  io_runner(const io_runner&) = delete;
  io_runner& operator=(const io_runner&) = delete;
  boost::asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::promise<void> ran_out_;
  std::future<void> done_ = ran_out_.get_future();
  std::thread thread_;
};

}  // namespace admit::cli
