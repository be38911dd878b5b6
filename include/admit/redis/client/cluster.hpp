// admit/redis/client/cluster.hpp — a client of a Redis Cluster: routes each command to the master that owns its key's
// hash slot, follows MOVED and ASK redirections, keeps the slot map fresh, and keeps one pipelined connection per
// master.
//
//   admit::redis::cluster redis(io.get_executor(), "redis://127.0.0.1:7000");   // any node works as a seed
//   admit::redis::gcra limiter(redis, "api", admit::rate::per_second(100), 20);   // every key in slot of "{api}"
//
// Routing. The slot of a key is CRC16(key) mod 16384 (hash_slot below), computed on the key's hash tag when it has
// one: every key of one admit limiter is "{name}:...", so all of them live in one slot, on one node, and its scripts
// never meet CROSSSLOT. Which argument is the key: EVAL / EVALSHA / EVAL_RO / EVALSHA_RO / FCALL / FCALL_RO: the
// first key (args[3]) when numkeys > 0, else none; OBJECT, MEMORY, LMPOP and ZMPOP: args[2]; BLMPOP and BZMPOP:
// args[3]; a list of keyless commands (PING, ECHO, TIME, INFO, CLUSTER, CONFIG, CLIENT, COMMAND, DBSIZE, ...) and
// commands with no argument: any master; SCRIPT LOAD, SCRIPT FLUSH, FUNCTION LOAD / DELETE / FLUSH / RESTORE, FLUSHALL
// and FLUSHDB: every master (a broadcast: its reply is the first master's when all succeeded, else the first failure —
// an I/O error or an error reply); every other command: args[1]. Commands whose keys are elsewhere (XREAD ... STREAMS
// key) or in several slots are sent by args[1] and answered by Redis (MOVED or CROSSSLOT) as it sees fit.
//
// The slot map is read with CLUSTER SLOTS: on first use, then after any MOVED, CLUSTERDOWN or connection failure —
// one refresh at a time, at most one per cluster_options::refresh_interval (requests in between are coalesced into one
// refresh at the end of the interval). Until the map is known, a command goes to a seed node and follows MOVED.
//
// Redirections. MOVED slot host:port: the slot's owner is updated at once (connecting to a new node when needed), a
// refresh is requested, and the command is resent to the new owner. ASK slot host:port: "ASKING" and the command are
// sent to that node back to back (one write, nothing of the same connection in between); the map is not changed.
// TRYAGAIN (a multi-key command during a migration): resent after cluster_options::tryagain_delay. These are safe to
// retry — Redis did not run the command — and bounded by the call's deadline, and by cluster_options::max_redirects
// per call (TRYAGAIN: only when the call has no deadline); past the bound the redirection reply itself is returned.
// CLUSTERDOWN and every other error reply are returned as values. I/O errors complete the call as connection's do and
// are never retried (errc::timeout and errc::outcome_unknown: the command may have run); they also request a refresh.
//
// Completion, deadlines, cancellation, threads and lifetime are connection's (connection.hpp): exactly once, through
// the handler's executor, never inside the initiating call; a deadline covers the whole call (redirections and
// TRYAGAIN delays included); terminal and partial cancellation complete the call with operation_aborted and stop its
// redirections (the attempt already handed to a node may still be written; its reply is then discarded); every member
// is thread-safe; destroy the cluster before its execution context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "admit/detail/deadline.hpp"
#include "admit/redis/client/client.hpp"
#include "admit/redis/client/command.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/detail/request.hpp"
#include "admit/redis/client/options.hpp"

namespace admit::redis {

// The hash slot of `key`, 0..16383: CRC16 (XMODEM: polynomial 0x1021, initial value 0) mod 16384 of its hash tag —
// the bytes between the first '{' and the first '}' after it, when there is at least one — or else of the whole key.
// hash_slot("{api}:user:42") == hash_slot("api"); hash_slot("a{}b") is that of the whole key. Thread-safe, O(size).
std::uint16_t hash_slot(std::string_view key) noexcept;

struct cluster_options {
  // Redirections (MOVED, ASK) one call may follow, and TRYAGAIN retries of a call without a deadline (with one,
  // TRYAGAIN is retried until the deadline); past them the last redirection reply is the call's reply. 0 follows none.
  std::size_t max_redirects = 5;
  // The shortest time between the starts of two slot-map refreshes. Must be >= 0.
  std::chrono::nanoseconds refresh_interval = std::chrono::milliseconds(100);
  // The wait before resending after TRYAGAIN (bounded by the call's deadline). Must be > 0.
  std::chrono::nanoseconds tryagain_delay = std::chrono::milliseconds(10);
};

// Counters since the cluster was created (relaxed reads; each is exact once the cluster is quiet).
struct cluster_statistics {
  std::uint64_t moved = 0;             // MOVED replies followed
  std::uint64_t ask = 0;               // ASK replies followed (ASKING + the command sent)
  std::uint64_t tryagain = 0;          // TRYAGAIN replies retried
  std::uint64_t refreshes = 0;         // slot maps loaded (CLUSTER SLOTS answered and applied)
  std::uint64_t refresh_failures = 0;  // refreshes that failed (I/O error, error reply, unusable map)
  std::uint64_t nodes = 0;             // node connections (seeds included)
};

namespace detail {
class cluster_impl;

// Where a command goes (see the top of the file). `key` views into the command's arguments.
enum class route_kind { keyed, any_master, every_master };
struct route {
  route_kind kind = route_kind::any_master;
  std::string_view key;
};
route route_of(const command& cmd) noexcept;

std::shared_ptr<cluster_impl> make_cluster_impl(boost::asio::any_io_executor ex, std::vector<connection_options> seeds,
                                                cluster_options options);
void execute(cluster_impl& impl, std::shared_ptr<request_base> req,
             std::optional<std::chrono::steady_clock::time_point>, command cmd);
void request_refresh(cluster_impl& impl);
close_result close(cluster_impl& impl, std::optional<std::chrono::steady_clock::time_point> deadline, bool wait);
cluster_statistics statistics(const cluster_impl& impl) noexcept;
std::pair<std::error_code, std::string> last_failure(const cluster_impl& impl);
}  // namespace detail

class cluster final : public client {
 public:
  // Seeds: nodes to ask for the slot map first (any nodes of the cluster; more than one survives a seed being down).
  // Every node connection takes the first seed's user, password and timeouts (connect_timeout, command_timeout — the
  // default deadline —, reconnect backoff). Does not connect yet (the first call or refresh() does). Throws
  // std::invalid_argument naming the bad value: no seed, a unix-socket seed, db != 0 (a cluster has only database 0),
  // a seed with sentinel options, invalid connection options, negative refresh_interval, non-positive tryagain_delay.
  cluster(executor_type ex, std::vector<connection_options> seeds, cluster_options options = {});
  // One seed by URL (redis://[[user]:password@]host[:port], see options.hpp).
  cluster(executor_type ex, std::string_view seed_url, cluster_options options = {})
      : cluster(std::move(ex), std::vector<connection_options>{parse_url(seed_url)}, options) {}

  // Closes every node connection as close() does (waiting, except on a thread that runs the cluster's executor: see
  // connection's destructor).
  ~cluster() override;
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  executor_type get_executor() const noexcept override { return executor_; }
  const connection_options& node_options() const noexcept { return node_options_; }
  const cluster_options& options() const noexcept { return options_; }

  // now + node_options().command_timeout, or none when that is nanoseconds::max().
  std::optional<clock::time_point> default_deadline() const noexcept override {
    return admit::detail::optional_deadline_after<clock>(clock::now(), node_options_.command_timeout);
  }

  // Blocking, with the default deadline: execute("SET", "{app}:k", 1). Must not be called from a thread running the
  // cluster's executor. The asynchronous form is client::async_execute_command.
  template <class... Args>
  result execute(const Args&... args) {
    return execute_command(default_deadline(), detail::make_command(args...));
  }

  // Asks for a slot-map refresh now (subject to refresh_interval; coalesced with one in progress) and returns at
  // once. Useful at start-up, so that the first calls go straight to their masters. Thread-safe.
  void refresh() { detail::request_refresh(*impl_); }

  // Stops for good, delivering first what was asked before: every node connection is closed as connection::close()
  // does, with one deadline for all (node_options().close_timeout): calls already handed to a node are written and
  // answered, or complete with errc::closed at the deadline and are counted in the result. A redirection (MOVED, ASK,
  // TRYAGAIN) received after the start of close() is not followed: its call completes with errc::closed. Later calls
  // complete with errc::closed. Blocking, idempotent, thread-safe; on a thread that runs the cluster's executor it does
  // not wait (see connection::close()).
  close_result close();
  // The same with a deadline of now + timeout (zero or negative: drop what is unanswered at once), or an explicit one
  // (std::nullopt: none).
  template <class Rep, class Period>
  close_result close_for(std::chrono::duration<Rep, Period> timeout) {
    return close_until(admit::detail::optional_deadline_after<clock>(clock::now(), timeout));
  }
  close_result close_until(std::optional<clock::time_point> deadline);

  cluster_statistics statistics() const noexcept { return detail::statistics(*impl_); }
  // Why a node is unreachable, as connection::last_connect_error() says it for one connection: the error of the first
  // node that is down after a failed attempt or a lost connection, among the seeds and the masters of the current slot
  // map (seeds first); empty when none is. A call that timed out because its node could not be reached (it was never
  // sent) has its cause here: tls_verify_failed, auth_failed, connection_refused, ... Thread-safe.
  std::error_code last_connect_error() const { return last_failure().first; }
  // That node's connection::last_error() — the system's, OpenSSL's or the server's words — after its address when they
  // do not name it ("10.0.0.7:6379: connect: Connection refused"); empty when last_connect_error() is.
  std::string last_error() const { return last_failure().second; }
  // Both at once, of the same node.
  std::pair<std::error_code, std::string> last_failure() const { return detail::last_failure(*impl_); }

 private:
  void do_async_execute(std::shared_ptr<detail::request_base> req, const command& cmd) override;
  result do_execute(std::optional<clock::time_point> deadline, const command& cmd) override;
  std::optional<clock::time_point> close_deadline() const noexcept;

  executor_type executor_;
  connection_options node_options_;
  cluster_options options_;
  std::shared_ptr<detail::cluster_impl> impl_;
};

}  // namespace admit::redis
