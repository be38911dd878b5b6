// The head of the semaphore's queue watches the leases, against a real redis-server, the script called directly as a
// process would: its queued reply's fourth element is the µs until the earliest lease expires, also when records of
// waiters that left are ahead of it in the list (dropped on the way); a waiter behind it gets 0 (it polls at its
// poll_interval); and a renewal that moves a lease's expiry earlier (Redis's clock stepped back) moves the sweep with
// it, so that the head's poll at that time finds the lease gone instead of asking again at once.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "redis_server.hpp"
#include "semaphore_script.hpp"

namespace {

using admit::redis::testing::eval_args;
using admit::redis::testing::redis_server;
using admit::redis::testing::semaphore_source;

// One process's calls on semaphore "watch" of capacity 1, its replies as their elements (admin() gives one a line).
class caller {
 public:
  explicit caller(const redis_server& server) : server_(server), source_(semaphore_source()) {
    EXPECT_FALSE(source_.empty());
  }
  std::vector<std::string> acquire(const std::string& id) {
    return call({"acquire", "1", id, "1", "60000000", "1", "-1", "60000000", wake_});
  }
  std::vector<std::string> poll(const std::string& id) { return call({"poll", "1", id, "60000000"}); }
  std::vector<std::string> cancel(const std::string& id) { return call({"cancel", "1", id, wake_}); }
  std::vector<std::string> renew(const std::string& id, const std::string& ttl_us) {
    return call({"renew", "1", id, ttl_us});
  }
  std::string admin(const std::vector<std::string>& args) const { return server_.admin(args); }

 private:
  std::vector<std::string> call(const std::vector<std::string>& argv) const {
    std::istringstream lines(server_.admin(eval_args(source_, "watch", argv)));
    std::vector<std::string> elements;
    for (std::string line; std::getline(lines, line);) elements.push_back(line);
    return elements;
  }

  const redis_server& server_;
  std::string source_;
  std::string wake_ = "{watch}:wake:other";
};

// Whether `element` is the µs until a lease of 60 s, granted a moment ago, expires.
bool until_the_lease_expires(const std::string& element) {
  const std::int64_t us = std::stoll(element);
  return us > 50'000'000 && us <= 60'000'000;
}

TEST(RedisSemaphoreHeadWatch, TheHeadBehindRecordsOfDepartedWaitersStillWatchesTheLeases) {
  redis_server server;
  caller c(server);
  ASSERT_EQ(c.acquire("h").at(0), "0");  // h holds the only permit
  const auto first = c.acquire("w1");
  ASSERT_EQ(first.at(0), "1");
  EXPECT_TRUE(until_the_lease_expires(first.at(3))) << first.at(3);  // w1 heads the queue
  const auto second = c.acquire("w2");
  ASSERT_EQ(second.at(0), "1");
  EXPECT_EQ(second.at(3), "0");  // behind w1: at its poll interval
  ASSERT_EQ(c.cancel("w1").at(0), "6");
  EXPECT_EQ(c.admin({"LLEN", "{watch}:waiting"}), "2");  // w1's record stays until the head is served
  const auto polled = c.poll("w2");
  ASSERT_EQ(polled.at(0), "1");
  EXPECT_TRUE(until_the_lease_expires(polled.at(3))) << polled.at(3);  // the head now, w1's record dropped
  EXPECT_EQ(c.admin({"LLEN", "{watch}:waiting"}), "1");
}

TEST(RedisSemaphoreHeadWatch, ARenewalThatMovesALeasesExpiryEarlierMovesTheSweepWithIt) {
  redis_server server;
  caller c(server);
  ASSERT_EQ(c.acquire("h").at(0), "0");
  ASSERT_EQ(c.acquire("w").at(0), "1");
  // Renewed for 1 µs: its expiry moves from 60 s away to now, as a clock stepped back would move it (every holder
  // renews with its own lease ttl).
  ASSERT_EQ(c.renew("h", "1").at(0), "0");
  const auto polled = c.poll("w");  // a round trip later: h's lease has expired
  EXPECT_EQ(polled.at(0), "0") << "w is told to ask again in " << (polled.size() > 3 ? polled[3] : "?") << " µs";
}

}  // namespace
