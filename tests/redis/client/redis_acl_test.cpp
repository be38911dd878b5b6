// Redis 6 ACL users: AUTH user password from the URL, the smallest rule set under which every limiter and the
// semaphore work (docs/redis.md lists the same rules: keep them in step), a wrong password (auth_failed, a message
// that names the user and never the password), SELECT as such a user.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/fixed_window.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "admit/redis/sliding_log.hpp"
#include "admit/redis/sliding_window.hpp"
#include "admit/redis/token_bucket.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::connection;
using admit::redis::reply;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::patient;
using admit::redis::testing::redis_server;

// The rules of docs/redis.md: the commands the library sends (EVALSHA; SCRIPT LOAD after a NOSCRIPT; FCALL and
// FUNCTION LOAD for the semaphore's library; BLMPOP for the semaphore's wake-ups) and those its scripts call; the keys
// of one limiter or semaphore, named "api", are "{api}" and "{api}:..." (keys_of). Dropping any one rule fails this
// test, except +del, +llen and +zmscore: the semaphore's script calls them on a path this test does not take (the
// compaction of its queue); and +fcall or +function|load, without which the semaphore runs the same code by EVALSHA
// (redis_semaphore_functions_test.cpp).
std::vector<std::string> keys_of(const std::vector<std::string>& names) {
  std::vector<std::string> rules = {"resetkeys"};
  for (const auto& n : names) {
    rules.push_back("~{" + n + "}");
    rules.push_back("~{" + n + "}:*");
  }
  return rules;
}
const std::vector<std::string> minimal_commands = {"resetchannels",
                                                   "-@all",
                                                   "+evalsha",
                                                   "+script|load",
                                                   "+fcall",
                                                   "+function|load",
                                                   "+blmpop",
                                                   "+time",
                                                   "+get",
                                                   "+set",
                                                   "+del",
                                                   "+pexpire",
                                                   "+pexpireat",
                                                   "+hget",
                                                   "+hmget",
                                                   "+hset",
                                                   "+hdel",
                                                   "+hincrby",
                                                   "+lpush",
                                                   "+rpush",
                                                   "+lpop",
                                                   "+llen",
                                                   "+lrange",
                                                   "+zadd",
                                                   "+zcard",
                                                   "+zcount",
                                                   "+zmscore",
                                                   "+zrange",
                                                   "+zrangebyscore",
                                                   "+zrem",
                                                   "+zremrangebyscore",
                                                   "+zscore"};

void add_user(const redis_server& server, const std::string& name, const std::string& password,
              const std::vector<std::string>& rules) {
  std::vector<std::string> cmd = {"ACL", "SETUSER", name, "reset", "on", ">" + password};
  cmd.insert(cmd.end(), rules.begin(), rules.end());
  const auto keys = keys_of({"api", "gcra", "token_bucket", "fixed_window", "sliding_window", "sliding_log"});
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  ASSERT_EQ(server.admin(cmd), "OK");
}

std::string user_url(const redis_server& server, const std::string& user, const std::string& password, int db = 0) {
  return "redis://" + user + ":" + password + "@127.0.0.1:" + std::to_string(server.port()) + "/" + std::to_string(db);
}

TEST(RedisAcl, EveryLimiterAndTheSemaphoreWorkAsAUserWithTheMinimalRules) {
  redis_server server;
  add_user(server, "limiter", "s3cret", minimal_commands);
  io_thread io;
  connection conn(io.executor(), user_url(server, "limiter", "s3cret"));
  ASSERT_FALSE(conn.connect()) << conn.last_error();
  // The rules do hold: anything else is refused.
  EXPECT_TRUE(conn.execute("FLUSHALL").value.is_error("NOPERM"));
  EXPECT_TRUE(conn.execute("GET", "other").value.is_error("NOPERM"));
  ASSERT_EQ(server.admin({"ACL", "LOG", "RESET"}), "OK");

  const auto check = [&](const admit::redis::limiter& l, int burst, const char* what) {
    int admitted = 0;
    for (int i = 0; i < burst + 2; ++i) {
      const auto r = l.decide("user:1");
      ASSERT_TRUE(r.consulted) << what << ": " << r.error.message();
      admitted += r.decision.admitted ? 1 : 0;
    }
    EXPECT_EQ(admitted, burst) << what;
  };
  check(admit::redis::gcra(conn, "gcra", admit::rate::per_second(1), 3, patient()), 3, "gcra");
  check(admit::redis::token_bucket(conn, "token_bucket", admit::rate::per_second(1), 3, patient()), 3, "token_bucket");
  check(admit::redis::fixed_window(conn, "fixed_window", 3, 1h, patient()), 3, "fixed_window");
  check(admit::redis::sliding_window(conn, "sliding_window", 3, 1h, patient()), 3, "sliding_window");
  check(admit::redis::sliding_log(conn, "sliding_log", 3, 1h, patient()), 3, "sliding_log");

  // The semaphore: acquire, a waiter woken by a release (BLMPOP), inspect, release.
  admit::redis::semaphore s(conn, "api", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  auto waiter = std::async(std::launch::async, [&] { return s.try_acquire_for(20s); });
  ASSERT_TRUE(eventually([&] { return s.inspect().first.waiter_count == 1; })) << s.inspect().second.message();
  EXPECT_EQ(held->release().first, admit::redis::lease::release_status::released);
  auto woken = waiter.get();
  ASSERT_TRUE(woken) << woken.error().message();
  EXPECT_EQ(woken->release().first, admit::redis::lease::release_status::released);
  const auto [snapshot, ec] = s.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(snapshot.available, 1);

  // Nothing the library did (the scripts' own calls included) was refused.
  EXPECT_EQ(server.admin({"ACL", "LOG"}), "");
}

TEST(RedisAcl, AWrongPasswordNamesTheUserButNeverThePassword) {
  redis_server server;
  add_user(server, "limiter", "s3cret", minimal_commands);
  io_thread io;
  connection conn(io.executor(), user_url(server, "limiter", "wr0ng-pw"));
  EXPECT_EQ(conn.connect(), errc::auth_failed);
  EXPECT_EQ(conn.last_connect_error(), errc::auth_failed);
  const std::string message = conn.last_error();
  EXPECT_NE(message.find("user 'limiter'"), std::string::npos) << message;
  EXPECT_NE(message.find("WRONGPASS"), std::string::npos) << message;
  EXPECT_EQ(message.find("wr0ng-pw"), std::string::npos) << message;
  EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;

  connection unknown(io.executor(), user_url(server, "nobody", "wr0ng-pw"));
  EXPECT_EQ(unknown.connect(), errc::auth_failed);
  EXPECT_NE(unknown.last_error().find("user 'nobody'"), std::string::npos) << unknown.last_error();
  EXPECT_EQ(unknown.last_error().find("wr0ng-pw"), std::string::npos) << unknown.last_error();
}

TEST(RedisAcl, SelectNeedsItsOwnRule) {
  redis_server server;
  add_user(server, "limiter", "s3cret", minimal_commands);
  std::vector<std::string> with_select = minimal_commands;
  with_select.push_back("+select");
  add_user(server, "limiter2", "s3cret", with_select);
  io_thread io;

  connection refused(io.executor(), user_url(server, "limiter", "s3cret", 2));
  EXPECT_EQ(refused.connect(), errc::select_failed);
  EXPECT_NE(refused.last_error().find("SELECT 2: NOPERM"), std::string::npos) << refused.last_error();

  connection selected(io.executor(), user_url(server, "limiter2", "s3cret", 2));
  admit::redis::gcra limiter(selected, "api", admit::rate::per_second(1), 1, patient());
  EXPECT_TRUE(limiter.decide("k").decision.admitted) << selected.last_error();
  EXPECT_NE(server.admin({"KEYS", "*"}, 2), "");  // the state is in database 2
  EXPECT_EQ(server.admin({"KEYS", "*"}, 0), "");
}

TEST(RedisAcl, TheUserFromOptionsAndOverAUnixSocket) {
  redis_server server;
  add_user(server, "limiter", "s3cret", minimal_commands);
  io_thread io;
  connection conn(io.executor(), "unix://" + server.unix_path() + "?user=limiter&password=s3cret");
  admit::redis::gcra limiter(conn, "api", admit::rate::per_second(1), 1, patient());
  const auto r = limiter.decide("k");
  EXPECT_TRUE(r.consulted) << r.error.message() << " " << conn.last_error();
}

// The refusals of credentials, as a real server sends them, are one kind of error reply (the programs tell them apart
// from a server that cannot answer now, which waiting may mend); the others are not.
TEST(RedisAcl, RefusedCredentialsAreOneKindOfErrorReply) {
  using admit::redis::error_kind;
  redis_server server;
  add_user(server, "limiter", "s3cret", minimal_commands);
  io_thread io;
  connection conn(io.executor(), user_url(server, "limiter", "s3cret"));
  ASSERT_FALSE(conn.connect()) << conn.last_error();
  const reply noperm = conn.execute("FLUSHALL").value;
  const reply wrongpass = conn.execute("AUTH", "limiter", "wr0ng-pw").value;
  ASSERT_EQ(server.admin({"SET", "{api}:text", "x"}), "OK");
  const reply wrongtype = conn.execute("HGET", "{api}:text", "f").value;

  redis_server locked({.requirepass = "right"});
  connection anonymous(io.executor(), "redis://127.0.0.1:" + std::to_string(locked.port()));
  (void)anonymous.connect();
  const reply noauth = anonymous.execute("GET", "k").value;

  for (const reply& r : {noperm, wrongpass, noauth}) {
    EXPECT_TRUE(r.is_credentials_error()) << r;
    EXPECT_FALSE(r.is_transient_error()) << r;
  }
  EXPECT_TRUE(noperm.is_error("NOPERM")) << noperm;
  EXPECT_TRUE(wrongpass.is_error("WRONGPASS")) << wrongpass;
  EXPECT_TRUE(noauth.is_error("NOAUTH")) << noauth;
  EXPECT_TRUE(wrongtype.is_error("WRONGTYPE")) << wrongtype;
  EXPECT_FALSE(wrongtype.is_credentials_error());
  EXPECT_FALSE(reply::string("NOAUTH").is_credentials_error());  // only an error reply is one

  // The first word decides, exactly: "not now" is a kind of its own.
  for (const char* text : {"LOADING Redis is loading", "BUSY Redis is busy", "TRYAGAIN", "MASTERDOWN Link is down",
                           "CLUSTERDOWN The cluster is down"}) {
    EXPECT_EQ(admit::redis::kind_of_error(text), error_kind::transient) << text;
  }
  EXPECT_EQ(admit::redis::kind_of_error("NOAUTHENTICATION"), error_kind::other);
  EXPECT_EQ(admit::redis::kind_of_error("noauth Authentication required."), error_kind::other);
  EXPECT_EQ(admit::redis::kind_of_error(""), error_kind::other);
}

}  // namespace
