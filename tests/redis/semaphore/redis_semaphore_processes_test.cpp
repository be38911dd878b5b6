// admit::redis::semaphore with holders in other processes, against a real redis-server: a release hands the permit to
// a waiter in another process by a push, well before its poll; a holder SIGKILLed gives its permits back when its
// lease expires, to the head waiter, which asks then; a holder SIGSTOPped loses its lease and its stale fencing token
// is refused; 8 processes hammering it never hold more than the capacity (checked by an independent counter in Redis).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <iostream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::lease_state;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::semaphore_result;
using admit::redis::testing::eventually;
using admit::redis::testing::fenced_resource;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::wait_for_waiters;
using steady = std::chrono::steady_clock;

// A child process that holds one permit of `name` until it is killed; it writes its fencing token on `fd` once it
// holds it, and "lost" when it notices its lease is gone. Forked while the parent runs no other thread. (Run after
// another test, this caught forked children drawing the parent's next lease identities.)
[[noreturn]] void hold_in_child(const std::string& url, const std::string& name, semaphore_options o, int fd) {
  io_thread io;
  connection conn(io.executor(), url);
  semaphore s(conn, name, 1, o);
  auto r = s.try_acquire_for(10s);
  if (!r) _exit(2);
  const std::string token = std::to_string(r->fencing_token()) + "\n";
  if (::write(fd, token.data(), token.size()) < 0) _exit(3);
  while (r->state() == lease_state::held) std::this_thread::sleep_for(10ms);
  if (::write(fd, "lost\n", 5) < 0) _exit(3);
  for (;;) ::pause();
}

std::string read_line(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

// A holder in another process (hold_in_child), killed when this goes out of scope.
struct child_holder {
  child_holder(const redis_server& server, const std::string& name, const semaphore_options& o) {
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid = ::fork();
    if (pid == 0) hold_in_child(server.url(), name, o, fds[1]);
    token = std::stoll(read_line(fds[0]));
  }
  ~child_holder() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(fds[0]);
    ::close(fds[1]);
  }
  child_holder(const child_holder&) = delete;
  child_holder& operator=(const child_holder&) = delete;
  std::string next_line() const { return read_line(fds[0]); }

  int fds[2] = {-1, -1};
  pid_t pid = -1;
  std::int64_t token = 0;  // the child's lease's fencing token
};

semaphore_options short_leases() {
  semaphore_options o;
  o.lease_ttl = 500ms;
  o.poll_interval = 100ms;
  return o;
}

// The waiter of the hand-off test, in a child process: once the parent holds the permit, `rounds` times: waits for it,
// writes the steady-clock time it got it on `to_parent` (the clock is the machine's, shared by both processes), waits
// until the parent is queued again and releases to it. Exits non-zero when a wait or a release fails.
[[noreturn]] void take_turns_in_child(const std::string& url, const semaphore_options& o, int rounds, int to_parent,
                                      int from_parent) {
  io_thread io;
  connection conn(io.executor(), url);
  semaphore s(conn, "handoff", 1, o);
  if (read_line(from_parent) != "held") _exit(6);  // the parent holds the permit: the first turn waits
  for (int i = 0; i < rounds; ++i) {
    auto r = s.try_acquire_for(5s);
    const auto granted = steady::now();
    if (!r) _exit(2);
    const std::string line = std::to_string(granted.time_since_epoch().count()) + "\n";
    if (::write(to_parent, line.data(), line.size()) < 0) _exit(3);
    if (!eventually([&] { return s.inspect().first.waiter_count == 1; })) _exit(4);
    if (r->release().first != lease::release_status::released) _exit(5);
  }
  _exit(0);
}

// Across processes only the wake-up list can be this quick: with both waiters polling every 10 s, each release hands
// the permit to the other process's waiter, 200 times in a row (both ways; the child's hand-back within its 5 s
// wait): at least 198 of them within 50 ms, every one within 1 s. A release whose grant reached the waiter only in
// the waiter's own next poll would take 10 s. (Two may be slower than 50 ms: a loaded 2-core machine can stall a
// process for that long; a lost wake-up cannot hide under either bound.)
TEST(RedisSemaphore, AReleaseWakesAWaiterInAnotherProcessAtOnce) {
  redis_server server;
  semaphore_options o;
  o.poll_interval = 10s;
  constexpr int rounds = 200;
  int fds[2], go[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();  // before this process starts a thread
  if (child == 0) take_turns_in_child(server.url(), o, rounds, fds[1], go[0]);
  ::close(fds[1]);
  ::close(go[0]);
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "handoff", 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  ASSERT_EQ(::write(go[1], "held\n", 5), 5);
  ::close(go[1]);
  std::vector<std::chrono::nanoseconds> handoffs;
  for (int i = 0; i < rounds; ++i) {
    ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == 1; })) << "round " << i;
    const auto released = steady::now();
    ASSERT_EQ(held->release().first, lease::release_status::released) << "round " << i;
    const std::string line = read_line(fds[0]);
    ASSERT_FALSE(line.empty()) << "the child stopped in round " << i;
    handoffs.push_back(steady::time_point(steady::duration(std::stoll(line))) - released);
    held = s.try_acquire_for(5s);  // the child releases once this waits
    ASSERT_TRUE(held) << "round " << i << ": " << held.error().message();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's status " << status;
  ::close(fds[0]);
  std::sort(handoffs.begin(), handoffs.end());
  const auto us = [](std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::microseconds>(d); };
  std::cout << "hand-offs to another process: median " << us(handoffs[handoffs.size() / 2]).count() << " us, slowest "
            << us(handoffs.back()).count() << " us\n";
  EXPECT_LT(handoffs[handoffs.size() - 3], 50ms);
  EXPECT_LT(handoffs.back(), 1s);
}

// The waiter polls every 30 s, so only the head's watch of the leases (it asks again when the earliest lease
// expires) hands it the dead holder's permit within the test's 10 s: it gets the permit when the lease expires.
TEST(RedisSemaphore, ASigkilledHoldersPermitsGoToTheHeadWaiterWhenItsLeaseExpires) {
  redis_server server;
  semaphore_options o;
  o.lease_ttl = 2s;  // renewed every 667 ms: far from lost on a slow (sanitized) run
  child_holder child(server, "killed", o);

  io_thread io;
  connection conn(io.executor(), server.url());
  o.poll_interval = 30s;
  semaphore s(conn, "killed", 1, o);
  auto pending = std::async(std::launch::async, [&] { return s.try_acquire_for(10s); });
  wait_for_waiters(s, 1);
  // The child renews meanwhile: the head asks again when the lease would have expired, and waits on.
  std::this_thread::sleep_for(o.lease_ttl + 500ms);
  ASSERT_EQ(pending.wait_for(0s), std::future_status::timeout) << "granted while the child held the permit";
  ::kill(child.pid, SIGKILL);
  const auto killed = steady::now();
  auto r = pending.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(steady::now() - killed, o.lease_ttl + 1s);  // the lease's expiry, not the waiter's next poll (30 s)
  EXPECT_GT(r->fencing_token(), child.token);
}

TEST(RedisSemaphore, ASigstoppedHolderLosesItsLeaseAndItsStaleTokenIsRefused) {
  redis_server server;
  const semaphore_options o = short_leases();
  child_holder child(server, "stopped", o);

  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "stopped", 1, o);
  ::kill(child.pid, SIGSTOP);  // no renewals from here on
  auto r = s.try_acquire_for(10s);
  ASSERT_TRUE(r) << r.error().message();
  fenced_resource resource;
  ASSERT_TRUE(resource.write(r->fencing_token()));
  ::kill(child.pid, SIGCONT);
  EXPECT_EQ(child.next_line(), "lost");  // the child noticed at its next renewal
  EXPECT_FALSE(resource.write(child.token));
}

// One of the stress test's processes: for `seconds`, acquires (try, timed, or waited and cancelled by a stop token
// after a random time), holds briefly and releases; while holding, it counts itself in the independent counter
// {stress}:holding (INCR/DECR on its own connection) and exits 1 if it ever sees more than `capacity` there.
[[noreturn]] void hammer(const std::string& url, std::int64_t capacity, double seconds, unsigned seed) {
  io_thread io;
  connection conn(io.executor(), url);
  connection counter(io.executor(), url);
  semaphore_options o;
  o.poll_interval = 50ms;
  o.lease_ttl = 1s;  // a grant that raced with a cancellation and was still being released at exit expires soon
  semaphore s(conn, "stress", capacity, o);
  std::mt19937 rng(seed);
  const auto end = steady::now() + std::chrono::duration<double>(seconds);
  int violations = 0;
  while (steady::now() < end) {
    semaphore_result r = admit::errc::would_block;
    const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 2);
    switch (rng() % 3) {
      case 0:
        r = s.try_acquire(n);
        break;
      case 1:
        r = s.try_acquire_for(std::chrono::milliseconds(rng() % 30), n);
        break;
      default: {
        std::stop_source stop;
        std::jthread canceller([&stop, wait = std::chrono::milliseconds(rng() % 30)](std::stop_token done) {
          std::mutex m;
          std::condition_variable_any cv;
          std::unique_lock lock(m);
          if (!cv.wait_for(lock, done, wait, [] { return false; })) stop.request_stop();
        });
        r = s.acquire(n, stop.get_token());
        break;
      }
    }
    if (!r) continue;
    const auto held = counter.execute("INCRBY", "{stress}:holding", std::to_string(n));
    if (held.value.integer() > capacity) ++violations;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));  // holding: long next to a grant
    (void)counter.execute("DECRBY", "{stress}:holding", std::to_string(n));
    if (r->release().first != lease::release_status::released) ++violations;
  }
  _exit(violations == 0 ? 0 : 1);
}

TEST(RedisSemaphore, NeverMoreThanTheCapacityHeldAcrossEightProcesses) {
  redis_server server;
  const char* env = std::getenv("ADMIT_STRESS_SECONDS");
  const double seconds = env ? std::atof(env) : 3.0;
  constexpr std::int64_t capacity = 3;
  std::vector<pid_t> children;
  for (unsigned i = 0; i < 8; ++i) {
    const pid_t child = ::fork();
    if (child == 0) hammer(server.url(), capacity, seconds, 1000 + i);
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a process saw more than the capacity held";
  }
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore_options o;
  o.poll_interval = 50ms;
  o.lease_ttl = 1s;
  semaphore s(conn, "stress", capacity, o);
  // Everything went back: no permit leaked, and the queue emptied (the last cancellations are sent asynchronously,
  // and a waiter whose process exited first leaves after its waiter_ttl).
  ASSERT_TRUE(eventually([&] {
    const auto snap = s.inspect().first;
    return snap.holder_count == 0 && snap.waiter_count == 0 && snap.available == capacity;
  }));
  EXPECT_EQ(server.admin({"GET", "{stress}:holding"}), "0");
}

}  // namespace
