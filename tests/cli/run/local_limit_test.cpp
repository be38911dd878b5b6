// Tests of the host-local limit of `admit run` (src/cli/run/local_limit.hpp): capacity with weights, FIFO, liveness
// through flock (killed holders and waiters, a permit inherited by a grandchild), the bounds of waiting (no_wait,
// max_waiters, deadline, stop_token), the GCRA rate, inspect_local, and the checks of the configuration.
// Real processes (fork) and threads share a temporary directory whose path has a space in it. A test never forks while
// it runs threads of its own.
#include "cli/run/local_limit.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admit/errc.hpp"

namespace {

using namespace admit::cli::run;
using namespace std::chrono_literals;
using std::chrono::steady_clock;
namespace fs = std::filesystem;

class LocalLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "admit local limit XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ / "limits dir";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  local_limit_config config(std::int64_t capacity, std::int64_t weight = 1) const {
    local_limit_config c;
    c.directory = dir_;
    c.name = "db";
    c.capacity = capacity;
    c.weight = weight;
    c.info = {"host-a", ::getpid(), "run something", 0};
    return c;
  }
  fs::path name_dir() const { return dir_ / "db"; }
  // The entry files of "db" whose names start with `prefix` ("w." or "h.").
  std::size_t files(const std::string& prefix) const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(name_dir())) n += e.path().filename().string().starts_with(prefix);
    return n;
  }
  std::size_t waiters() const { return inspect_local(dir_, "db").snapshot.waiters.size(); }
  // Polls `pred` (what another thread or process does cannot be observed otherwise) for at most 10 s.
  template <class Pred>
  static bool eventually(Pred pred) {
    for (auto end = steady_clock::now() + 10s; steady_clock::now() < end; std::this_thread::sleep_for(1ms)) {
      if (pred()) return true;
    }
    return pred();
  }

  fs::path root_, dir_;
};

auto in(std::chrono::nanoseconds d) { return std::optional(steady_clock::now() + d); }

// Runs `body` in a child process, which exits with its result.
template <class F>
pid_t fork_child(F body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

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
  std::mutex m;
  std::vector<wait_progress> reports;
  auto last = [&] {
    std::lock_guard g(m);
    return reports.empty() ? wait_progress{} : reports.back();
  };
  std::optional<admit::expected<local_permit, std::error_code>> second;
  std::jthread waiter([&] {
    second.emplace(local_limit(c).acquire(in(10s), false, {}, [&](const wait_progress& w) {
      std::lock_guard g(m);
      reports.push_back(w);
    }));
  });
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

TEST_F(LocalLimit, MaxWaitersRefusesOneMore) {
  auto c = config(1);
  c.max_waiters = 1;
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::stop_source stop;
  std::optional<admit::expected<local_permit, std::error_code>> first;
  std::jthread waiter([&] { first.emplace(local_limit(c).acquire(in(10s), false, stop.get_token())); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  auto start = steady_clock::now();
  EXPECT_EQ(local_limit(c).acquire(in(10s), false, {}).error(), admit::errc::queue_full);
  EXPECT_LT(steady_clock::now() - start, 2s);
  EXPECT_EQ(files("w."), 1u);
  stop.request_stop();
  waiter.join();
  EXPECT_EQ(first->error(), admit::errc::cancelled);
  // Admitted at once needs no place in the queue, even with max_waiters 0.
  held->release();
  c.max_waiters = 0;
  EXPECT_TRUE(local_limit(c).acquire(in(10s), false, {}));
}

TEST_F(LocalLimit, NoWaitFailsAtOnceAndLeavesNoEntry) {
  auto c = config(2, 2);
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  EXPECT_EQ(files("w."), 0u);
  EXPECT_EQ(files("h."), 1u);
  held->release();
  EXPECT_EQ(files("h."), 0u);
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
}

TEST_F(LocalLimit, TimeoutLeavesTheQueue) {
  auto c = config(1);
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  auto start = steady_clock::now();
  auto r = local_limit(c).acquire(start + 100ms, false, {});
  EXPECT_EQ(r.error(), admit::errc::timeout);
  EXPECT_GE(steady_clock::now() - start, 100ms);
  EXPECT_EQ(files("w."), 0u);
  EXPECT_EQ(local_limit(c).acquire(steady_clock::now() - 1s, false, {}).error(), admit::errc::timeout);
}

TEST_F(LocalLimit, StopTokenCancelsAtOnce) {
  auto c = config(1);
  c.poll_interval = 30s;
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::stop_source stop;
  std::optional<admit::expected<local_permit, std::error_code>> r;
  steady_clock::time_point returned;
  std::jthread waiter([&] {
    r.emplace(local_limit(c).acquire(std::nullopt, false, stop.get_token()));
    returned = steady_clock::now();
  });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  auto requested = steady_clock::now();
  stop.request_stop();
  waiter.join();
  EXPECT_EQ(r->error(), admit::errc::cancelled);
  EXPECT_LT(returned - requested, 2s);  // a wake-up, not the 30 s poll
  EXPECT_EQ(files("w."), 0u);
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, false, stop.get_token()).error(), admit::errc::cancelled);
}

TEST_F(LocalLimit, RateSpacesAdmissions) {
  auto c = config(0);
  c.interval = 50ms;
  std::vector<std::chrono::nanoseconds> rate_waits;
  auto before = steady_clock::now();
  for (int k = 0; k < 4; ++k) {
    auto p = local_limit(c).acquire(in(5s), false, {}, [&](const wait_progress& w) {
      if (w.rate_wait) rate_waits.push_back(*w.rate_wait);
    });
    ASSERT_TRUE(p);
    EXPECT_GE(steady_clock::now() - before, k * 50ms) << "admission " << k;
  }
  ASSERT_FALSE(rate_waits.empty());
  for (auto w : rate_waits) EXPECT_LE(w, 50ms);
}

TEST_F(LocalLimit, RateBurstCountsWeights) {
  auto c = config(0, 2);
  c.interval = 10s;
  c.burst = 3;
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  c.weight = 1;
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  c.weight = 4;
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::exceeds_capacity);
}

TEST_F(LocalLimit, RateStateOfAnotherBootIsIgnored) {
  auto c = config(0);
  c.interval = 10s;
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
  EXPECT_EQ(local_limit(c).acquire(std::nullopt, true, {}).error(), admit::errc::would_block);
  std::ofstream(name_dir() / "rate") << R"({"boot_id":"another boot","tat_ns":9000000000000000000})" << '\n';
  EXPECT_TRUE(local_limit(c).acquire(std::nullopt, true, {}));
}

TEST_F(LocalLimit, InspectListsHoldersAndWaitersWithTheirInfo) {
  EXPECT_FALSE(inspect_local(dir_, "db").exists);
  auto c = config(3, 2);
  c.info = {"host-h", 1234, "make -j2", 0};
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  c.info = {"host-w", 5678, "cc \xff bad utf-8", 0};
  std::jthread waiter([&] { (void)local_limit(c).acquire(in(10s), false, {}); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  // An entry left by a process that died (not locked) is not listed, and is removed.
  std::ofstream(name_dir() / "h.00000000000000000099") << R"({"weight":3,"pid":1})" << '\n';
  auto r = inspect_local(dir_, "db");
  EXPECT_TRUE(r.exists);
  ASSERT_EQ(r.snapshot.holders.size(), 1u);
  ASSERT_EQ(r.snapshot.waiters.size(), 1u);
  const auto& h = r.snapshot.holders[0];
  EXPECT_EQ(h.ticket, held->ticket());
  EXPECT_EQ(h.weight, 2);
  EXPECT_EQ(h.info.host, "host-h");
  EXPECT_EQ(h.info.pid, 1234);
  EXPECT_EQ(h.info.command, "make -j2");
  EXPECT_GT(h.info.started_unix_ms, 0);
  const auto& w = r.snapshot.waiters[0];
  EXPECT_GT(w.ticket, h.ticket);
  EXPECT_EQ(w.info.host, "host-w");
  EXPECT_EQ(w.info.command.substr(0, 3), "cc ");
  EXPECT_FALSE(fs::exists(name_dir() / "h.00000000000000000099"));
  held->release();
}

TEST_F(LocalLimit, TicketsIncreaseAcrossRuns) {
  auto c = config(1);
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto p = local_limit(c).acquire(std::nullopt, true, {});
    ASSERT_TRUE(p);
    EXPECT_GT(p->ticket(), last);
    last = p->ticket();
  }
}

TEST_F(LocalLimit, WeightAboveCapacityIsRefused) {
  EXPECT_EQ(local_limit(config(2, 3)).acquire(std::nullopt, false, {}).error(), admit::errc::exceeds_capacity);
}

TEST_F(LocalLimit, BadNamesAndValuesAreRefused) {
  for (const std::string& name :
       std::vector<std::string>{"", ".", "..", "a/b", "a b", "caf\xc3\xa9", "x\n", std::string(201, 'n')}) {
    auto c = config(1);
    c.name = name;
    try {
      local_limit limit(c);
      ADD_FAILURE() << "accepted \"" << name << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("\"" + name + "\""), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("A-Z a-z 0-9 . _ -"), std::string::npos) << e.what();
    }
    EXPECT_THROW(inspect_local(dir_, name), std::invalid_argument);
  }
  EXPECT_NO_THROW(check_local_name(std::string(200, 'n')));
  EXPECT_NO_THROW(check_local_name("build.cache_v2-x"));
  auto bad = [&](auto edit) {
    auto c = config(1);
    edit(c);
    EXPECT_THROW(local_limit{c}, std::invalid_argument);
  };
  bad([](auto& c) { c.weight = 0; });
  bad([](auto& c) { c.capacity = -1; });
  bad([](auto& c) { c.capacity = 0; });  // and no rate
  bad([](auto& c) { c.interval = 0ns; });
  bad([](auto& c) { c.interval = 1s, c.burst = 0; });
  bad([](auto& c) { c.poll_interval = 0ns; });
}

TEST_F(LocalLimit, EntryRemovedByHandEndsTheWaitNamingIt) {
  auto c = config(1);
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::string message;
  std::jthread waiter([&] {
    try {
      (void)local_limit(c).acquire(in(10s), false, {});
    } catch (const std::system_error& e) {
      message = e.what();
    }
  });
  ASSERT_TRUE(eventually([&] { return files("w.") == 1; }));
  for (const auto& e : fs::directory_iterator(name_dir())) {
    if (e.path().filename().string().starts_with("w.")) fs::remove(e.path());
  }
  waiter.join();
  EXPECT_NE(message.find((name_dir() / "w.0000000000000000000").string()), std::string::npos) << message;
}

TEST_F(LocalLimit, DirectoryThatCannotBeCreatedNamesThePath) {
  std::ofstream(root_ / "a file") << "x";
  auto c = config(1);
  c.directory = root_ / "a file" / "limits";
  try {
    local_limit limit(c);
    ADD_FAILURE() << "created a directory under a file";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find((root_ / "a file").string()), std::string::npos) << e.what();
  }
}

TEST(DefaultLockDirectory, FollowsTheEnvironment) {
  auto saved = [](const char* n) { return std::getenv(n) ? std::optional<std::string>(std::getenv(n)) : std::nullopt; };
  auto lock_dir = saved("ADMIT_LOCK_DIR"), runtime = saved("XDG_RUNTIME_DIR");
  ::setenv("ADMIT_LOCK_DIR", "/some where/locks", 1);
  ::setenv("XDG_RUNTIME_DIR", "/run/user/42", 1);
  EXPECT_EQ(default_lock_directory(), fs::path("/some where/locks"));
  ::unsetenv("ADMIT_LOCK_DIR");
  EXPECT_EQ(default_lock_directory(), fs::path("/run/user/42/admit"));
  ::setenv("XDG_RUNTIME_DIR", "", 1);
  EXPECT_EQ(default_lock_directory(), fs::path("/tmp/admit-" + std::to_string(::getuid())));
  auto restore = [](const char* n, const std::optional<std::string>& v) {
    v ? ::setenv(n, v->c_str(), 1) : ::unsetenv(n);
  };
  restore("ADMIT_LOCK_DIR", lock_dir);
  restore("XDG_RUNTIME_DIR", runtime);
}

}  // namespace
