// Redis Sentinel (admit/redis/client/sentinel.hpp) against real processes: a master, a replica and three sentinels.
// Discovery (with a sentinel down, an unknown master name, no sentinel at all, a named node that is a replica), a
// node turned into a replica under a live connection (READONLY), and a real failover (SIGKILL of the master) under a
// fail-closed limiter, a fail-open limiter and a semaphore, which recover by themselves; a promoted replica that missed
// the latest writes is reported as lost state, and the scripts it never saw are loaded again.
#include "admit/redis/client/connection.hpp"

#include <gtest/gtest.h>

#include "admit/redis/client/cluster.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admit/rate.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "admit/redis/token_bucket.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_sentinel.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::connection;
using admit::redis::decided_by;
using admit::redis::failure_policy;
using admit::redis::limiter_options;
using admit::redis::limiter_result;
using admit::redis::parse_url;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_sentinel_group;
using admit::redis::testing::redis_server;
using clock_type = std::chrono::steady_clock;

// The port of the server a connection is connected to (CONFIG GET port).
std::uint16_t served_by(connection& conn) {
  const auto r = conn.execute_for(10s, "CONFIG", "GET", "port");
  if (r.error || !r.value.is_array() || r.value.elements().size() != 2) return 0;
  return static_cast<std::uint16_t>(std::stoi(r.value.elements()[1].str()));
}

// A loopback port nothing listens on (bound, then closed: a connection to it is refused).
std::uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string where(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// A loopback port that accepts connections (the kernel completes them) but never answers: a sentinel that hangs.
// connections() counts the connections made to it so far.
class silent_listener {
 public:
  silent_listener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("silent_listener: bind/listen failed");
    }
    port_ = ntohs(addr.sin_port);
  }
  ~silent_listener() {
    for (int fd : accepted_) ::close(fd);
    ::close(fd_);
  }
  silent_listener(const silent_listener&) = delete;
  silent_listener& operator=(const silent_listener&) = delete;
  std::uint16_t port() const { return port_; }
  std::size_t connections() {
    for (int fd; (fd = ::accept(fd_, nullptr, nullptr)) >= 0;) accepted_.push_back(fd);
    return accepted_.size();
  }

 private:
  int fd_;
  std::uint16_t port_ = 0;
  std::vector<int> accepted_;
};

TEST(RedisSentinel, DiscoversTheMaster) {
  redis_sentinel_group g;
  io_thread io;
  connection conn(io.executor(), g.url());
  ASSERT_FALSE(conn.connect());
  EXPECT_EQ(served_by(conn), g.master_port());
  ASSERT_TRUE(conn.execute_for(10s, "SET", "k", "v").ok());
  EXPECT_EQ(redis_sentinel_group::admin(g.master_port(), {"GET", "k"}), "v");
}

TEST(RedisSentinel, DiscoversTheMasterWithTheFirstSentinelDown) {
  redis_sentinel_group g;
  g.kill_sentinel(0);
  io_thread io;
  connection conn(io.executor(), g.url());
  ASSERT_FALSE(conn.connect()) << conn.last_error();
  EXPECT_EQ(served_by(conn), g.master_port());
}

TEST(RedisSentinel, UsesTheDataNodesDatabase) {
  redis_sentinel_group g;
  io_thread io;
  connection conn(io.executor(), g.url(3));
  ASSERT_TRUE(conn.execute_for(10s, "SET", "in-3", "v").ok());
  EXPECT_EQ(redis_sentinel_group::admin(g.master_port(), {"EXISTS", "in-3"}), "0");
}

TEST(RedisSentinel, UnknownMasterNameFailsNamingEverySentinelAsked) {
  redis_sentinel_group g;
  auto o = parse_url(g.url());
  o.sentinel.master_name = "nobody";
  io_thread io;
  connection conn(io.executor(), o);
  EXPECT_EQ(conn.connect(), errc::unknown_master);
  const std::string words = conn.last_error();
  EXPECT_NE(words.find("no sentinel knows master 'nobody'"), std::string::npos) << words;
  for (std::size_t i = 0; i < redis_sentinel_group::sentinel_count; ++i) {
    EXPECT_NE(words.find(where(g.sentinel_port(i)) + ": does not know it"), std::string::npos) << words;
  }
  // A call made meanwhile waits unsent until its deadline; the connection says why.
  EXPECT_EQ(conn.execute_for(100ms, "PING").error, errc::timeout);
  EXPECT_EQ(conn.last_connect_error(), errc::unknown_master);
}

TEST(RedisSentinel, NoSentinelAnsweringFailsNamingEachAndWhy) {
  const std::uint16_t a = closed_port(), b = closed_port();
  admit::redis::connection_options o;
  o.sentinel.master_name = "m";
  o.sentinel.sentinels = {{"127.0.0.1", a}, {"127.0.0.1", b}};
  io_thread io;
  connection conn(io.executor(), o);
  EXPECT_EQ(conn.connect(), errc::no_sentinel);
  const std::string words = conn.last_error();
  EXPECT_NE(words.find("no sentinel answered for master 'm'"), std::string::npos) << words;
  EXPECT_NE(words.find(where(a) + ": connection refused"), std::string::npos) << words;
  EXPECT_NE(words.find(where(b) + ": connection refused"), std::string::npos) << words;
}

TEST(RedisSentinel, SentinelThatHangsIsGivenUpAfterTheConnectTimeoutAndTheNextOneAsked) {
  redis_sentinel_group g;
  silent_listener hung;
  auto o = parse_url(g.url());
  o.connect_timeout = 1s;  // the hung sentinel costs this once; the others answer well within it
  o.sentinel.sentinels.insert(o.sentinel.sentinels.begin(), {"127.0.0.1", hung.port()});
  io_thread io;
  connection conn(io.executor(), o);
  ASSERT_FALSE(conn.connect()) << conn.last_error();
  EXPECT_EQ(served_by(conn), g.master_port());
  EXPECT_EQ(hung.connections(), 1u);
  // A reconnection asks first the sentinel that answered last time: the hung one is not tried again.
  ASSERT_NE(redis_sentinel_group::admin(g.master_port(), {"CLIENT", "KILL", "TYPE", "normal"}).rfind('-', 0), 0u);
  ASSERT_TRUE(eventually([&] { return conn.statistics().connects == 2; }, std::chrono::seconds(30)));
  EXPECT_EQ(served_by(conn), g.master_port());
  EXPECT_EQ(hung.connections(), 1u);
}

TEST(RedisSentinel, OnlyAHungSentinelIsNoSentinelAndCloseDoesNotWaitForIt) {
  silent_listener hung;
  admit::redis::connection_options o;
  o.sentinel.master_name = "m";
  o.sentinel.sentinels = {{"127.0.0.1", hung.port()}};
  o.connect_timeout = 200ms;
  {
    io_thread io;
    connection conn(io.executor(), o);
    EXPECT_EQ(conn.connect(), errc::no_sentinel);
    EXPECT_NE(conn.last_error().find(where(hung.port()) + ": timed out"), std::string::npos) << conn.last_error();
  }
  // Closed in the middle of a discovery that would take a minute: the connection and its io_context end at once.
  o.connect_timeout = 60s;
  const auto start = clock_type::now();
  {
    io_thread io;
    connection conn(io.executor(), o);
    EXPECT_EQ(conn.connect_until(clock_type::now() + 100ms), errc::timeout);
  }
  EXPECT_LT(clock_type::now() - start, 30s);
}

TEST(RedisSentinel, ClusterRefusesSentinelSeeds) {
  io_thread io;
  EXPECT_THROW(admit::redis::cluster(io.executor(), "redis+sentinel://127.0.0.1/m"), std::invalid_argument);
}

TEST(RedisSentinel, SentinelAuthFailureIsReportedForThatSentinel) {
  redis_sentinel_group g;
  auto o = parse_url(g.url());
  o.sentinel.password = "not-configured";  // the sentinels have no password: AUTH fails
  io_thread io;
  {
    // Every sentinel refused AUTH: a wrong sentinel password, which waiting does not fix (it was no_sentinel, which
    // says that waiting may help).
    connection conn(io.executor(), o);
    EXPECT_EQ(conn.connect(), errc::auth_failed);
    EXPECT_NE(conn.last_error().find("every sentinel refused the credentials"), std::string::npos) << conn.last_error();
    EXPECT_NE(conn.last_error().find(where(g.sentinel_port(0)) + ": AUTH: "), std::string::npos) << conn.last_error();
  }
  {
    // One more sentinel that cannot be reached: it may come back (and take the password), so no_sentinel.
    o.sentinel.sentinels.push_back({"127.0.0.1", closed_port()});
    connection conn(io.executor(), o);
    EXPECT_EQ(conn.connect(), errc::no_sentinel);
    EXPECT_NE(conn.last_error().find(where(g.sentinel_port(0)) + ": AUTH: "), std::string::npos) << conn.last_error();
  }
}

TEST(RedisSentinel, NodesThatAreNoSentinelsAreAnUnknownMaster) {
  redis_sentinel_group g;
  // The data nodes given as sentinels: each answers SENTINEL with an error. It was no_sentinel (waiting may help).
  admit::redis::connection_options o;
  o.sentinel.master_name = "mymaster";
  o.sentinel.sentinels = {{"127.0.0.1", g.master_port()}, {"127.0.0.1", g.replica_port()}};
  io_thread io;
  connection conn(io.executor(), o);
  EXPECT_EQ(conn.connect(), errc::unknown_master);
  EXPECT_NE(conn.last_error().find("SENTINEL get-master-addr-by-name: ERR unknown command"), std::string::npos)
      << conn.last_error();
}

TEST(RedisSentinel, NamedNodeThatIsAReplicaIsNotUsed) {
  redis_sentinel_group g;
  // Sentinel 0 also watches the replica as a master of its own (quorum 2: it alone never fails it over).
  ASSERT_EQ(redis_sentinel_group::admin(g.sentinel_port(0), {"SENTINEL", "MONITOR", "replica-as-master", "127.0.0.1",
                                                             std::to_string(g.replica_port()), "2"}),
            "OK");
  admit::redis::connection_options o;
  o.sentinel.master_name = "replica-as-master";
  o.sentinel.sentinels = {{"127.0.0.1", g.sentinel_port(0)}};
  io_thread io;
  connection conn(io.executor(), o);
  EXPECT_EQ(conn.connect(), errc::not_master);
  const std::string words = conn.last_error();
  EXPECT_NE(words.find(where(g.replica_port()) + ", named master 'replica-as-master' by sentinel " +
                       where(g.sentinel_port(0))),
            std::string::npos)
      << words;
  EXPECT_NE(words.find("ROLE answered 'slave'"), std::string::npos) << words;
}

TEST(RedisSentinel, ReadonlyReplyDropsTheConnectionAndTheNextAttemptAsksAgain) {
  redis_sentinel_group g;
  redis_server solo;
  ASSERT_EQ(redis_sentinel_group::admin(g.sentinel_port(0),
                                        {"SENTINEL", "MONITOR", "solo", "127.0.0.1", std::to_string(solo.port()), "2"}),
            "OK");
  admit::redis::connection_options o;
  o.sentinel.master_name = "solo";
  o.sentinel.sentinels = {{"127.0.0.1", g.sentinel_port(0)}};
  io_thread io;
  connection conn(io.executor(), o);
  ASSERT_FALSE(conn.connect()) << conn.last_error();
  ASSERT_TRUE(conn.execute_for(10s, "SET", "k", "1").ok());
  // The node becomes a replica without closing its clients (Sentinel would have closed them).
  ASSERT_EQ(solo.admin({"REPLICAOF", "127.0.0.1", std::to_string(g.master_port())}), "OK");
  const auto r = conn.execute_for(10s, "SET", "k", "2");
  ASSERT_FALSE(r.error);
  EXPECT_TRUE(r.value.is_error("READONLY")) << r.value;
  // The connection was dropped; the next attempt asks the sentinel again, which still names the node, and the ROLE
  // check refuses it.
  EXPECT_TRUE(eventually([&] { return conn.last_connect_error() == errc::not_master; }, std::chrono::seconds(30)))
      << conn.last_connect_error().message() << " / " << conn.last_error();
  EXPECT_EQ(conn.statistics().connection_losses, 1u);
}

// ---- failovers ----

// One decision as a test sees it.
struct observed {
  clock_type::time_point at;
  limiter_result result;
};

TEST(RedisSentinelFailover, LimitersAndSemaphoreFollowTheNewMasterWithTheirFailurePolicyInTheGap) {
  redis_sentinel_group g;
  g.wait_until_ready_for_failover();
  io_thread io(2);
  connection conn(io.executor(), g.url());
  limiter_options closed_options;
  closed_options.timeout = 300ms;
  closed_options.on_failure = failure_policy::fail_closed;
  limiter_options open_options = closed_options;
  open_options.on_failure = failure_policy::fail_open;
  admit::redis::gcra closed(conn, "failover-gcra", admit::rate::per_second(10'000), 10'000, closed_options);
  admit::redis::token_bucket open(conn, "failover-tb", admit::rate::per_second(10'000), 10'000, open_options);
  admit::redis::semaphore_options sem_options;
  sem_options.timeout = 300ms;
  admit::redis::semaphore sem(conn, "failover-sem", 2, sem_options);

  // Before: Redis decides (the first decisions also connect and load the function libraries: they may take longer
  // than a decision's timeout on a loaded machine). The replica never loads anything itself: a FUNCTION LOAD is
  // replicated, so the libraries are on it already, and they are kept across the failover.
  ASSERT_FALSE(conn.connect()) << conn.last_error();
  ASSERT_TRUE(eventually([&] { return closed.decide("k").consulted; }, std::chrono::seconds(30)));
  ASSERT_TRUE(eventually([&] { return open.decide("k").consulted; }, std::chrono::seconds(30)));
  {
    auto lease = sem.try_acquire_for(10s);
    ASSERT_TRUE(lease) << lease.error().message();
    ASSERT_EQ(lease->release().first, admit::redis::lease::release_status::released);
  }
  // The loads a server has run, those replicated from its master included (a replica runs its master's writes).
  const auto loads = [](std::uint16_t port) {
    const std::string info = redis_sentinel_group::admin(port, {"INFO", "commandstats"});
    long long n = 0;
    for (const char* key : {"cmdstat_script|load:calls=", "cmdstat_function|load:calls="}) {
      const auto at = info.find(key);
      if (at != std::string::npos) n += std::atoll(info.c_str() + at + std::strlen(key));
    }
    return n;
  };
  ASSERT_TRUE(eventually([&] {
    const std::string libraries = redis_sentinel_group::admin(g.replica_port(), {"FUNCTION", "LIST"});
    return libraries.find("admit_gcra_") != std::string::npos &&
           libraries.find("admit_token_bucket_") != std::string::npos &&
           libraries.find("admit_semaphore_") != std::string::npos;
  }));
  const long long replicated_loads = loads(g.replica_port());
  ASSERT_EQ(served_by(conn), g.master_port());

  // Decide continuously from another thread while the master dies and the sentinels promote the replica.
  std::mutex mutex;
  std::vector<observed> closed_seen, open_seen;
  std::atomic<bool> stop{false};
  std::thread driver;
  struct stop_and_join {  // also when an assertion below ends the test early
    std::atomic<bool>& stop;
    std::thread& thread;
    ~stop_and_join() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } guard{stop, driver};
  driver = std::thread([&] {
    while (!stop.load()) {
      limiter_result c = closed.decide("k");
      limiter_result o = open.decide("k");
      const auto now = clock_type::now();
      {
        std::lock_guard lock(mutex);
        closed_seen.push_back({now, std::move(c)});
        open_seen.push_back({now, std::move(o)});
      }
      // Paced: with the breaker open, decisions return at once; a few hundred a second are plenty.
      std::this_thread::sleep_for(2ms);
    }
  });
  const auto first_after = [&](std::vector<observed>& seen, clock_type::time_point t) -> std::optional<observed> {
    std::lock_guard lock(mutex);
    for (const auto& s : seen) {
      if (s.at > t && s.result.consulted) return s;
    }
    return std::nullopt;
  };
  std::this_thread::sleep_for(200ms);  // some decisions before the kill (not a wait for time to pass in a limiter)
  const auto killed = clock_type::now();
  g.kill_master();
  const auto promoted = g.wait_for_failover();
  // Recovery by itself: each limiter is decided by Redis again within the time a reconnection needs once the
  // sentinels name the new master (backoff up to reconnect_max 2 s, a connect, the breaker's 1 s open period), with
  // a generous bound for a loaded machine.
  const auto bound = promoted + 30s;
  ASSERT_TRUE(eventually([&] { return first_after(closed_seen, promoted) && first_after(open_seen, promoted); },
                         std::chrono::seconds(60)));
  stop = true;
  driver.join();
  EXPECT_LT(first_after(closed_seen, promoted)->at, bound);
  EXPECT_LT(first_after(open_seen, promoted)->at, bound);

  // In the gap (between the kill and the recovery) the failure policies decided, and only they: fail-closed refused
  // with an error, fail-open admitted with an error.
  const auto recovered_closed = first_after(closed_seen, killed)->at;
  const auto recovered_open = first_after(open_seen, killed)->at;
  std::size_t closed_gap = 0, open_gap = 0;
  for (const auto& s : closed_seen) {
    if (s.result.consulted) continue;
    ++closed_gap;
    EXPECT_FALSE(s.result.decision.admitted);
    EXPECT_TRUE(s.result.error);
    EXPECT_EQ(s.result.source, decided_by::failure_policy);
  }
  for (const auto& s : open_seen) {
    if (s.result.consulted) continue;
    ++open_gap;
    EXPECT_TRUE(s.result.decision.admitted);
    EXPECT_TRUE(s.result.error);
    EXPECT_EQ(s.result.source, decided_by::failure_policy);
  }
  EXPECT_GT(closed_gap, 0u);
  EXPECT_GT(open_gap, 0u);
  EXPECT_GT(recovered_closed, killed);
  EXPECT_GT(recovered_open, killed);

  // The connection is on the new master, which had the libraries already: nothing was loaded there.
  EXPECT_EQ(served_by(conn), g.replica_port());
  EXPECT_EQ(loads(g.replica_port()), replicated_loads);
  EXPECT_GE(conn.statistics().connection_losses, 1u);
  // The semaphore works again, its wake-up connection included (found through the sentinels as well).
  std::optional<admit::redis::semaphore_result> lease;
  ASSERT_TRUE(eventually(
      [&] {
        lease.emplace(sem.try_acquire_for(1s));
        return static_cast<bool>(*lease);
      },
      std::chrono::seconds(30)))
      << lease->error().message();
  auto waiter = std::async(std::launch::async, [&] { return sem.try_acquire_for(30s, 2); });
  EXPECT_EQ((*lease)->release().first, admit::redis::lease::release_status::released);
  auto both = waiter.get();
  EXPECT_TRUE(both) << both.error().message();
}

TEST(RedisSentinelFailover, PromotedReplicaThatMissedWritesIsReportedAsLostState) {
  redis_sentinel_group g;
  g.wait_until_ready_for_failover();
  io_thread io;
  connection conn(io.executor(), g.url());
  std::atomic<int> lost{0};
  limiter_options o = admit::redis::testing::patient();
  o.detect_lost_state = true;
  o.breaker.failure_threshold = 0;
  o.on_event = [&](const admit::redis::limiter_event& e) {
    if (e.kind == admit::redis::limiter_event_kind::lost_state) ++lost;
  };
  admit::redis::gcra limiter(conn, "lost", admit::rate::per_second(1), 100, o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.decide("k").decision.admitted);
  // The replica has everything so far...
  const auto seq = [&](std::uint16_t port) {
    return redis_sentinel_group::admin(port, {"HGET", limiter.epoch_key(), "seq"});
  };
  ASSERT_TRUE(eventually([&] { return seq(g.replica_port()) == seq(g.master_port()); }));
  // ...and not the next admissions.
  g.hold_replication(true);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(limiter.decide("k").decision.admitted);
  ASSERT_NE(seq(g.replica_port()), seq(g.master_port()));
  g.kill_master();
  g.wait_for_failover();
  ASSERT_TRUE(eventually([&] { return limiter.decide("k").consulted; }, std::chrono::seconds(60)));
  EXPECT_EQ(lost.load(), 1);
  EXPECT_EQ(limiter.statistics().lost_state, 1u);
}

}  // namespace
