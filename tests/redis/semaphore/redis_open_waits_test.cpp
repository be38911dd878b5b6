// The semaphore's open_waits alone (src/redis/semaphore/open_waits.hpp): close() calls the end of every wait still
// open, once, and of none removed before it; a wait added after close() is ended at once; and with threads adding,
// removing and closing at once (as waits start and complete while the object is destroyed), every wait is either
// removed or ended, never both ended twice, and nothing races (this runs under ThreadSanitizer).
#include "open_waits.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

namespace {

using admit::redis::detail::open_waits;

TEST(OpenWaits, CloseEndsEveryWaitStillOpenOnceAndAWaitAddedAfterAtOnce) {
  open_waits waits;
  int ended[3] = {0, 0, 0};
  open_waits::ticket t[3];
  for (int i = 0; i < 3; ++i) waits.add(t[i], [&ended, i] { ++ended[i]; });
  waits.remove(t[1]);
  waits.close();
  EXPECT_EQ(ended[0], 1);
  EXPECT_EQ(ended[1], 0);  // removed: completed before
  EXPECT_EQ(ended[2], 1);
  waits.close();
  EXPECT_EQ(ended[0], 1);  // once
  int late = 0;
  open_waits::ticket l;
  waits.add(l, [&late] { ++late; });
  EXPECT_EQ(late, 1);
  waits.remove(l);
}

TEST(OpenWaits, WaitsAddedAndRemovedWhileAnotherThreadClosesEndOnceOrNot) {
  constexpr int threads = 4, per_thread = 2000;
  for (int round = 0; round < 20; ++round) {
    open_waits waits;
    std::vector<std::unique_ptr<std::atomic<int>>> ends;
    for (int i = 0; i < threads * per_thread; ++i) ends.push_back(std::make_unique<std::atomic<int>>(0));
    // Each wait's ticket, which its end reads as the semaphore's waits do (complete() removes its own), on the
    // closing thread, maybe while add() is still returning on the adding one.
    std::vector<open_waits::ticket> tickets(ends.size(), 0);
    std::atomic<bool> go{false};
    std::vector<std::jthread> workers;
    for (int w = 0; w < threads; ++w) {
      workers.emplace_back([&, w] {
        while (!go) std::this_thread::yield();
        for (int i = 0; i < per_thread; ++i) {
          const auto k = static_cast<std::size_t>(w * per_thread + i);
          auto& count = *ends[k];
          open_waits::ticket& t = tickets[k];
          waits.add(t, [&count, &waits, &t] {
            count.fetch_add(1);
            waits.remove(t);
          });
          if (i % 2 == 0) waits.remove(t);  // half complete on their own
        }
      });
    }
    std::jthread closer([&] {
      while (!go) std::this_thread::yield();
      std::this_thread::yield();
      waits.close();
    });
    go = true;
    workers.clear();
    closer.join();
    for (std::size_t i = 0; i < ends.size(); ++i) {
      const int n = ends[i]->load();
      ASSERT_LE(n, 1) << "wait " << i << " ended " << n << " times";
      if (i % 2 == 1) {
        ASSERT_EQ(n, 1) << "wait " << i << " was neither removed nor ended";
      }
    }
  }
}

}  // namespace
