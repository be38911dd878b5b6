// tests/redis/redis_sentinel.hpp — a private Redis Sentinel deployment for one test: a master, one replica and three
// sentinels (quorum 2, down-after-milliseconds 1000, failover-timeout 2000), all redis-server processes on free
// loopback ports (the sentinels run as `redis-server <conf> --sentinel`), persistence off, killed in the destructor.
// The replica replicates through a tcp_proxy, so that a test can withhold the replication stream
// (hold_replication) and promote a replica that lacks the master's latest writes.
//
//   redis_sentinel_group g;                         // everything answers PING; each sentinel names the master
//   g.wait_until_ready_for_failover();              // the sentinels know each other and the replica
//   g.kill_master();  g.wait_for_failover();        // the replica is the master, for every sentinel
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admin_command.hpp"
#include "tcp_proxy.hpp"

namespace admit::redis::testing {

class redis_sentinel_group {
 public:
  static constexpr std::size_t sentinel_count = 3;
  using clock = std::chrono::steady_clock;

  explicit redis_sentinel_group(std::string master_name = "admit-master") : name_(std::move(master_name)) {
    char dir_template[] = "/tmp/admit-sentinel-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir_template;
    try {
      master_ = start_server("master", {});
      proxy_ = std::make_unique<tcp_proxy>(master_.port);
      replica_ = start_server("replica", {"--replicaof", "127.0.0.1", std::to_string(proxy_->port())});
      wait_until("the replica's link to the master is up", std::chrono::seconds(30), [&] {
        return admin(replica_.port, {"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
      });
      for (std::size_t i = 0; i < sentinel_count; ++i) sentinels_[i] = start_sentinel(i);
    } catch (...) {
      stop();
      throw;
    }
  }

  ~redis_sentinel_group() {
    stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  redis_sentinel_group(const redis_sentinel_group&) = delete;
  redis_sentinel_group& operator=(const redis_sentinel_group&) = delete;

  const std::string& master_name() const { return name_; }
  std::uint16_t master_port() const { return master_.port; }
  std::uint16_t replica_port() const { return replica_.port; }
  std::uint16_t sentinel_port(std::size_t i) const { return sentinels_.at(i).port; }
  // redis+sentinel://127.0.0.1:<s0>,127.0.0.1:<s1>,127.0.0.1:<s2>/<name>[/db]
  std::string url(int db = 0) const {
    std::string u = "redis+sentinel://";
    for (std::size_t i = 0; i < sentinel_count; ++i) {
      u += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(sentinels_[i].port);
    }
    return u + "/" + name_ + (db == 0 ? "" : "/" + std::to_string(db));
  }

  // Runs one command on the process at `port` over a fresh blocking connection; the reply as text (integers in
  // decimal, nil as "(nil)", arrays joined by newlines, errors prefixed with '-'). Throws on I/O errors.
  static std::string admin(std::uint16_t port, const std::vector<std::string>& args) {
    redisContext* c = connect_once(port);
    if (c == nullptr) throw std::runtime_error("admin: cannot connect to port " + std::to_string(port));
    std::string out;
    try {
      out = admin_command(c, args);
    } catch (...) {
      redisFree(c);
      throw;
    }
    redisFree(c);
    return out;
  }

  // The port sentinel i names as the master ("host\nport" → port), or 0 if it names none.
  std::uint16_t named_master(std::size_t i) const {
    const std::string s = admin(sentinel_port(i), {"SENTINEL", "get-master-addr-by-name", name_});
    const auto nl = s.find('\n');
    return nl == std::string::npos ? 0 : static_cast<std::uint16_t>(std::atoi(s.c_str() + nl + 1));
  }

  // Each sentinel knows the replica and the two other sentinels (they learn them from the master's INFO and its
  // hello channel, every 2 s or so): only then can they agree on a failover. Bounded to 60 s.
  void wait_until_ready_for_failover() {
    wait_until("the sentinels know the replica and each other", std::chrono::seconds(60), [&] {
      for (std::size_t i = 0; i < sentinel_count; ++i) {
        const std::string m = admin(sentinel_port(i), {"SENTINEL", "master", name_});
        if (field(m, "num-slaves") != "1" || field(m, "num-other-sentinels") != "2") return false;
      }
      return true;
    });
  }

  // SIGKILL the master (no goodbye to anyone).
  void kill_master() { kill(master_); }
  // SIGKILL sentinel i.
  void kill_sentinel(std::size_t i) { kill(sentinels_.at(i)); }
  // While set, the replica receives nothing more from the master (the proxy drops the replication stream; the link
  // stays up), so writes made meanwhile never reach it.
  void hold_replication(bool hold) { proxy_->drop_replies(hold); }

  // Waits until the replica says ROLE master and every live sentinel names it; returns when that was first seen.
  // Throws if that takes more than `bound`.
  clock::time_point wait_for_failover(std::chrono::seconds bound = std::chrono::seconds(60)) {
    wait_until("the failover to the replica", bound, [&] {
      if (admin(replica_.port, {"ROLE"}).rfind("master", 0) != 0) return false;
      for (std::size_t i = 0; i < sentinel_count; ++i) {
        if (sentinels_[i].pid > 0 && named_master(i) != replica_.port) return false;
      }
      return true;
    });
    return clock::now();
  }

 private:
  struct process {
    std::uint16_t port = 0;
    pid_t pid = -1;
  };

  template <class Pred>
  static void wait_until(const std::string& what, std::chrono::seconds bound, Pred pred) {
    const auto end = clock::now() + bound;
    for (;;) {
      try {
        if (pred()) return;
      } catch (const std::runtime_error&) {
        // not up yet
      }
      if (clock::now() > end) {
        throw std::runtime_error("redis_sentinel_group: no " + what + " within " + std::to_string(bound.count()) +
                                 " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // The value of `name` in a flat "name\nvalue\n..." reply (SENTINEL master), or "".
  static std::string field(const std::string& reply, const std::string& name) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    for (;;) {
      const auto nl = reply.find('\n', start);
      lines.push_back(reply.substr(start, nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    for (std::size_t i = 0; i + 1 < lines.size(); i += 2) {
      if (lines[i] == name) return lines[i + 1];
    }
    return "";
  }

  std::uint16_t free_port() {
    for (;;) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = 0;
      socklen_t len = sizeof addr;
      if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("free_port: bind failed");
      }
      ::close(fd);
      const std::uint16_t p = ntohs(addr.sin_port);
      if (taken_.insert(p).second) return p;
    }
  }

  static const char* server_binary() {
    if (const char* e = std::getenv("REDIS_SERVER")) return e;
#ifdef ADMIT_REDIS_SERVER
    return ADMIT_REDIS_SERVER;
#else
    return "redis-server";
#endif
  }

  static redisContext* connect_once(std::uint16_t port) {
    timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == nullptr) return nullptr;
    if (c->err != 0) {
      redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, timeval{10, 0});
    return c;
  }

  static pid_t spawn(std::vector<std::string> args, const std::string& output) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      // Not the test's output: a process orphaned by a crashed test would hold ctest's pipe open.
      const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Starts a process made by `args_for(port)` and waits until it answers PING (retrying on another port if it exits:
  // a port taken meanwhile).
  template <class Args>
  process start(const std::string& what, Args args_for) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      process p;
      p.port = free_port();
      const std::string tag = what + "-" + std::to_string(p.port);
      p.pid = spawn(args_for(p.port, tag), dir_ + "/" + tag + ".out");
      bool up = false;
      for (int k = 0; k < 1000 && !up; ++k) {
        int status = 0;
        if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
          p.pid = -1;
          break;
        }
        if (redisContext* c = connect_once(p.port)) {
          up = answered_by(c, p.pid);
          redisFree(c);
        }
        if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (up) return p;
      kill(p);
    }
    throw std::runtime_error("redis_sentinel_group: could not start the " + what);
  }

  process start_server(const std::string& what, std::vector<std::string> extra) {
    return start(what, [&](std::uint16_t port, const std::string& tag) {
      std::vector<std::string> args = {
          server_binary(),          "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
          "--appendonly",           "no",     "--daemonize",        "no",     "--dir",     dir_,     "--logfile",
          dir_ + "/" + tag + ".log"};
      // A replica's first sync at once (not after the 5 s a diskless sync waits for more replicas by default).
      args.insert(args.end(), {"--repl-diskless-sync-delay", "0"});
      args.insert(args.end(), extra.begin(), extra.end());
      return args;
    });
  }

  process start_sentinel(std::size_t i) {
    return start("sentinel" + std::to_string(i), [&](std::uint16_t port, const std::string& tag) {
      // A sentinel rewrites its configuration file: each one has its own, written afresh.
      const std::string conf = dir_ + "/" + tag + ".conf";
      std::ofstream out(conf, std::ios::trunc);
      out << "port " << port << "\nbind 127.0.0.1\ndaemonize no\n"
          << "dir \"" << dir_ << "\"\nlogfile \"" << dir_ << "/" << tag << ".log\"\n"
          << "sentinel monitor " << name_ << " 127.0.0.1 " << master_.port << " 2\n"
          << "sentinel down-after-milliseconds " << name_ << " 1000\n"
          << "sentinel failover-timeout " << name_ << " 2000\n";
      out.close();
      return std::vector<std::string>{server_binary(), conf, "--sentinel"};
    });
  }

  static void kill(process& p) {
    if (p.pid <= 0) return;
    ::kill(p.pid, SIGKILL);
    ::waitpid(p.pid, nullptr, 0);
    p.pid = -1;
  }

  void stop() {
    for (auto& s : sentinels_) kill(s);
    kill(replica_);
    kill(master_);
    proxy_.reset();
  }

  std::string name_;
  std::string dir_;
  std::set<std::uint16_t> taken_;
  process master_, replica_;
  std::array<process, sentinel_count> sentinels_{};
  std::unique_ptr<tcp_proxy> proxy_;
};

}  // namespace admit::redis::testing
