// admit::detail::seqlock: readers see every published set of fields whole, never a mix of two writes; optimistic
// writers (try_write_begin) lose no update. Run under ThreadSanitizer too (the fields are atomics: no data race to
// report, and the memory orders are what makes the invariants hold).
#include "admit/detail/seqlock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using admit::detail::seqlock;

// Two fields published together; the invariant b == 3 * a holds for every published pair.
struct guarded {
  seqlock lock;
  std::atomic<std::int64_t> a{0};
  std::atomic<std::int64_t> b{0};

  struct pair {
    std::int64_t a;
    std::int64_t b;
    std::uint64_t seq;
  };
  pair read() const {
    for (unsigned spins = 0;; ++spins) {
      const std::uint64_t seq = lock.read_begin();
      if (seqlock::writing(seq)) {
        seqlock::pause(spins);
        continue;
      }
      const std::int64_t x = seqlock::load(a);
      const std::int64_t y = seqlock::load(b);
      if (lock.read_validate(seq)) return {x, y, seq};
    }
  }
};

TEST(Seqlock, SequenceNumberIsEvenWhenStableAndOddDuringAWrite) {
  guarded g;
  const std::uint64_t s0 = g.lock.read_begin();
  EXPECT_FALSE(seqlock::writing(s0));
  const std::uint64_t w = g.lock.write_begin();
  EXPECT_EQ(w, s0);
  EXPECT_TRUE(seqlock::writing(g.lock.read_begin()));
  EXPECT_FALSE(g.lock.read_validate(s0));  // a read that overlapped the write does not validate
  seqlock::store(g.a, std::int64_t{1});
  seqlock::store(g.b, std::int64_t{3});
  g.lock.write_end(w);
  const auto p = g.read();
  EXPECT_EQ(p.seq, s0 + 2);
  EXPECT_EQ(p.a, 1);
  EXPECT_EQ(p.b, 3);
  EXPECT_TRUE(g.lock.read_validate(p.seq));
}

TEST(Seqlock, TryWriteBeginFailsOnceAnotherWriteBegan) {
  guarded g;
  const std::uint64_t seq = g.lock.read_begin();
  ASSERT_TRUE(g.lock.try_write_begin(seq));
  EXPECT_FALSE(g.lock.try_write_begin(seq));  // this write is in progress
  g.lock.write_end(seq);
  EXPECT_FALSE(g.lock.try_write_begin(seq));  // and has ended: seq is stale
  EXPECT_TRUE(g.lock.try_write_begin(seq + 2));
  g.lock.write_end(seq + 2);
  EXPECT_EQ(g.lock.read_begin(), seq + 4);
}

// Optimistic writers (the warm-up limiter's commits) race with each other and with readers: every pair a reader
// validates satisfies the invariant, and every commit counts exactly once.
TEST(Seqlock, ReadersNeverSeeATornWriteAndOptimisticWritersLoseNoUpdate) {
  guarded g;
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> torn{0};
  std::atomic<std::int64_t> commits{0};
  constexpr int per_writer = 20'000;
  std::vector<std::jthread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      std::int64_t last = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto p = g.read();
        if (p.b != 3 * p.a || p.a < last) torn.fetch_add(1);  // a only grows
        last = p.a;
      }
    });
  }
  std::vector<std::jthread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < per_writer; ++i) {
        for (;;) {
          const auto p = g.read();
          if (!g.lock.try_write_begin(p.seq)) continue;  // lost the race: read again
          seqlock::store(g.a, p.a + 1);
          seqlock::store(g.b, 3 * (p.a + 1));
          g.lock.write_end(p.seq);
          commits.fetch_add(1);
          break;
        }
      }
    });
  }
  writers.clear();  // joins
  stop.store(true);
  threads.clear();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(commits.load(), 3 * per_writer);
  const auto p = g.read();
  EXPECT_EQ(p.a, 3 * per_writer);  // every commit applied exactly once
  EXPECT_EQ(p.b, 9 * per_writer);
}

// write_begin / write_end for writers serialized by their own mutex (the token bucket's setters).
TEST(Seqlock, MutexSerializedWritersPublishWholePairs) {
  guarded g;
  std::mutex writer_mutex;
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> torn{0};
  std::vector<std::jthread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const auto p = g.read();
        if (p.b != 3 * p.a) torn.fetch_add(1);
      }
    });
  }
  {
    std::vector<std::jthread> writers;
    for (int w = 0; w < 2; ++w) {
      writers.emplace_back([&] {
        for (int i = 0; i < 20'000; ++i) {
          std::lock_guard lock(writer_mutex);
          const std::uint64_t seq = g.lock.write_begin();
          const std::int64_t next = g.a.load(std::memory_order_relaxed) + 1;  // only writers change it, under the mutex
          seqlock::store(g.a, next);
          seqlock::store(g.b, 3 * next);
          g.lock.write_end(seq);
        }
      });
    }
  }
  stop.store(true);
  readers.clear();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(g.read().a, 40'000);
}

}  // namespace
