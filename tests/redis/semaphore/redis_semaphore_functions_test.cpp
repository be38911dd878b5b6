// The semaphore's script as a Redis Functions library, against real redis-servers: on Redis 7 its calls are FCALLs
// of its library's function (FUNCTION LOAD on demand, once), a FUNCTION FLUSH mid-use is loaded again without a lost
// call; a server without functions (FCALL and FUNCTION renamed away, as on Redis 6) gets the same code by EVALSHA,
// asking FCALL only once per process; an ACL user who may call scripts but not FCALL gets EVALSHA too. The fallback
// cases run in a child process of their own (this binary again): a process remembers that functions were refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/script.hpp"
#include "admit/redis/semaphore.hpp"
#include "child_process.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "self_exec.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::semaphore;
using admit::redis::testing::child_process;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::role_argv;
using admit::redis::testing::wait_for_waiters;

// What every case below does with a semaphore: a grant, a hand-off to a waiter, a release, inspect. Exits on failure
// (a child process) or fails the test.
void use(connection& conn, const std::string& name) {
  semaphore s(conn, name, 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  auto waiter = std::async(std::launch::async, [&] { return s.try_acquire_for(20s); });
  wait_for_waiters(s, 1);
  ASSERT_EQ(held->release().first, lease::release_status::released);
  auto second = waiter.get();
  ASSERT_TRUE(second) << second.error().message();
  EXPECT_GT(second->fencing_token(), 0);
  ASSERT_EQ(second->release().first, lease::release_status::released);
  const auto [snap, ec] = s.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(snap.available, 1);
}

// Roles: "use URL NAME": use() against that server, exit 0 when every expectation held.
TEST(RedisSemaphoreFunctionsChild, Role) {
  const auto args = admit::redis::testing::role_arguments();
  if (args.empty()) GTEST_SKIP() << "run by the other tests as a separate process";
  io_thread io;
  connection conn(io.executor(), args.at(1));
  use(conn, args.at(2));
  std::_Exit(::testing::Test::HasFailure() ? 3 : 0);
}

TEST(RedisSemaphoreFunctions, CallsAreFcallsOfTheLibrarysFunction) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  use(conn, "fn");
  EXPECT_GT(server.calls("fcall"), 0);
  EXPECT_EQ(server.calls("evalsha"), 0);
  EXPECT_EQ(server.calls("function|load"), 1) << "loaded once, on the first call";
  const std::string libraries = server.admin({"FUNCTION", "LIST"});
  EXPECT_NE(libraries.find("admit_semaphore_"), std::string::npos) << libraries;
}

TEST(RedisSemaphoreFunctions, AFunctionFlushMidUseIsLoadedAgain) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  semaphore s(conn, "flushed", 2);
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  server.admin({"FUNCTION", "FLUSH"});
  auto more = s.try_acquire();  // "Function not found": loaded again, called again
  ASSERT_TRUE(more) << more.error().message();
  EXPECT_GT(more->fencing_token(), held->fencing_token());
  server.admin({"FUNCTION", "FLUSH"});
  EXPECT_EQ(held->release().first, lease::release_status::released);
  EXPECT_EQ(more->release().first, lease::release_status::released);
  EXPECT_EQ(server.calls("function|load"), 3) << "once at first, then once after each flush";
}

// FCALL and FUNCTION renamed away: what a server older than 7.0 answers ("unknown command"). The child process's
// semaphore works by EVALSHA; it asked FCALL once (one "unknown command" error), then went straight to EVALSHA.
TEST(RedisSemaphoreFunctions, AServerWithoutFunctionsGetsTheSameCodeByEvalsha) {
  redis_server::config old;
  old.extra_arguments = {"--rename-command", "FCALL", "", "--rename-command", "FUNCTION", ""};
  redis_server server(old);
  child_process child(role_argv("RedisSemaphoreFunctionsChild.Role", {"use", server.url(), "old"}));
  ASSERT_EQ(child.wait(), 0) << child.out() << child.err();
  EXPECT_GT(server.calls("evalsha"), 3);
  const std::string errors = server.admin({"INFO", "errorstats"});
  EXPECT_NE(errors.find("errorstat_ERR:count=1\r"), std::string::npos) << "FCALL asked more than once: " << errors;
}

// A user who may run scripts (EVALSHA, SCRIPT) but not functions: NOPERM for FCALL, EVALSHA instead.
TEST(RedisSemaphoreFunctions, AUserWhoMayNotCallFunctionsGetsEvalsha) {
  redis_server server;
  server.admin({"ACL", "SETUSER", "scripts", "on", ">pw", "~*", "&*", "+@all", "-fcall", "-fcall_ro", "-function"});
  child_process child(role_argv("RedisSemaphoreFunctionsChild.Role",
                                {"use", "redis://scripts:pw@127.0.0.1:" + std::to_string(server.port()), "acl"}));
  ASSERT_EQ(child.wait(), 0) << child.out() << child.err();
  EXPECT_GT(server.calls("evalsha"), 3);
  // A refused FCALL counts in rejected_calls, not calls: the refusal is counted as an error, once.
  const std::string errors = server.admin({"INFO", "errorstats"});
  EXPECT_NE(errors.find("errorstat_NOPERM:count=1\r"), std::string::npos) << "FCALL asked more than once: " << errors;
}

}  // namespace
