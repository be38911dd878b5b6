// admit/redis/client/script.hpp — a Lua script called by its SHA1 (EVALSHA), loaded on demand: on an explicit NOSCRIPT
// reply, and only then, the script is loaded (SCRIPT LOAD) and the call retried once.
//
//   static const admit::redis::script incr_by("return redis.call('INCRBY', KEYS[1], ARGV[1])");
//   auto r = admit::redis::evalsha(conn, incr_by, {"counter"}, {"5"});   // r.value.integer() == 5 the first time
//
// Why only on NOSCRIPT: a timeout or a lost connection leaves it unknown whether the script ran; retrying could run
// it twice. Those errors are returned as they are. The whole call (EVALSHA, SCRIPT LOAD, EVALSHA) shares one deadline.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "admit/redis/client/client.hpp"
#include "admit/redis/client/command.hpp"
#include "admit/redis/client/detail/sha1.hpp"
#include "admit/redis/client/reply.hpp"

namespace admit::redis {

class script {
 public:
  // Computes the SHA1 (as Redis does) of the source. Immutable afterwards; thread-safe to share.
  explicit script(std::string source) : source_(std::move(source)), sha1_(detail::sha1_hex(source_)) {}

  const std::string& source() const noexcept { return source_; }
  // 40 lower-case hex digits, the name EVALSHA takes and SCRIPT LOAD returns.
  const std::string& sha1() const noexcept { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
};

namespace detail {

inline command evalsha_command(const script& s, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args) {
  command c{"EVALSHA", s.sha1()};
  c.arg(keys.size());
  for (const auto& k : keys) c.arg(k);
  for (const auto& a : args) c.arg(a);
  return c;
}

// EVALSHA, and on NOSCRIPT: SCRIPT LOAD and EVALSHA again, as one composed operation on `conn` (a client, or a
// client_link for work that may outlive the client).
template <class Client>
struct evalsha_op {
  Client* conn;
  const script* s;
  command cmd;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int step = 0;

  template <class Self>
  void operator()(Self& self, boost::system::error_code ec = {}, reply r = {}) {
    switch (step) {
      case 0:
        step = 1;
        conn->async_execute_command(deadline, cmd, std::move(self));
        return;
      case 1:
        if (ec || !r.is_error("NOSCRIPT")) return self.complete(ec, std::move(r));
        step = 2;
        conn->async_execute_command(deadline, command{"SCRIPT", "LOAD", s->source()}, std::move(self));
        return;
      case 2:
        if (ec || r.is_error()) return self.complete(ec, std::move(r));
        step = 3;
        conn->async_execute_command(deadline, std::move(cmd), std::move(self));
        return;
      default:
        self.complete(ec, std::move(r));
    }
  }
};
template <class Client>
evalsha_op(Client*, const script*, command, std::optional<std::chrono::steady_clock::time_point>) -> evalsha_op<Client>;

}  // namespace detail

// Asynchronous EVALSHA with the client's default deadline for the whole call. Completion: void(error_code,
// reply), as connection::async_execute. `s` must outlive the operation (scripts are usually static). Cancellation:
// terminal, through the handler's slot (forwarded to the current step).
template <class CompletionToken>
auto async_evalsha(client& conn, const script& s, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args, CompletionToken&& token) {
  return boost::asio::async_compose<CompletionToken, void(boost::system::error_code, reply)>(
      detail::evalsha_op{&conn, &s, detail::evalsha_command(s, keys, args), conn.default_deadline()}, token,
      conn.get_executor());
}

// Blocking EVALSHA `cmd` (an EVALSHA of `s`, as detail::evalsha_command builds it) until `deadline` (std::nullopt:
// none) for the whole call; see the top of the file.
inline result evalsha_until(client& conn, std::optional<std::chrono::steady_clock::time_point> deadline,
                            const script& s, const command& cmd) {
  result r = conn.execute_command(deadline, cmd);
  if (r.error || !r.value.is_error("NOSCRIPT")) return r;
  result loaded = conn.execute_command(deadline, command{"SCRIPT", "LOAD", s.source()});
  if (loaded.error || loaded.value.is_error()) return loaded;
  return conn.execute_command(deadline, cmd);
}

// Blocking EVALSHA until `deadline` (std::nullopt: none) for the whole call; see the top of the file.
inline result evalsha_until(client& conn, std::optional<std::chrono::steady_clock::time_point> deadline,
                            const script& s, const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) {
  return evalsha_until(conn, deadline, s, detail::evalsha_command(s, keys, args));
}

// Blocking EVALSHA with the client's default deadline.
inline result evalsha(client& conn, const script& s, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args) {
  return evalsha_until(conn, conn.default_deadline(), s, keys, args);
}

}  // namespace admit::redis
