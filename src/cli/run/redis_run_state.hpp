// cli/run/redis_run_state.hpp — what `admit run --redis` shares between its permit source, the permit it holds and
// the watch over its wait (private to cli/run/): the connection and its thread, the admission, the entries that
// `admit inspect` shows of the run, and the Redis words of its messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "admit/admission.hpp"
#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "cli/common/io_runner.hpp"
#include "cli/common/redis_failure.hpp"
#include "cli/run/run.hpp"

namespace admit::cli::redis_run {

using steady = std::chrono::steady_clock;

// The deadline of each Redis call (connecting included).
inline constexpr std::chrono::milliseconds call_timeout{1'000};
// How long past --timeout a wait may still take to end (its leave-queue call answered): beyond it, Redis is not
// answering and the wait is abandoned (its entry expires in Redis by itself).
inline constexpr std::chrono::milliseconds past_deadline{50};

// Everything the source and its permits share: the connection and its thread, the admission (the rate and the
// concurrency limit, decided together in Redis), and the eventfd that says the lease was lost. Destroyed last (the
// permit holds it).
struct state {
  run::run_settings settings;
  run::entry_info info;
  io_runner io;
  redis::connection conn;                 // the URL's server: checked first; the limit's when it is not a cluster
  std::unique_ptr<redis::cluster> nodes;  // when the URL's server is a Redis Cluster node (a seed of this client)
  int lost = -1;                          // eventfd, written by the semaphore's on_lease_lost
  std::unique_ptr<redis::admission> limit;
  admit::detail::mutex mutex;
  std::function<void()> on_queued ADMIT_GUARDED_BY(mutex);  // set while an acquisition waits
  // The ids this wait joined the queue with and when, the last one current.
  std::vector<std::pair<std::string, std::int64_t>> waiter_ids ADMIT_GUARDED_BY(mutex);
  // Set when Redis did not answer in time what ends a wait (the wait itself, or its queue-leave within
  // past_deadline), or the release as the command ended: the teardown then waits for nothing Redis would have to
  // answer (what is left expires there).
  bool abandoned = false;
  redis::semaphore_options semaphore_options;

  state(const run::run_settings& s, const run::entry_info& i, const redis::connection_options& o);
  ~state();
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  // Once Redis answers: asks the URL's server whether it is a Redis Cluster node (then the limit goes through a
  // cluster client seeded with it: its keys share the hash tag {name}, one slot) and makes the admission. A server
  // that refuses INFO (an ACL user without it) is taken as a single server; when INFO fails (no answer by `until`,
  // the connection lost) its error is returned and nothing is made: nothing is decided from an INFO cut short (a
  // cluster node taken for a single server would fail every call later).
  std::error_code make_limits(std::chrono::steady_clock::time_point until);
  // --concurrency, --rate and --burst as the admission's definition.
  static admission_options limits(const run::run_settings& s);

  // What inspect shows of this run under `id` (run_holder.hpp): since `started_unix_ms` it waits or holds. Not waited
  // for: called on the executor, and by the supervisor between signals it must forward at once.
  void show(const std::string& id, std::int64_t started_unix_ms);
  void hide(const std::string& id);
  // The wait has ended: the entries of its waiter ids go, but `kept` (the lease it got, under the same id).
  void hide_waiters(const std::string& kept);
  // The wait joined the queue as `id` (on the executor).
  void queued_as(const std::string& id);
  // Writes the current waiter's entry again (it lives 3 × --lease-ttl).
  void show_waiter();

  // Where the limit's keys live (one hash slot: every key is "{name}:...").
  redis::client& limit_client() { return nodes ? static_cast<redis::client&>(*nodes) : conn; }
  std::string where() const;
  // The server that holds the limit, for a message: where() for one server; on a cluster, the node of where()'s
  // cluster that holds it (the URL's node need not be that one).
  std::string holder_where() const;
  // Why the limit's Redis cannot be reached now, from the client's own state (no call): empty when it can, or when
  // that is not known (a server that is connected and silent).
  std::string unreachable() const;
  // Why a call on the limit failed (through the cluster's nodes when there are any); `timeout`: the time the call was
  // given, for a timeout's message. An answer the semaphore could not read (errc::unexpected_reply: it keeps no error
  // reply's words) is asked about once more: what Redis answers a read of the limit's key now (CLUSTERDOWN, LOADING,
  // READONLY...), when that is an error.
  redis_failure failure(std::error_code error, std::string_view reply_text = {},
                        std::chrono::nanoseconds timeout = call_timeout);
};

}  // namespace admit::cli::redis_run
