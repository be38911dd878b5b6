// The semaphore's wake registry alone (src/redis/semaphore/wake_registry.hpp), on a real redis-server: grants reach
// their waiters and no one else, unreadable grants arrive empty, a grant pushed on the wake list is brought by the
// BLMPOP loop (with a poll interval far longer than the test waits, so only the loop can bring it), the loop stops
// when nobody waits and the next waiter starts it again, recovers when Redis comes back, and close() ends a BLMPOP in
// flight at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/reply.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "wake_registry.hpp"

namespace wake_registry_testing {

using admit::redis::connection;
using admit::redis::reply;
using admit::redis::detail::wake_registry;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using grant = wake_registry::grant;
using namespace std::chrono_literals;

constexpr auto patience = 5s;  // far below the 10 s poll interval of the tests that must not be served by a poll

// A registry on `server`, its waker a connection of its own.
std::shared_ptr<wake_registry> make_registry(io_thread& io, redis_server& server, std::chrono::milliseconds poll) {
  auto waker = std::make_unique<connection>(io.executor(), server.url());
  connection* w = waker.get();
  return std::make_shared<wake_registry>(
      std::move(waker), [w] { (void)w->close_for(std::chrono::nanoseconds::zero()); }, "{t}:wake:me", poll, 1s);
}

// The clients blocked in a command now (INFO clients).
long long blocked_clients(const redis_server& server) {
  const std::string info = server.admin({"INFO", "clients"});
  const auto at = info.find("blocked_clients:");
  return at == std::string::npos ? -1 : std::atoll(info.c_str() + at + 16);
}

// Waits (up to `patience`) until `done` holds; whether it did.
bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + patience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// A waiter whose first grant can be awaited.
struct awaited {
  std::shared_ptr<std::promise<grant>> promise = std::make_shared<std::promise<grant>>();
  std::future<grant> future = promise->get_future();
  wake_registry::callback callback() {
    return [p = promise](const grant& g) {
      try {
        p->set_value(g);
      } catch (const std::future_error&) {  // a second grant: the first is what the test looks at
      }
    };
  }
  bool arrived() { return future.wait_for(patience) == std::future_status::ready; }
};

TEST(WakeRegistry, ParsesAGrantAndRefusesWhatIsNotOne) {
  EXPECT_EQ(wake_registry::parse("abc:2:17:1800000000000000:1799999999000000"),
            (grant{0, 2, 17, 1800000000000000, 1799999999000000}));
  EXPECT_TRUE(wake_registry::parse("abc:2:17:1800000000000000").empty());  // a field missing
  EXPECT_TRUE(wake_registry::parse("abc").empty());
  EXPECT_TRUE(wake_registry::parse("abc:2:x17:1800000000000000:1799999999000000").empty());  // not a number
  EXPECT_TRUE(wake_registry::parse("abc:2:17z:1800000000000000:1799999999000000").empty());
}

TEST(WakeRegistry, EachGrantReachesItsOwnWaiterOnly) {
  redis_server server;
  io_thread io;
  auto r = make_registry(io, server, 10s);
  std::vector<std::string> woken;
  r->add("a", [&](const grant& g) { woken.push_back("a" + std::to_string(g.size())); });
  r->add("b", [&](const grant& g) { woken.push_back("b" + std::to_string(g.size())); });
  r->deliver(reply::array({reply::integer(0), reply::string("b:1:5:10:9"), reply::string("gone:1:6:10:9"),
                           reply::string("a:bad")}),
             1);
  EXPECT_EQ(woken, (std::vector<std::string>{"b5", "a0"}));  // "gone" is nobody's; a's grant unreadable: empty
  r->remove("b");
  woken.clear();
  r->deliver(reply::array({reply::string("b:1:5:10:9")}), 0);
  EXPECT_TRUE(woken.empty());
  r->deliver(reply::string("a:1:5:10:9"), 0);  // not an array: nothing
  EXPECT_TRUE(woken.empty());
  r->close();
}

// Poll interval 10 s: only the loop's BLMPOP can bring a grant pushed by another client within the test's patience.
TEST(WakeRegistry, AGrantPushedOnTheWakeListReachesItsWaiterThroughTheLoop) {
  redis_server server;
  io_thread io;
  auto r = make_registry(io, server, 10s);
  awaited a;
  r->add("a", a.callback());
  server.admin({"LPUSH", r->wake_key(), "a:2:41:1800000000000000:1799999999000000"});
  ASSERT_TRUE(a.arrived());
  EXPECT_EQ(a.future.get(), (grant{0, 2, 41, 1800000000000000, 1799999999000000}));
  r->close();
}

// The loop stops once nobody waits, and the next add() starts it again (or that waiter's grant is never brought).
TEST(WakeRegistry, TheLoopStopsWhenNobodyWaitsAndStartsAgainForTheNextWaiter) {
  redis_server server;
  io_thread io;
  auto r = make_registry(io, server, 100ms);
  r->add("a", [](const grant&) {});
  ASSERT_TRUE(eventually([&] { return blocked_clients(server) == 1; }));  // the loop waits in BLMPOP
  r->remove("a");
  ASSERT_TRUE(eventually([&] { return blocked_clients(server) == 0; }));  // its last BLMPOP timed out
  const long long calls = server.calls("blmpop");
  // Stopped: no BLMPOP in three poll intervals. (A slow machine can only hide a loop that goes on, never fail this.)
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(server.calls("blmpop"), calls);
  awaited b;
  r->add("b", b.callback());  // starts it again
  server.admin({"LPUSH", r->wake_key(), "b:1:7:10:9"});
  ASSERT_TRUE(b.arrived());
  EXPECT_EQ(b.future.get(), (grant{0, 1, 7, 10, 9}));
  EXPECT_GT(server.calls("blmpop"), calls);  // a new loop brought it
  r->close();
}

TEST(WakeRegistry, CloseEndsABlmpopInFlightAtOnceAndTheLoopForGood) {
  redis_server server;
  io_thread io;
  auto r = make_registry(io, server, 10s);
  r->add("a", [](const grant&) {});
  ASSERT_TRUE(eventually([&] { return blocked_clients(server) == 1; }));
  r->close();
  // Well before the BLMPOP's own 10 s: the waker's connection was closed under it.
  ASSERT_TRUE(eventually([&] { return blocked_clients(server) == 0; }));
  const long long calls = server.calls("blmpop");
  int delivered = 0;
  r->add("b", [&](const grant&) { ++delivered; });  // closed: no loop starts
  server.admin({"LPUSH", r->wake_key(), "b:1:7:10:9"});
  r->deliver(reply::array({reply::string("b:1:7:10:9")}), 0);  // a reply's grants still reach their waiter
  EXPECT_EQ(delivered, 1);
  // A loop started by mistake would have taken the grant at once. (A slow machine can only hide that, never fail this.)
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(server.calls("blmpop"), calls);
  EXPECT_EQ(server.admin({"LLEN", r->wake_key()}), "1");  // nobody took it
  EXPECT_EQ(delivered, 1);
}

// Redis away: the loop's BLMPOP fails, it pauses a poll interval and tries again, and once Redis is back a pushed
// grant arrives.
TEST(WakeRegistry, TheLoopRecoversWhenRedisComesBack) {
  redis_server server;
  io_thread io;
  auto r = make_registry(io, server, 100ms);
  awaited a;
  r->add("a", a.callback());
  ASSERT_TRUE(eventually([&] { return blocked_clients(server) == 1; }));
  server.restart();
  server.admin({"LPUSH", r->wake_key(), "a:3:9:10:9"});
  ASSERT_TRUE(a.arrived());
  EXPECT_EQ(a.future.get(), (grant{0, 3, 9, 10, 9}));
  r->close();
}

}  // namespace wake_registry_testing
