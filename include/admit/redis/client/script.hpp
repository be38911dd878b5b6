// admit/redis/client/script.hpp — a Lua script called by its SHA1 (EVALSHA), loaded on demand: on an explicit NOSCRIPT
// reply, and only then, the script is loaded (SCRIPT LOAD) and the call retried once.
//
//   static const admit::redis::script incr_by("return redis.call('INCRBY', KEYS[1], ARGV[1])");
//   auto r = admit::redis::evalsha(conn, incr_by, {"counter"}, {"5"});   // r.value.integer() == 5 the first time
//
// A script made by script::library is also a Redis Functions library (Redis 7.0 and later): its calls are FCALLs of
// the library's one function, whose helpers Redis makes once, when the library is loaded (FUNCTION LOAD REPLACE, on
// an explicit "Function not found" only — on every master of a Redis Cluster, so also on one promoted by a failover),
// instead of at every call. On a server that answers FCALL with "unknown command" (older than 7.0), or that refuses
// FCALL or FUNCTION LOAD (NOPERM: an ACL user without them), the call falls back to EVALSHA of the same code, and
// every later call of that script object goes straight to EVALSHA. A FUNCTION LOAD that fails otherwise (a cluster
// master that does not answer, a server out of memory) sends that one call by EVALSHA.
//
// Why only on NOSCRIPT / "Function not found": a timeout or a lost connection leaves it unknown whether the script ran;
// retrying could run it twice. Those errors are returned as they are. The whole call (EVALSHA, SCRIPT LOAD, EVALSHA)
// shares one deadline.
#pragma once

#include <atomic>
#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

  // Code that is a script and a function library at once: `body` defines (as a local) `call(KEYS, ARGV)`, which runs
  // one call and returns its reply, and makes no Redis call at its top level. The script is `body` followed by
  // `return call(KEYS, ARGV)`; the library, named as its function, "<prefix>_<the script's SHA1's first 16 digits>",
  // registers `call` as that function. A new version of the code is a new library: processes of two versions share a
  // server (a rolling upgrade) without replacing each other's code. The libraries of old versions stay until a
  // FUNCTION DELETE or FLUSH removes them (a few kilobytes each).
  static script library(std::string_view prefix, std::string_view body) {
    script s(script_text(body));
    s.function_ = std::string(prefix) + "_" + s.sha1_.substr(0, 16);
    s.library_source_ =
        "#!lua name=" + s.function_ + "\n" + std::string(body) + "\nredis.register_function('" + s.function_;
    s.library_source_ += registration_tail;
    s.functions_refused_ = std::make_shared<std::atomic<bool>>(false);
    return s;
  }

  // Several codes as library() makes them, one Redis Functions library: `parts` are (prefix, body) pairs, each body as
  // library()'s. The library, "<name>_<H>", registers each body's `call` as the function "<prefix>_<H>", where H is
  // the first 16 hex digits of the SHA1 of the library's code (after its first line, H left out): one FUNCTION LOAD
  // brings every function, and a new version of any part is a new library whose functions are all named anew (function
  // names are unique on a server). Each body runs in a block of its own, so its top-level locals are its own. The
  // scripts returned (in the order of `parts`) share the library's code and whether a server refused functions: the
  // first refusal sends every one of them by EVALSHA from then on.
  static std::vector<script> libraries(std::string_view name,
                                       const std::vector<std::pair<std::string_view, std::string_view>>& parts) {
    std::string code;
    std::vector<std::size_t> names;  // where each function's H goes
    for (const auto& [prefix, body] : parts) {
      code += "do\n";
      code += body;
      code += "\nredis.register_function('";
      code += prefix;
      code += '_';
      names.push_back(code.size());
      code += registration_tail;
      code += "end\n";
    }
    // The functions' names carry H, computed over the code without it.
    const std::string h = detail::sha1_hex(code).substr(0, 16);
    for (auto at = names.rbegin(); at != names.rend(); ++at) code.insert(*at, h);
    const std::string library = "#!lua name=" + std::string(name) + "_" + h + "\n" + code;
    const auto refused = std::make_shared<std::atomic<bool>>(false);
    std::vector<script> out;
    for (const auto& [prefix, body] : parts) {
      script s(script_text(body));
      s.function_ = std::string(prefix) + "_" + h;
      s.library_source_ = library;
      s.functions_refused_ = refused;
      out.push_back(std::move(s));
    }
    return out;
  }

  const std::string& source() const noexcept { return source_; }
  // 40 lower-case hex digits, the name EVALSHA takes and SCRIPT LOAD returns.
  const std::string& sha1() const noexcept { return sha1_; }
  // A library (made by library()): its function's name, and the library's code; empty otherwise.
  const std::string& function_name() const noexcept { return function_; }
  const std::string& library_source() const noexcept { return library_source_; }
  // Whether calls go by FCALL: a library that no server has refused yet.
  bool calls_function() const noexcept {
    return functions_refused_ && !functions_refused_->load(std::memory_order_relaxed);
  }
  // A server has no functions, or will not load them: later calls go by EVALSHA. Thread-safe (copies share it).
  void refuse_functions() const noexcept {
    if (functions_refused_) functions_refused_->store(true, std::memory_order_relaxed);
  }

 private:
  // A library body as a script: the body, then its call. And what follows a function's name where a library
  // registers the body's `call` as that function.
  static std::string script_text(std::string_view body) { return std::string(body) + "\nreturn call(KEYS, ARGV)\n"; }
  static constexpr std::string_view registration_tail = "', function(keys, args) return call(keys, args) end)\n";

  std::string source_;
  std::string sha1_;
  std::string function_;
  std::string library_source_;
  std::shared_ptr<std::atomic<bool>> functions_refused_;  // shared by copies; null for a plain script
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

// The FCALL of a library's function that does what `evalsha` (an EVALSHA of its script) does.
inline command fcall_command(const script& s, const command& evalsha) {
  command c = evalsha;
  c.assign_arg(0, "FCALL").assign_arg(1, s.function_name());
  return c;
}
// What an FCALL's answer says: the function is not loaded there (load it, call again), or the server has no
// functions or will not load them (EVALSHA instead).
inline bool function_not_found(const reply& r) {
  return r.is_error("ERR") && r.str().find("Function not found") != std::string::npos;
}
inline bool functions_unsupported(const reply& r) {
  return (r.is_error("ERR") && r.str().find("unknown command") != std::string::npos) || r.is_error("NOPERM");
}

// A script's call as one composed operation on `conn` (a client, or a client_link for work that may outlive the
// client): EVALSHA, and on NOSCRIPT: SCRIPT LOAD and EVALSHA again; for a library, FCALL first (see the top of the
// file).
template <class Client>
struct evalsha_op {
  // `cmd`: the script's EVALSHA ("EVALSHA", sha1, number of keys, keys..., arguments...). It is sent as it is, or
  // turned into the function's FCALL in place and back (its first two arguments): never copied.
  evalsha_op(Client* c, const script* sc, command cm, std::optional<std::chrono::steady_clock::time_point> d)
      : conn(c), s(sc), cmd(std::make_unique<command>(std::move(cm))), deadline(d) {}

  Client* conn;
  const script* s;
  // On the heap: the client reads it by reference once this operation (and so this pointer) has moved into the call.
  std::unique_ptr<command> cmd;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int step = 0;

  void as_fcall() { cmd->assign_arg(0, "FCALL").assign_arg(1, s->function_name()); }
  void as_evalsha() { cmd->assign_arg(0, "EVALSHA").assign_arg(1, s->sha1()); }

  template <class Self>
  void operator()(Self& self, boost::system::error_code ec = {}, reply r = {}) {
    const command& c = *cmd;
    switch (step) {
      case 0:
        if (s->calls_function()) {
          step = 10;
          as_fcall();
          conn->async_execute_command(deadline, c, std::move(self));
          return;
        }
        step = 1;
        conn->async_execute_command(deadline, c, std::move(self));
        return;
      case 10:  // the FCALL's answer
        if (!ec && function_not_found(r)) {
          step = 11;
          conn->async_execute_command(deadline, command{"FUNCTION", "LOAD", "REPLACE", s->library_source()},
                                      std::move(self));
          return;
        }
        if (ec || !functions_unsupported(r)) return self.complete(ec, std::move(r));
        s->refuse_functions();
        step = 1;
        as_evalsha();
        conn->async_execute_command(deadline, c, std::move(self));
        return;
      case 11:  // FUNCTION LOAD's answer
        if (ec || r.is_error()) {
          // Not loaded (a master of a cluster that did not answer, a server out of memory): this call by EVALSHA —
          // the FCALL ran nothing. Refused for good (no such command, no permission): every later call too.
          if (!ec && functions_unsupported(r)) s->refuse_functions();
          step = 1;
          as_evalsha();
          conn->async_execute_command(deadline, c, std::move(self));
          return;
        }
        step = 3;
        conn->async_execute_command(deadline, c, std::move(self));  // still the FCALL
        return;
      case 1:
        if (ec || !r.is_error("NOSCRIPT")) return self.complete(ec, std::move(r));
        step = 2;
        conn->async_execute_command(deadline, command{"SCRIPT", "LOAD", s->source()}, std::move(self));
        return;
      case 2:
        if (ec || r.is_error()) return self.complete(ec, std::move(r));
        step = 3;
        conn->async_execute_command(deadline, c, std::move(self));
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
  if (s.calls_function()) {
    const command fcall = detail::fcall_command(s, cmd);
    result f = conn.execute_command(deadline, fcall);
    if (!f.error && detail::function_not_found(f.value)) {
      result loaded = conn.execute_command(deadline, command{"FUNCTION", "LOAD", "REPLACE", s.library_source()});
      if (!loaded.error && !loaded.value.is_error()) return conn.execute_command(deadline, fcall);
      if (!loaded.error && detail::functions_unsupported(loaded.value)) s.refuse_functions();  // else: this call only
    } else if (!f.error && detail::functions_unsupported(f.value)) {
      s.refuse_functions();
    } else {
      return f;
    }
  }
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
