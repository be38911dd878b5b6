// tests/admission_testing.hpp — what the tests of admit::admission on the manual clock share (admission_test.cpp,
// admission_shares_test.cpp, admission_metrics_test.cpp): the fixture `Admission` that resets the clock, waiting until
// requests are queued and asleep, and a log of the on_admitted events.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "admit/admission.hpp"
#include "admit/testing/manual_clock.hpp"

namespace admit::testing::admission_tests {

using clock_type = admit::testing::manual_clock;
using manual_admission = admit::basic_admission<clock_type>;

// Blocks until `n` requests wait (an observer of the queue) and as many threads sleep on the manual clock.
inline void wait_for_waiters(const manual_admission& adm, std::size_t n) {
  while (adm.waiting() < n) std::this_thread::yield();
  clock_type::wait_for_sleepers(n);
}

// Records the on_admitted events.
struct event_log {
  std::mutex mutex;
  std::vector<admit::admission_event> events;
  auto hook() {
    return [this](const admit::admission_event& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
    };
  }
  std::vector<admit::admission_event> snapshot() {
    std::lock_guard lock(mutex);
    return events;
  }
};

// Every test starts at the manual clock's epoch. One fixture for the suite in every file, so that the files can share
// a test program.
class Admission : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
};

}  // namespace admit::testing::admission_tests
