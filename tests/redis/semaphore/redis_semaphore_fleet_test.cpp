// admit::redis::semaphore across real processes (this test binary run again with --sem-child): FIFO service across
// four processes, observed through Redis (arrival order = the queue's order, grant order = fencing tokens), and a
// waiter SIGKILLed while queued, which leaves the queue within its waiter_ttl so that the next one is served.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "child_process.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "self_exec.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::semaphore_options;
using admit::redis::testing::child_process;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::role_argv;
using steady = std::chrono::steady_clock;

semaphore_options fleet_options() {
  semaphore_options o;
  o.poll_interval = 100ms;
  o.timeout = 200ms;  // waiter_ttl: 3 × 100 ms + 200 ms = 500 ms
  o.lease_ttl = 10s;  // a grant to a dead waiter would hold the permit for 10 s
  return o;
}

// Roles:
//   fifo URL NAME I N      queues two waiters on two threads: the first once the queue holds I waiters, the second
//                          once it holds N + I; prints "grant <place> <lease id> <fencing token>" for each grant, holds
//                          it 2 ms, releases it
//   wait URL NAME          queues one waiter and waits (until killed)
[[noreturn]] void run_role(const std::vector<std::string>& args) {
  io_thread io;
  connection conn(io.executor(), args.at(1));
  semaphore s(conn, args.at(2), 1, fleet_options());
  if (args[0] == "fifo") {
    const std::int64_t i = std::stoll(args.at(3)), n = std::stoll(args.at(4));
    std::mutex out;
    int failures = 0;
    const auto waiter = [&](std::int64_t place) {
      while (s.inspect().first.waiter_count < place) std::this_thread::sleep_for(1ms);
      auto r = s.try_acquire_for(30s);
      const std::lock_guard lock(out);
      if (!r) {
        ++failures;
        return;
      }
      std::printf("grant %lld %s %lld\n", static_cast<long long>(place), r->id().c_str(),
                  static_cast<long long>(r->fencing_token()));
      std::fflush(stdout);
      std::this_thread::sleep_for(2ms);
      if (r->release().first != lease::release_status::released) ++failures;
    };
    std::thread first(waiter, i);
    // The second waiter queues after the first is in the queue (a later place: N + I > I).
    std::thread second(waiter, n + i);
    first.join();
    second.join();
    std::_Exit(failures == 0 ? 0 : 3);
  }
  if (args[0] == "wait") {
    auto r = s.acquire();
    std::_Exit(r ? 0 : 3);
  }
  std::_Exit(4);
}

ADMIT_CHILD_ROLE_TEST(RedisSemaphoreFleetChild, run_role)

// Four processes queue two waiters each, interleaved (places 0-7: p0, p1, p2, p3, p0, p1, p2, p3) while the test
// holds the only permit. The fencing tokens give the grant order: it is the order of arrival, both as the processes
// queued (places) and as Redis recorded it (the queue's order by arrival number).
TEST(RedisSemaphoreFleet, FifoAcrossFourProcesses) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "fleet-fifo", 1, fleet_options());
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  constexpr int processes = 4;
  std::vector<std::optional<child_process>> children(processes);
  for (int i = 0; i < processes; ++i) {
    children[static_cast<std::size_t>(i)].emplace(
        role_argv("RedisSemaphoreFleetChild.Role",
                  {"fifo", server.url(), "fleet-fifo", std::to_string(i), std::to_string(processes)}));
  }
  ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == 2 * processes; }, 30s));
  std::vector<std::string> arrival;
  for (const auto& w : s.inspect().first.queue) arrival.push_back(w.id);
  ASSERT_EQ(arrival.size(), 2U * processes);
  ASSERT_EQ(held->release().first, lease::release_status::released);

  struct grant {
    std::int64_t token;
    std::int64_t place;
    std::string id;
  };
  std::vector<grant> grants;
  for (auto& child : children) {
    ASSERT_EQ(child->wait(), 0) << child->err();
    std::istringstream lines(child->out());
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      std::string word, id;
      std::int64_t place = 0, token = 0;
      if (fields >> word >> place >> id >> token && word == "grant") grants.push_back({token, place, id});
    }
  }
  std::sort(grants.begin(), grants.end(), [](const grant& a, const grant& b) { return a.token < b.token; });
  std::vector<std::string> granted;
  std::vector<std::int64_t> places, in_order;
  for (const auto& g : grants) {
    granted.push_back(g.id);
    places.push_back(g.place);
    in_order.push_back(static_cast<std::int64_t>(in_order.size()));
  }
  EXPECT_EQ(places, in_order);
  EXPECT_EQ(granted, arrival);
}

// A waiter SIGKILLed while queued stops polling; it leaves the queue within waiter_ttl (500 ms) of its last poll, and
// the next waiter is served by the next release instead of a grant to the dead one (whose lease would hold the
// permit for 10 s).
TEST(RedisSemaphoreFleet, AWaiterKilledWhileQueuedLeavesWithinItsWaiterTtl) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  connection other_conn(io.executor(), server.url());
  const semaphore_options o = fleet_options();
  semaphore s(conn, "fleet-killed", 1, o);
  semaphore next(other_conn, "fleet-killed", 1, o);
  auto held = s.try_acquire();
  ASSERT_TRUE(held);
  std::optional<child_process> child(
      role_argv("RedisSemaphoreFleetChild.Role", {"wait", server.url(), "fleet-killed"}));
  ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == 1; }, 30s));
  auto second = std::async(std::launch::async, [&] { return next.try_acquire_for(20s); });
  ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == 2; }));

  child.reset();  // SIGKILL, reaped
  const auto killed = steady::now();
  const semaphore_options effective = s.options();  // waiter_ttl filled in
  ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == 1; }));
  EXPECT_LT(steady::now() - killed, effective.waiter_ttl + 250ms) << "the dead waiter stayed queued";
  ASSERT_EQ(held->release().first, lease::release_status::released);
  ASSERT_EQ(second.wait_for(1s), std::future_status::ready) << "the permit went to the dead waiter";
  auto r = second.get();
  EXPECT_TRUE(r) << r.error().message();
}

}  // namespace
