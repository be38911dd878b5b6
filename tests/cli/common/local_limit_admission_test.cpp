// Who the host-local limit of `admit run` (src/cli/common/local_limit.hpp) admits, and when: never more than the
// capacity with weights, FIFO (the head blocks later waiters that would fit), woken without polling, the position
// reported as it changes, and liveness through flock (a killed holder, a dead waiter ahead, a permit inherited by a
// grandchild and released while the command still holds its descriptor). Real processes and threads.
#include <gtest/gtest.h>

#include "local_limit_testing.hpp"

namespace {

using namespace admit::cli::local_limit_testing;

TEST_F(LocalLimit, NeverHoldsMoreThanCapacityUnderStressOfProcesses) {
  struct shared {
    std::atomic<std::int64_t> in_use, max_in_use, violations, errors, admissions;
  };
  static_assert(std::atomic<std::int64_t>::is_always_lock_free);
  void* mem = ::mmap(nullptr, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* s = new (mem) shared{};
  constexpr int processes = 4, rounds = 25;
  constexpr std::int64_t capacity = 3;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    children.push_back(fork_child([&, p] {
      auto c = config(capacity, p % 2 + 1);  // weights 1 and 2
      for (int r = 0; r < rounds; ++r) {
        local_limit limit(c);
        auto permit = limit.acquire(in(20s), false, {});
        if (!permit) {
          ++s->errors;
          continue;
        }
        auto now = s->in_use += c.weight;
        if (now > capacity) ++s->violations;
        for (auto m = s->max_in_use.load(); now > m && !s->max_in_use.compare_exchange_weak(m, now);) {
        }
        ::usleep(200);  // holds a moment, so that others contend
        s->in_use -= c.weight;
        ++s->admissions;
      }
      return 0;
    }));
  }
  for (pid_t pid : children) EXPECT_EQ(wait_exit(pid), 0);
  EXPECT_EQ(s->errors.load(), 0);
  EXPECT_EQ(s->violations.load(), 0);
  EXPECT_LE(s->max_in_use.load(), capacity);
  EXPECT_EQ(s->admissions.load(), processes * rounds);
  EXPECT_EQ(files("w.") + files("h."), 0u);
  ::munmap(mem, sizeof(shared));
}

TEST_F(LocalLimit, AdmitsInArrivalOrderWokenWithoutPolling) {
  auto c = config(1);
  c.poll_interval = 30s;  // only the wake-ups can admit within the test's deadlines
  auto held = local_limit(c).acquire(in(5s), false, {});
  ASSERT_TRUE(held);
  std::mutex m;
  std::vector<int> order;
  std::vector<std::jthread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      auto p = local_limit(c).acquire(in(10s), false, {});
      std::lock_guard g(m);
      order.push_back(p ? i : -1);
    });
    ASSERT_TRUE(eventually([&] { return waiters() == static_cast<std::size_t>(i + 1); }));
  }
  held->release();
  threads.clear();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST_F(LocalLimit, TheHeadBlocksLaterWaitersThatWouldFit) {
  auto big = config(3, 2);
  auto held = local_limit(big).acquire(in(5s), false, {});
  ASSERT_TRUE(held);
  std::optional<admit::expected<local_permit, std::error_code>> second;
  std::jthread waiter([&] { second.emplace(local_limit(big).acquire(in(10s), false, {})); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  // 2 + 1 <= 3, but the waiter of weight 2 came first.
  EXPECT_EQ(local_limit(config(3, 1)).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  held->release();
  waiter.join();
  ASSERT_TRUE(second && *second);
  EXPECT_TRUE(local_limit(config(3, 1)).acquire(std::nullopt, true, {}));
}

TEST_F(LocalLimit, ProgressReportsThePositionAsItChanges) {
  auto c = config(1);
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::stop_source stop_first;
  std::jthread first([&] { (void)local_limit(c).acquire(in(10s), false, stop_first.get_token()); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  progress_log log;
  auto last = [&] { return log.last(); };
  std::optional<admit::expected<local_permit, std::error_code>> second;
  std::jthread waiter([&] { second.emplace(local_limit(c).acquire(in(10s), false, {}, log.callback())); });
  ASSERT_TRUE(eventually([&] { return last().position == 2; }));
  EXPECT_EQ(last().waiting, 2u);
  EXPECT_EQ(last().held, 1);
  EXPECT_EQ(last().capacity, 1);
  EXPECT_FALSE(last().rate_wait);
  stop_first.request_stop();
  ASSERT_TRUE(eventually([&] { return last().position == 1; }));
  EXPECT_EQ(last().waiting, 1u);
  held->release();
  waiter.join();
  EXPECT_TRUE(second && *second);
}

// A waiter behind the head of its class looks at the queue again when the one right ahead of it goes, not at every
// change: newcomers behind it woke it to read the whole queue each (a crowd cost the square of its size), which its
// progress showed — the count of waiters it reports is the one of its last look.
TEST_F(LocalLimit, AWaiterBehindTheHeadLooksAgainOnlyWhenTheOneAheadGoes) {
  auto c = config(1);
  c.watched_poll_interval = 30s;  // no re-check by time within the test
  c.poll_interval = 30s;
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::stop_source stop_first;
  std::jthread first([&] { (void)local_limit(c).acquire(in(20s), false, stop_first.get_token()); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  progress_log log;
  auto last = [&] { return log.last(); };
  std::optional<admit::expected<local_permit, std::error_code>> second;
  std::jthread waiter([&] { second.emplace(local_limit(c).acquire(in(20s), false, {}, log.callback(), 30s)); });
  ASSERT_TRUE(eventually([&] { return last().position == 2; }));
  // Three newcomers behind it: its last look stays the one before them.
  std::vector<std::stop_source> stops(3);
  std::vector<std::jthread> behind;
  for (auto& st : stops) {
    behind.emplace_back([&c, t = st.get_token()] { (void)local_limit(c).acquire(in(20s), false, t); });
  }
  ASSERT_TRUE(eventually([&] { return waiters() == 5; }));
  EXPECT_EQ(last().waiting, 2u);
  // The one ahead goes: it looks again at once, and sees them all.
  stop_first.request_stop();
  ASSERT_TRUE(eventually([&] { return last().position == 1; }));
  EXPECT_EQ(last().waiting, 4u);
  for (auto& st : stops) st.request_stop();
  behind.clear();
  held->release();
  waiter.join();
  EXPECT_TRUE(second && *second);
}

TEST_F(LocalLimit, KilledHolderFreesThePermit) {
  auto c = config(1);
  c.poll_interval = 100ms;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t holder = fork_child([&] {
    auto p = local_limit(c).acquire(in(5s), false, {});
    char ch = p ? 'y' : 'n';
    [[maybe_unused]] auto n = ::write(ready[1], &ch, 1);
    ::pause();
    return 0;
  });
  char ch = 0;
  ASSERT_EQ(::read(ready[0], &ch, 1), 1);
  ASSERT_EQ(ch, 'y');
  steady_clock::time_point killed;
  std::jthread killer([&] {
    if (eventually([&] { return waiters() == 1; })) {
      killed = steady_clock::now();
      ::kill(holder, SIGKILL);
    }
  });
  auto p = local_limit(c).acquire(in(10s), false, {});
  auto admitted = steady_clock::now();
  killer.join();
  wait_exit(holder);
  ASSERT_TRUE(p) << p.error().message();
  ASSERT_NE(killed, steady_clock::time_point{});
  EXPECT_GE(admitted, killed);
  EXPECT_LT(admitted - killed, 2s);
  ::close(ready[0]);
  ::close(ready[1]);
}

// `admit run` forks the command, which inherits the entry's lock: killing `admit run` leaves the permit held.
TEST_F(LocalLimit, InheritedFdHoldsThePermitUntilTheGrandchildEnds) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // the grandchild becomes ours when its parent dies
  auto c = config(1);
  int pipe_fd[2];
  ASSERT_EQ(::pipe(pipe_fd), 0);
  pid_t middle = fork_child([&] {
    auto p = local_limit(c).acquire(in(5s), false, {});
    pid_t grandchild = p ? fork_child([] {
      ::pause();
      return 0;
    })
                         : -1;
    [[maybe_unused]] auto n = ::write(pipe_fd[1], &grandchild, sizeof grandchild);
    ::pause();
    return 0;
  });
  pid_t grandchild = 0;
  ASSERT_EQ(::read(pipe_fd[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ASSERT_GT(grandchild, 0);
  ::kill(middle, SIGKILL);
  wait_exit(middle);
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  auto snap = inspect_local(dir_, "db").snapshot;
  ASSERT_EQ(snap.holders.size(), 1u);
  EXPECT_EQ(snap.holders[0].info.pid, ::getpid());  // the info the test gave
  ::kill(grandchild, SIGKILL);
  wait_exit(grandchild);
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  ::close(pipe_fd[0]);
  ::close(pipe_fd[1]);
}

TEST_F(LocalLimit, ReleaseFreesThePermitWhileTheCommandStillHoldsTheFd) {
  auto c = config(1);
  auto p = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(p);
  int copy = ::dup(p->inherited_fd());  // as the command's inherited descriptor: the same open file description
  ASSERT_GE(copy, 0);
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  p->release();
  EXPECT_EQ(p->inherited_fd(), -1);
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  ::close(copy);
}

TEST_F(LocalLimit, DeadWaiterAheadIsRemoved) {
  auto c = config(1);
  c.poll_interval = 30s;
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  pid_t waiter = fork_child([&] { return local_limit(c).acquire(in(20s), false, {}) ? 0 : 1; });
  ASSERT_TRUE(eventually([&] { return files("w.") == 1; }));
  ::kill(waiter, SIGKILL);
  wait_exit(waiter);
  EXPECT_EQ(files("w."), 1u);  // still there: nobody has looked
  held->release();
  // FIFO would put this one behind the waiter if the waiter were taken for alive.
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  EXPECT_EQ(files("w."), 0u);
}

}  // namespace
