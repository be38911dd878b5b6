// Redis failures of `admit decide` / `admit inspect` in words (see failure.hpp).
#include "cli/common/redis_failure.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <string>

#include "admit/detail/deadline.hpp"
#include "admit/detail/host_port.hpp"
#include "admit/errc.hpp"
#include "admit/redis/client/reply.hpp"
#include "admit/redis/limiter_result.hpp"
#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"

namespace admit::cli {

namespace {

// The connection's words without their "connect: " / "resolve host: " / "AUTH: " lead.
std::string words_of(const redis::connection& conn) {
  std::string w = conn.last_error();
  if (const auto colon = w.find(": "); colon != std::string::npos) w.erase(0, colon + 2);
  return w;
}

// Whether `e` is one of the Redis client's connection failures (connect() or last_connect_error() gives them).
bool is_connection_error(std::error_code e) {
  constexpr std::array<errc, 14> connection = {errc::closed,
                                               errc::connect_timeout,
                                               errc::auth_failed,
                                               errc::select_failed,
                                               errc::protocol_error,
                                               errc::connection_refused,
                                               errc::unknown_host,
                                               errc::connection_failed,
                                               errc::connection_lost,
                                               errc::tls_handshake_failed,
                                               errc::tls_verify_failed,
                                               errc::no_sentinel,
                                               errc::unknown_master,
                                               errc::not_master};
  return std::any_of(connection.begin(), connection.end(), [&](errc c) { return e == c; });
}

std::string with_words(const std::string& words) { return words.empty() ? std::string() : " (" + words + ")"; }

// An error reply from `where` (a server's address, or the words for a node of a cluster).
redis_failure reply_failure(const std::string& where, std::string_view text) {
  const redis::error_kind kind = redis::kind_of_error(text);
  redis_failure f{make_error_code(errc::error_reply), {}, kind == redis::error_kind::transient};
  if (text.starts_with("NOPERM")) {  // authenticated, as a user whose ACL rules do not allow the command or key
    f.message = "not allowed at " + where + ": " + std::string(text) +
                " (the user's ACL rules must allow what admit sends: docs/redis.md lists it)";
  } else if (kind == redis::error_kind::credentials) {
    f.message = "authentication failed at " + where + ": " + std::string(text);
    if (text.starts_with("NOAUTH")) f.message += " (the server wants a password: redis://:PASSWORD@host:port)";
  } else if (f.transient) {
    f.message = where + " cannot answer now: " + std::string(text);
  } else {
    f.message = where + " answered with an error: " + std::string(text);
  }
  return f;
}

// A failed connection attempt, or a connection lost (`why` from connect() or last_connect_error()).
redis_failure connection_failure(const redis::connection& conn, std::error_code why) {
  const redis::connection_options& o = conn.options();
  const std::string where = redis_address(o);
  const std::string words = words_of(conn);
  redis_failure f{why, {}, false};
  if (why == errc::connection_refused) {
    f.transient = true;
    f.message = "cannot connect to " + where + ": connection refused (is the server running?)";
    // A unix-domain socket whose file is not there: said so, rather than refused (the server never made it, or
    // listens elsewhere).
    std::error_code ec;
    if (!o.unix_path.empty() && !std::filesystem::exists(o.unix_path, ec)) {
      f.message = "cannot connect to " + where + ": no socket file " + quote(o.unix_path) +
                  " (is the server running, with unixsocket set to that path?)";
    }
  } else if (why == errc::unknown_host) {
    f.message = "cannot connect to " + where + ": unknown host " + quote(o.host) + with_words(words);
  } else if (why == errc::connect_timeout) {
    f.transient = true;
    f.message = "cannot connect to " + where + ": no answer within " + format_duration(o.connect_timeout);
    // A TLS handshake that got no answer: most often a rediss:// URL for a plain port, whose Redis takes the TLS hello
    // for the start of a command (the connection's own words say which step timed out).
    if (conn.last_error().starts_with("TLS handshake")) f.message += " to the TLS handshake (is the port a TLS port?)";
  } else if (why == errc::auth_failed && !o.sentinel.master_name.empty() && conn.last_error().starts_with("Sentinel")) {
    f.message = "authentication failed at " + where + ": " + words +
                " (check sentinel_username and sentinel_password in the URL)";
  } else if (why == errc::auth_failed) {
    f.message = "authentication failed at " + where + ": " + words + " (check the user and password in the URL)";
  } else if (why == errc::unknown_master) {
    // The sentinels answered: a name none of them monitors, or nodes that are no sentinels. Not transient.
    f.message = "cannot connect to " + where + ": " + words;
  } else if (why == errc::select_failed && words.find("NOPERM") != std::string::npos) {
    f.message = "the user may not select database " + std::to_string(o.db) + " at " + where + " (" + words +
                "; its ACL rules need +select)";
  } else if (why == errc::select_failed && words.find("out of range") != std::string::npos) {
    f.message = "database " + std::to_string(o.db) + " does not exist at " + where + with_words(words);
  } else if (why == errc::select_failed) {
    f.message = "cannot select database " + std::to_string(o.db) + " at " + where + with_words(words);
  } else if (why == errc::tls_verify_failed || why == errc::tls_handshake_failed) {
    // Certificates and TLS settings do not fix themselves: not transient.
    f.message = "cannot connect to " + where + ": " + (words.empty() ? why.message() : words);
  } else if (why == errc::protocol_error) {
    f.message = where + " does not speak the Redis protocol" + with_words(words);
  } else if (why == errc::connection_lost) {
    f.transient = true;
    f.message = "lost the connection to " + where + with_words(words);
  } else {  // connection_failed, closed, anything else
    f.transient = true;
    f.message = "cannot connect to " + where + ": " + (words.empty() ? why.message() : words);
  }
  return f;
}

}  // namespace

std::string redis_address(const redis::connection_options& o) {
  // Built by appending: `"literal" + std::string` trips g++ 12's false -Wrestrict at -O3 (GCC bug 105651).
  std::string address;
  if (!o.unix_path.empty()) {
    address.append("unix://").append(o.unix_path);
    if (o.db != 0) address.append("?db=").append(std::to_string(o.db));
    return address;
  }
  if (!o.sentinel.master_name.empty()) {
    // The sentinels and the master's name, as the URL gave them (host and port are not used then).
    address.append("redis+sentinel://");
    if (!o.user.empty()) address.append(o.user).append("@");
    for (std::size_t i = 0; i < o.sentinel.sentinels.size(); ++i) {
      if (i != 0) address.append(",");
      address.append(admit::detail::host_port(o.sentinel.sentinels[i].host, o.sentinel.sentinels[i].port));
    }
    address.append("/").append(o.sentinel.master_name);
    if (o.db != 0) address.append("/").append(std::to_string(o.db));
    return address;
  }
  address.append(o.tls ? "rediss://" : "redis://");
  if (!o.user.empty()) address.append(o.user).append("@");
  address.append(admit::detail::host_port(o.host, o.port));
  if (o.db != 0) address.append("/").append(std::to_string(o.db));
  return address;
}

std::optional<redis_failure> check_ready(redis::connection& conn, std::chrono::nanoseconds timeout,
                                         std::optional<std::chrono::steady_clock::time_point> deadline) {
  const auto start = std::chrono::steady_clock::now();
  const auto ping_deadline = [&] {
    const auto by_timeout =
        admit::detail::deadline_after<std::chrono::steady_clock>(std::chrono::steady_clock::now(), timeout);
    return deadline ? std::min(*deadline, by_timeout) : by_timeout;
  };
  // The time given up to `until`, for a timeout's message (in whole milliseconds: "700ms", not "699844446ns").
  const auto given = [&](std::chrono::steady_clock::time_point until) {
    return std::chrono::nanoseconds(std::chrono::round<std::chrono::milliseconds>(until - start));
  };
  // Through Sentinel, connecting is bounded by the timeout too: an attempt asks each sentinel for up to the connect
  // timeout in turn (three silent sentinels took three times the timeout). One server's attempt is bounded by its
  // own connect timeout, and fails saying why.
  std::optional<std::chrono::steady_clock::time_point> connect_deadline = deadline;
  if (!connect_deadline && !conn.options().sentinel.master_name.empty()) connect_deadline = ping_deadline();
  if (const std::error_code ec = connect_deadline ? conn.connect_until(*connect_deadline) : conn.connect()) {
    if (ec == errc::timeout) return call_failure(conn, ec, {}, given(*connect_deadline));
    return connection_failure(conn, ec);
  }
  const auto until = ping_deadline();
  const redis::result r = conn.execute_until(until, "PING");
  if (r.error) return call_failure(conn, r.error, {}, deadline && until == *deadline ? given(until) : timeout);
  // NOPERM: a user whose ACL rules leave PING out (docs/redis.md's smallest rule set does) is connected and answered
  // all the same; what admit does need, its own commands say when they are refused.
  if (r.value.is_error() && !r.value.str().starts_with("NOPERM")) {
    return reply_failure(redis_address(conn.options()), r.value.str());
  }
  return std::nullopt;
}

redis_failure call_failure(const redis::connection& conn, std::error_code error, std::string_view reply_text,
                           std::chrono::nanoseconds timeout) {
  if (error == errc::error_reply) return reply_failure(redis_address(conn.options()), reply_text);
  const std::string where = redis_address(conn.options());
  const std::error_code down = conn.last_connect_error();
  if (error == errc::timeout) {
    // Never sent while the connection was down: why it was down is the story.
    if (!conn.is_connected() && down) return connection_failure(conn, down);
    return {error, "no answer from " + where + " within " + format_duration(timeout), true};
  }
  if (error == errc::outcome_unknown) {
    if (down == errc::protocol_error) return connection_failure(conn, down);
    return {error, "lost the connection to " + where + " during the call" + with_words(words_of(conn)), true};
  }
  if (is_connection_error(error)) return connection_failure(conn, error);
  return {error, "unexpected answer from " + where + ": " + error.message(), false};
}

redis_failure call_failure(const redis::connection& seed, const redis::cluster& nodes, std::error_code error,
                           std::string_view reply_text, std::chrono::nanoseconds timeout) {
  // The call went to the master of the limit's slot, which need not be the seed: the words name the cluster, and the
  // node where one is known. The seed's own failure (it is down) is told as for one server.
  if (!seed.is_connected() && seed.last_connect_error()) return call_failure(seed, error, reply_text, timeout);
  const std::string cluster = "a node of the Redis Cluster that " + redis_address(seed.options()) + " belongs to";
  if (error == errc::error_reply) return reply_failure(cluster, reply_text);
  const auto [down, words] = nodes.last_failure();
  if (error == errc::timeout && down) {
    // As connection_failure: what waiting cannot fix is not transient.
    const bool lasting = down == errc::auth_failed || down == errc::unknown_host || down == errc::tls_verify_failed ||
                         down == errc::tls_handshake_failed || down == errc::protocol_error;
    return {down, "cannot reach " + cluster + ": " + words, !lasting};
  }
  if (error == errc::timeout) return {error, "no answer from " + cluster + " within " + format_duration(timeout), true};
  if (error == errc::outcome_unknown) {
    return {error, "lost the connection to " + cluster + " during the call" + (down ? ": " + words : std::string()),
            true};
  }
  return call_failure(seed, error, reply_text, timeout);
}

}  // namespace admit::cli
