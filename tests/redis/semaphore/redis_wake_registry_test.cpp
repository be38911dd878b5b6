// The semaphore's wake registry alone (src/redis/semaphore/wake_registry.hpp): grants reach their waiters and no one
// else, unreadable grants arrive empty, and the wake-up loop is started once and stopped when nobody waits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "admit/redis/client/reply.hpp"
#include "wake_registry.hpp"

namespace {

using admit::redis::reply;
using admit::redis::detail::wake_registry;
using grant = wake_registry::grant;

TEST(WakeRegistry, ParsesAGrantAndRefusesWhatIsNotOne) {
  EXPECT_EQ(wake_registry::parse("abc:2:17:1800000000000000:1799999999000000"),
            (grant{0, 2, 17, 1800000000000000, 1799999999000000}));
  EXPECT_TRUE(wake_registry::parse("abc:2:17:1800000000000000").empty());  // a field missing
  EXPECT_TRUE(wake_registry::parse("abc").empty());
}

TEST(WakeRegistry, EachGrantReachesItsOwnWaiterOnly) {
  wake_registry r;
  std::vector<std::string> woken;
  EXPECT_TRUE(r.add("a", [&](const grant& g) { woken.push_back("a" + std::to_string(g.size())); }));
  EXPECT_FALSE(r.add("b", [&](const grant& g) { woken.push_back("b" + std::to_string(g.size())); }));  // running
  r.deliver(reply::array({reply::integer(0), reply::string("b:1:5:10:9"), reply::string("gone:1:6:10:9"),
                          reply::string("a:bad")}),
            1);
  EXPECT_EQ(woken, (std::vector<std::string>{"b5", "a0"}));  // "gone" is nobody's; a's grant unreadable: empty
  r.remove("b");
  woken.clear();
  r.deliver(reply::array({reply::string("b:1:5:10:9")}), 0);
  EXPECT_TRUE(woken.empty());
  r.deliver(reply::string("a:1:5:10:9"), 0);  // not an array: nothing
  EXPECT_TRUE(woken.empty());
}

TEST(WakeRegistry, TheLoopRunsWhileSomebodyWaitsAndStartsAgainAfter) {
  wake_registry r;
  EXPECT_TRUE(r.add("a", [](const grant&) {}));
  EXPECT_TRUE(r.keep_running(false));
  EXPECT_FALSE(r.keep_running(true));            // closing: stops, whoever waits
  EXPECT_TRUE(r.add("b", [](const grant&) {}));  // stopped: this one starts it again
  r.remove("a");
  r.remove("b");
  EXPECT_FALSE(r.keep_running(false));  // nobody waits
  EXPECT_TRUE(r.add("c", [](const grant&) {}));
}

}  // namespace
