// cli/common/redis_failure.hpp — why `admit decide` or `admit inspect` could not get an answer from Redis, in words a
// user can act on, and the exit status that goes with it:
//
//   75 (EX_TEMPFAIL)    may pass by waiting: no answer within --timeout, connection refused (the server is down or
//                       restarting), the connection lost or reset, a name server that cannot answer now (EAI_AGAIN),
//                       the server LOADING, BUSY, TRYAGAIN, MASTERDOWN or CLUSTERDOWN. `admit decide --wait` retries
//                       these.
//   69 (EX_UNAVAILABLE) a mistake waiting cannot fix: authentication failed (WRONGPASS, NOAUTH, NOPERM), unknown host
//                       (no such name), a database the server does not have, a peer that does not speak RESP, any
//                       other error reply.
//
// Messages name the server as its URL without the password (redis_address).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/options.hpp"
#include "cli/common/message.hpp"

namespace admit::cli {

struct redis_failure {
  std::error_code error;   // an admit::errc of the Redis client (or errc::error_reply for an error reply)
  std::string message;     // e.g. "cannot connect to redis://127.0.0.1:6380: connection refused (is ...?)"
  bool transient = false;  // may pass by waiting (exit 75); else exit 69
  int exit_status() const noexcept { return transient ? exit_tempfail : exit_unavailable; }
};

// The server the options point to, as a URL without the password: "redis://127.0.0.1:6379/2",
// "redis://alice@[::1]:6380", "unix:///run/redis.sock?db=2".
std::string redis_address(const redis::connection_options& options);

// Connects (one attempt, bounded by the options' connect_timeout, or the next one while the connection waits out a
// backoff) and checks with a PING, within `timeout`, that the server takes our commands (a server that wants a
// password the URL lacks says NOAUTH only then). Empty when ready. Never past `deadline` when there is one (then a
// timeout, as the PING's). Blocking; not on the connection's executor.
std::optional<redis_failure> check_ready(redis::connection& conn, std::chrono::nanoseconds timeout,
                                         std::optional<std::chrono::steady_clock::time_point> deadline = {});

// A call on `conn` that failed with `error` (and, for an error reply, the reply's text): what happened, using the
// connection's last failure when the call timed out with the connection down or the connection was lost.
// `timeout` is the call's, for the message.
redis_failure call_failure(const redis::connection& conn, std::error_code error, std::string_view reply_text,
                           std::chrono::nanoseconds timeout);
// The same for a call made through `nodes`, a cluster client seeded with `seed`'s server. The call went to the master
// of its slot, so the words name "a node of the Redis Cluster that <seed> belongs to", not the seed: its error reply,
// no answer, a connection lost during the call; a call that timed out while a node cannot be reached (its slots'
// calls are never sent) names that node and why (nodes.last_failure(), e.g. "10.0.0.7:6379: connect: Connection
// refused"). The seed's own failure, when it is down, is told as for one server.
redis_failure call_failure(const redis::connection& seed, const redis::cluster& nodes, std::error_code error,
                           std::string_view reply_text, std::chrono::nanoseconds timeout);

}  // namespace admit::cli
