// tests/support/watchdog.hpp — fails the process (abort, with a message) if a stress test does not finish within its
// limit: a waiter that is never woken would otherwise hang the test until ctest's timeout, without saying why.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stop_token>
#include <thread>

namespace admit::testing_support {

class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit)
      : thread_([limit](std::stop_token stop) {
          std::mutex m;
          std::condition_variable_any cv;
          std::unique_lock lock(m);
          if (!cv.wait_for(lock, stop, limit, [] { return false; }) && !stop.stop_requested()) {
            std::fprintf(stderr, "watchdog: the stress test did not finish in %llds (a lost wake-up?)\n",
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}

 private:
  std::jthread thread_;  // stopped and joined when the test ends in time
};

}  // namespace admit::testing_support
