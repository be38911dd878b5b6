// tests/redis/redis_cluster.hpp — a private 3-master Redis Cluster for one test: three redis-server processes with
// --cluster-enabled yes on free loopback ports (client and bus ports both chosen free), persistence off, joined by
// `redis-cli --cluster create ... --cluster-replicas 0`, ready once every node reports cluster_state:ok. Killed in
// the destructor. admin(i, ...) runs a command on node i over a separate blocking hiredis connection.
// With TLS files, each node also listens for TLS on a second port (tls_port(i)) and its cluster bus is TLS
// (--tls-cluster yes, the nodes authenticated by the client certificate), as managed Redis Clusters run: CLUSTER SLOTS
// then names the TLS ports to TLS clients. The plain ports stay for admin() and redis-cli.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admin_command.hpp"

namespace admit::redis::testing {

class redis_cluster {
 public:
  static constexpr std::size_t size = 3;

  // The certificates of a TLS cluster (all files PEM): the nodes' certificate and key, a client certificate and key
  // (for the cluster bus, where each node is the other's client) and the CA that signed both.
  struct tls_files {
    std::string cert, key, client_cert, client_key, ca;
  };

  redis_cluster() : redis_cluster(tls_files{}) {}
  explicit redis_cluster(tls_files tls) : tls_(std::move(tls)) {
    char dir_template[] = "/tmp/admit-cluster-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir_template;
    try {
      for (std::size_t i = 0; i < size; ++i) start_node(i);
      create();
      wait_until_ok();
    } catch (...) {
      stop();
      throw;
    }
  }

  ~redis_cluster() {
    stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  std::uint16_t port(std::size_t i) const { return nodes_.at(i).port; }
  std::uint16_t tls_port(std::size_t i) const { return nodes_.at(i).tls_port; }
  // rediss://127.0.0.1:<tls port of node i>, `query` (e.g. "ca_file=...") appended after '?' when not empty.
  std::string tls_url(std::size_t i, const std::string& query = {}) const {
    return "rediss://127.0.0.1:" + std::to_string(tls_port(i)) + (query.empty() ? "" : "?" + query);
  }
  std::string url(std::size_t i = 0) const { return "redis://127.0.0.1:" + std::to_string(port(i)); }
  std::string address(std::size_t i) const { return "127.0.0.1:" + std::to_string(port(i)); }
  std::string id(std::size_t i) const { return admin(i, {"CLUSTER", "MYID"}); }

  // Runs one command on node i over a fresh blocking connection; the reply as text (integers in decimal, arrays
  // joined by newlines, errors prefixed with '-'). Throws on I/O errors.
  std::string admin(std::size_t i, const std::vector<std::string>& args) const {
    redisContext* c = connect_once(port(i));
    if (c == nullptr) throw std::runtime_error("admin: cannot connect to node " + std::to_string(i));
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

  // SIGKILLs node i: its slots cannot be reached (connection refused) until the others mark it failed, after the
  // node timeout (5 s), and the cluster answers CLUSTERDOWN (no replica takes over).
  void kill(std::size_t i) {
    node& n = nodes_.at(i);
    if (n.pid <= 0) return;
    ::kill(n.pid, SIGKILL);
    ::waitpid(n.pid, nullptr, 0);
    n.pid = -1;
  }

  // The node that serves `key` (the one that answers a GET without -MOVED), or size if none does.
  std::size_t owner_of(const std::string& key) const {
    for (std::size_t i = 0; i < size; ++i) {
      if (admin(i, {"GET", key}).rfind("-MOVED", 0) != 0) return i;
    }
    return size;
  }

  // Moves every key of hash slot `slot` from master `source` to master `target` by MIGRATE, until none is left on the
  // source (the slot set MIGRATING and IMPORTING first); the reply that stopped it when a MIGRATE failed, else "OK".
  std::string migrate_keys(const std::string& slot, std::size_t source, std::size_t target) const {
    for (;;) {
      const std::string keys = admin(source, {"CLUSTER", "GETKEYSINSLOT", slot, "100"});
      if (keys.empty()) return "OK";
      std::vector<std::string> migrate{"MIGRATE", "127.0.0.1", std::to_string(port(target)), "", "0", "5000", "KEYS"};
      for (std::size_t at = 0; at <= keys.size();) {
        const auto nl = std::min(keys.find('\n', at), keys.size());
        migrate.push_back(keys.substr(at, nl - at));
        at = nl + 1;
      }
      if (const std::string r = admin(source, migrate); r != "OK") return r;
    }
  }

  // The number of calls of `command` (lower case, e.g. "script|load") in node i's INFO commandstats.
  // Node i's calls of admit's scripts, FCALL or EVALSHA (redis_server::script_calls).
  long long script_calls(std::size_t i) const { return calls(i, "fcall") + calls(i, "evalsha"); }
  long long calls(std::size_t i, const std::string& command) const {
    const std::string info = admin(i, {"INFO", "commandstats"});
    const std::string key = "cmdstat_" + command + ":calls=";
    const auto at = info.find(key);
    if (at == std::string::npos) return 0;
    return std::atoll(info.c_str() + at + key.size());
  }

 private:
  struct node {
    std::uint16_t port = 0;
    std::uint16_t bus_port = 0;
    std::uint16_t tls_port = 0;  // 0: no TLS
    pid_t pid = -1;
  };

  static std::uint16_t free_port(std::set<std::uint16_t>& taken) {
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
      if (taken.insert(p).second) return p;
    }
  }

  static const char* binary(const char* env, const char* fallback) {
    if (const char* e = std::getenv(env)) return e;
    return fallback;
  }
  static const char* server_binary() {
#ifdef ADMIT_REDIS_SERVER
    return binary("REDIS_SERVER", ADMIT_REDIS_SERVER);
#else
    return binary("REDIS_SERVER", "redis-server");
#endif
  }
  static const char* cli_binary() {
#ifdef ADMIT_REDIS_CLI
    return binary("REDIS_CLI", ADMIT_REDIS_CLI);
#else
    return binary("REDIS_CLI", "redis-cli");
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

  void start_node(std::size_t i) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      node n;
      n.port = free_port(taken_);
      n.bus_port = free_port(taken_);
      const std::string p = std::to_string(n.port);
      std::vector<std::string> tls;
      if (!tls_.cert.empty()) {
        n.tls_port = free_port(taken_);
        tls = {"--tls-port",
               std::to_string(n.tls_port),
               "--tls-cluster",
               "yes",
               "--tls-cert-file",
               tls_.cert,
               "--tls-key-file",
               tls_.key,
               "--tls-client-cert-file",
               tls_.client_cert,
               "--tls-client-key-file",
               tls_.client_key,
               "--tls-ca-cert-file",
               tls_.ca,
               "--tls-auth-clients",
               "no"};
      }
      std::vector<std::string> args{server_binary(),
                                    "--port",
                                    p,
                                    "--cluster-port",
                                    std::to_string(n.bus_port),
                                    "--bind",
                                    "127.0.0.1",
                                    "--cluster-enabled",
                                    "yes",
                                    "--cluster-config-file",
                                    dir_ + "/nodes-" + p + ".conf",
                                    "--cluster-node-timeout",
                                    "5000",
                                    "--save",
                                    "",
                                    "--appendonly",
                                    "no",
                                    "--daemonize",
                                    "no",
                                    "--dir",
                                    dir_,
                                    "--logfile",
                                    dir_ + "/" + p + ".log"};
      args.insert(args.end(), tls.begin(), tls.end());
      n.pid = spawn(args, dir_ + "/" + p + ".out");
      // Wait until it answers PING (or exits: a port taken).
      bool up = false;
      for (int k = 0; k < 1000 && !up; ++k) {
        int status = 0;
        if (::waitpid(n.pid, &status, WNOHANG) == n.pid) {
          n.pid = -1;
          break;
        }
        if (redisContext* c = connect_once(n.port)) {
          up = answered_by(c, n.pid);
          redisFree(c);
        }
        if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (up) {
        nodes_.push_back(n);
        return;
      }
      if (n.pid > 0) {
        ::kill(n.pid, SIGKILL);
        ::waitpid(n.pid, nullptr, 0);
      }
    }
    throw std::runtime_error("could not start cluster node " + std::to_string(i));
  }

  // redis-cli --cluster create, bounded to 60 s.
  void create() {
    std::vector<std::string> args{cli_binary(), "--cluster", "create"};
    for (std::size_t i = 0; i < size; ++i) args.push_back(address(i));
    args.insert(args.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    const pid_t pid = spawn(args, dir_ + "/create.out");
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) != pid) {
      if (std::chrono::steady_clock::now() > end) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        throw std::runtime_error("redis-cli --cluster create did not finish in 60 s (see " + dir_ + "/create.out)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error("redis-cli --cluster create failed (is redis-cli installed? see " + dir_ +
                               "/create.out)");
    }
  }

  // Every node sees the whole map: cluster_state:ok everywhere, bounded to 30 s.
  void wait_until_ok() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      bool ok = true;
      for (std::size_t i = 0; i < size && ok; ++i) {
        ok = admin(i, {"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
      }
      if (ok) return;
      if (std::chrono::steady_clock::now() > end) throw std::runtime_error("cluster_state never became ok");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void stop() {
    for (auto& n : nodes_) {
      if (n.pid <= 0) continue;
      ::kill(n.pid, SIGKILL);
      ::waitpid(n.pid, nullptr, 0);
      n.pid = -1;
    }
  }

  tls_files tls_;
  std::string dir_;
  std::set<std::uint16_t> taken_;
  std::vector<node> nodes_;
};

}  // namespace admit::redis::testing
