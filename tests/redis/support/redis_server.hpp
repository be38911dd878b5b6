// tests/redis/redis_server.hpp — a private redis-server for one test: a free loopback port (and a unix socket in a
// temporary directory), persistence off, started in the constructor, killed in the destructor. It can be killed,
// restarted on the same port, and paused (CLIENT PAUSE) for fault tests; admin() runs a command on a separate
// blocking hiredis connection (on the plain port). With config::tls_cert_file set it also listens for TLS on
// tls_port() (Debian's redis-server is built with TLS; tls_certificates.hpp makes the files).
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
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "admin_command.hpp"

namespace admit::redis::testing {

class redis_server {
 public:
  struct config {
    std::string requirepass;  // empty: no password
    // TLS on a second port (tls_port()) when tls_cert_file is not empty: the server's certificate and key, the CA it
    // trusts for client certificates, and whether it requires one (--tls-auth-clients).
    std::string tls_cert_file{};
    std::string tls_key_file{};
    std::string tls_ca_file{};
    bool tls_auth_clients = false;
    // More arguments for redis-server ("--rename-command", "FCALL", "": a server without the command).
    std::vector<std::string> extra_arguments{};
  };

  redis_server() : redis_server(config{}) {}
  explicit redis_server(config c) : config_(std::move(c)) {
    char dir_template[] = "/tmp/admit-redis-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir_template;
    for (int attempt = 0; attempt < 20; ++attempt) {
      port_ = free_port();
      if (!config_.tls_cert_file.empty()) {
        do {
          tls_port_ = free_port();
        } while (tls_port_ == port_);
      }
      if (try_start()) return;
    }
    throw std::runtime_error("could not start redis-server");
  }

  ~redis_server() {
    kill();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  std::uint16_t port() const { return port_; }
  std::uint16_t tls_port() const { return tls_port_; }  // 0 without TLS
  // rediss://127.0.0.1:<tls_port>/<db>?<query> (query: TLS parameters, see connection_options).
  std::string tls_url(const std::string& query, int db = 0) const {
    return "rediss://127.0.0.1:" + std::to_string(tls_port_) + "/" + std::to_string(db) +
           (query.empty() ? "" : "?" + query);
  }
  std::string unix_path() const { return dir_ + "/redis.sock"; }
  const std::string& password() const { return config_.requirepass; }
  std::string url(int db = 0) const {
    std::string auth = config_.requirepass.empty() ? "" : ":" + config_.requirepass + "@";
    return "redis://" + auth + "127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
  }

  // SIGKILL and reap (no-op if not running).
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // Starts again on the same port (after kill()).
  void start() {
    for (int attempt = 0; attempt < 50; ++attempt) {
      if (try_start()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the port may linger briefly
    }
    throw std::runtime_error("could not restart redis-server on port " + std::to_string(port_));
  }

  void restart() {
    kill();
    start();
  }

  // CLIENT PAUSE for `ms` milliseconds: every client's commands wait (the server keeps accepting and reading).
  void pause(std::chrono::milliseconds ms) { admin({"CLIENT", "PAUSE", std::to_string(ms.count()), "ALL"}); }
  void unpause() { admin({"CLIENT", "UNPAUSE"}); }
  // The server's process stopped (SIGSTOP) and continued (SIGCONT). Unlike pause(), which holds what clients sent in
  // Redis and drops it with a client that disconnects, what clients send meanwhile waits in the kernel's socket
  // buffers, and Redis reads and runs it once continued — the commands of a client gone since included.
  void freeze() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void thaw() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

  // Runs one command on a fresh blocking connection; the reply as text (integers in decimal, arrays joined by
  // newlines, errors prefixed with '-'). Throws on I/O errors.
  std::string admin(const std::vector<std::string>& args, int db = 0) const {
    redisContext* c = connect_once();
    if (c == nullptr) throw std::runtime_error("admin: cannot connect to redis");
    std::string out;
    if (db != 0) admin_command(c, {"SELECT", std::to_string(db)});
    out = admin_command(c, args);
    redisFree(c);
    return out;
  }

  // The keys matching `pattern` (KEYS), sorted.
  std::vector<std::string> keys(const std::string& pattern = "*") const {
    std::vector<std::string> out;
    std::istringstream in(admin({"KEYS", pattern}));
    for (std::string k; std::getline(in, k);) {
      if (!k.empty()) out.push_back(k);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // The number of calls of `command` (lower case, e.g. "script|load", "evalsha") in INFO commandstats.
  long long calls(const std::string& command) const {
    const std::string info = admin({"INFO", "commandstats"});
    const std::string key = "cmdstat_" + command + ":calls=";
    const auto at = info.find(key);
    if (at == std::string::npos) return 0;
    return std::atoll(info.c_str() + at + key.size());
  }
  // Calls of admit's scripts, by either form: FCALL of a function library, or EVALSHA (Redis older than 7.0, an ACL
  // user without FCALL, or a plain script).
  long long script_calls() const { return calls("fcall") + calls("evalsha"); }
  // The calls of every command in INFO commandstats (scripts' own calls included), the INFO calls excluded.
  long long calls() const {
    std::istringstream in(admin({"INFO", "commandstats"}));
    long long total = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("cmdstat_", 0) != 0 || line.rfind("cmdstat_info:", 0) == 0) continue;
      const auto at = line.find("calls=");
      if (at != std::string::npos) total += std::atoll(line.c_str() + at + 6);
    }
    return total;
  }

 private:
  static std::uint16_t free_port() {
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
    return ntohs(addr.sin_port);
  }

  static const char* server_binary() {
    if (const char* env = std::getenv("REDIS_SERVER")) return env;
#ifdef ADMIT_REDIS_SERVER
    return ADMIT_REDIS_SERVER;
#else
    return "redis-server";
#endif
  }

  redisContext* connect_once() const {
    timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c == nullptr) return nullptr;
    if (c->err != 0) {
      redisFree(c);
      return nullptr;
    }
    bool authenticated = config_.requirepass.empty();
    try {
      authenticated = authenticated || admin_command(c, {"AUTH", config_.requirepass}) == "OK";
    } catch (const std::runtime_error&) {  // not a Redis server on this port (see answered_by)
    }
    if (!authenticated) {
      redisFree(c);
      return nullptr;
    }
    return c;
  }

  bool try_start() {
    std::vector<std::string> args = {server_binary(),
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--daemonize",
                                     "no",
                                     "--dir",
                                     dir_,
                                     "--logfile",
                                     dir_ + "/redis.log",
                                     "--unixsocket",
                                     unix_path(),
                                     "--unixsocketperm",
                                     "700"};
    if (!config_.requirepass.empty()) {
      args.push_back("--requirepass");
      args.push_back(config_.requirepass);
    }
    if (!config_.tls_cert_file.empty()) {
      const std::vector<std::string> tls = {"--tls-port",         std::to_string(tls_port_),
                                            "--tls-cert-file",    config_.tls_cert_file,
                                            "--tls-key-file",     config_.tls_key_file,
                                            "--tls-ca-cert-file", config_.tls_ca_file,
                                            "--tls-auth-clients", config_.tls_auth_clients ? "yes" : "no"};
      args.insert(args.end(), tls.begin(), tls.end());
    }
    args.insert(args.end(), config_.extra_arguments.begin(), config_.extra_arguments.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      // Not the test's output: a server orphaned by a crashed test would hold ctest's pipe open (it logs to a file).
      const int null = ::open("/dev/null", O_RDWR);
      if (null >= 0) {
        ::dup2(null, 1);
        ::dup2(null, 2);
      }
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    // Wait until it answers PING (or exits: port taken).
    for (int i = 0; i < 500; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (redisContext* c = connect_once()) {
        const bool up = answered_by(c, pid_);
        redisFree(c);
        if (up) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill();
    return false;
  }

  config config_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace admit::redis::testing
