// tests/redis/support/admin_command.hpp — one command on a blocking hiredis connection, its reply as text: how the test
// servers (redis_server.hpp, redis_cluster.hpp, redis_sentinel.hpp) administer the redis-server processes they start,
// apart from the client under test.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace admit::redis::testing {

// A reply as text: an integer in decimal, nil as "(nil)", an error with a leading "-", an array's elements one per
// line, a string or status as it is.
inline std::string reply_text(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ERROR:
      return "-" + std::string(r->str, r->len);
    case REDIS_REPLY_ARRAY: {
      std::string s;
      for (std::size_t i = 0; i < r->elements; ++i) s += (i == 0 ? "" : "\n") + reply_text(r->element[i]);
      return s;
    }
    default:
      return std::string(r->str, r->len);
  }
}

// Runs `args` on `c` and returns the reply as text; throws std::runtime_error when the connection fails.
inline std::string admin_command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (r == nullptr) throw std::runtime_error("admin: I/O error");
  std::string s = reply_text(r);
  freeReplyObject(r);
  return s;
}

// Whether the Redis process `pid` answers on `c`: PING, and INFO server's process_id. A port that was free when it
// was chosen may be another test's by now (a server's, or a cluster bus, which closes the connection): that is not
// this process answering, and neither is an I/O error. The process then fails to bind and exits, and its starter
// picks another port.
inline bool answered_by(redisContext* c, pid_t pid) {
  try {
    if (admin_command(c, {"PING"}) != "PONG") return false;
    return admin_command(c, {"INFO", "server"}).find("process_id:" + std::to_string(pid) + "\r\n") != std::string::npos;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace admit::redis::testing
