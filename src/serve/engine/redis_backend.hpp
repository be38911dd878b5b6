// serve/engine/redis_backend.hpp — `admit serve --redis URL`: the counters of every rule in Redis (one server, Redis
// Sentinel, or a Redis Cluster), shared by every `admit serve` process that uses the same Redis.
//
//   admit::serve::redis_backend store(io.get_executor(), {.url = "redis://127.0.0.1:6379"});
//   if (auto why = store.ping(std::chrono::seconds(2))) log("Redis unreachable: " + *why);   // --redis-required
//
// How each algorithm decides (rule.hpp):
// - fixed_window (the default) decides exactly as envoyproxy/ratelimit's Redis cache: one counter per descriptor and
//   window, the window aligned to Unix time and computed from the `now` decide() is given (the clock of this process,
//   as envoyproxy/ratelimit uses its own), every hit added to the counter even when it is over the limit (INCRBY),
//   over the limit iff the count after the hit exceeds the limit, remaining = limit - count after, reset = the time to
//   the window's end in whole seconds. Where envoyproxy/ratelimit sends INCRBY and EXPIRE per descriptor, the hits of
//   all the requests decided at about the same time go to Redis together: see "Batching". The counter expires a unit
//   after its first hit (envoyproxy/ratelimit: after its last), always
//   past its window's end. envoyproxy/ratelimit's optional variations are not offered: what it does by default is
//   what this does (no expiry jitter, no second Redis for per-second limits, no local cache of keys over their limit,
//   hits counted even over the limit).
// - sliding_window, gcra, token_bucket: admit::redis's limiters of that algorithm (one per distinct rate and burst),
//   keyed by the counter key: their decisions use Redis's clock, not `now`.
// - concurrency: an admit::redis::semaphore per counter and limit (its capacity the limit); an admitted hit is a
//   non-waiting acquire whose lease is detached — held in Redis until released (release(), from any process of the
//   fleet: the lease id names its semaphore) or until lease_ttl has passed since it was granted (a caller that never
//   releases frees its permit by itself). A hit of 0 reads the permits in use (inspect) and takes nothing.
//
// Keys. Every key starts with options.key_prefix ("admit:serve:" by default), so that envoyproxy/ratelimit's keys
// ("<prefix><domain>_<key>_<value>_..._<window start>") in the same Redis are never touched:
//   fixed_window   <prefix>fw:{<counter key>}:<unit seconds>:<window start, Unix seconds>   a counter (string)
//   concurrency    {<prefix>cc:<limit>:<counter key>}:meta, :holders, :leases                 the semaphore's state
//                  (in the counter key, '{', '}' and '%' are written %7B, %7D, %25; idle_ttl 1 s: the keys go 1 to
//                  1.25 s after the last lease could)
//   other          {<prefix><algorithm>:<requests>/<unit>:<burst>}:<counter key>               admit::redis's state
// On a cluster, each counter's keys are in the slot of its counter key (fixed_window; concurrency: of its semaphore's
// name); a limiter's keys
// share the slot of its name (the other algorithms: one slot per distinct rate and burst).
//
// Batching. decide() queues its fixed-window hits; the queue leaves when it reaches min(8, options.max_batch) hits
// (so that Redis works on it while more are queued), or when the flush that the first hit queued runs on the
// executor (so that every hit asked for meanwhile, by any thread, goes with it). On one server (not a cluster) the
// hits that only add (over_limit_hits: count, prefetch refills included) leave as one pipeline of plain commands: per
// counter one INCRBY of its hits together and one EXPIRE ... NX (the expiry set only when it is new), each hit
// answered in its order. The others leave as script calls of at most options.max_batch hits; on a cluster every hit
// does, one call per hash slot.
//
// Failures. A hit Redis did not decide (a timeout after options.timeout, a lost or refused connection, an error
// reply) gets hit_outcome::state::failed with the reason in `error`: the service answers it by its fail-open or
// fail-closed policy. Nothing is retried (a timeout leaves it unknown whether the hit was counted). The connection
// reconnects by itself with backoff; decisions succeed again as soon as Redis answers. A circuit breaker
// (options.breaker: by default 5 failed calls in a row open it for 1 s) makes decisions fail at once, without
// waiting for their timeout, while Redis does not answer.
//
// Threads. The client's I/O runs on the executor given at construction, which some thread must run for as long as
// the backend lives (and which must outlive it), or on a thread of the backend's own (the other constructor). decide(),
// release() and configure() are thread-safe; completions run on the executor's threads. ping() blocks: never call it
// from a thread that runs the executor.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "admit/redis/circuit_breaker.hpp"
#include "serve/engine/backend.hpp"

namespace admit::serve {

struct redis_backend_options {
  // redis://, rediss:// (TLS), unix:// or redis+sentinel:// (admit/redis/client/options.hpp).
  std::string url = "redis://127.0.0.1:6379";
  // Whether `url` is a Redis Cluster node: automatic asks the server (INFO cluster) when it first answers; until then
  // decisions wait for that answer (bounded by their timeout).
  enum class topology : std::uint8_t { automatic, standalone, cluster };
  topology mode = topology::automatic;
  // The start of every key this backend writes; must not contain '{' or '}' (the keys' hash tags are its own).
  std::string key_prefix = "admit:serve:";
  // The deadline of each decision's Redis call, from the call to decide(). > 0.
  std::chrono::milliseconds timeout{100};
  // The most fixed-window hits in one script call. >= 1 (1: one call per hit).
  std::size_t max_batch = 64;
  // How long a concurrency lease lives in Redis unless released. > 0.
  std::chrono::milliseconds lease_ttl{60'000};
  // Consecutive failed calls (timeouts, lost or refused connections) after which decisions fail at once, without
  // calling Redis, for open_for; then one call probes. failure_threshold 0: never. Also the limiters' breaker.
  redis::circuit_breaker_options breaker{};
  // The most admit::redis limiters kept at once (one per distinct algorithm, rate and burst, including the limits
  // callers send as overrides); a hit that would need one more fails. >= 1.
  std::size_t max_limiters = 1'024;
};

class redis_backend final : public backend {
 public:
  // Does not connect (the first decision or ping() does). Throws std::invalid_argument naming the bad value (the URL,
  // with its password hidden, or an option).
  redis_backend(boost::asio::any_io_executor executor, redis_backend_options options);
  // The same on an io_context of its own, run by one thread of its own until the backend is destroyed: decisions'
  // completions run on that thread.
  explicit redis_backend(redis_backend_options options);
  // Closes the connections, completing the calls in flight first (up to a second); decisions still queued complete
  // as failed.
  ~redis_backend() override;
  redis_backend(const redis_backend&) = delete;
  redis_backend& operator=(const redis_backend&) = delete;

  // Connects (if not yet) and sends PING, waiting at most `timeout`: std::nullopt when Redis answered, else why not,
  // naming the server (e.g. "Redis at 127.0.0.1:6379 did not answer PING within 2000 ms: connection refused"). With
  // topology::automatic it also learns whether the server is a cluster node. Blocking; for `--redis-required` and
  // the start-up message.
  [[nodiscard]] std::optional<std::string> ping(std::chrono::milliseconds timeout);

  // See backend.hpp and the top of this file. A hit whose rule is unlimited is OK without a call.
  void decide(std::shared_ptr<pending_decision> call) override;
  // Releases a lease that decide() returned (by any process using the same Redis and key_prefix); not_held when Redis
  // has no such lease (released already, expired, or not a lease of this backend's format); failed, with the reason,
  // when Redis could not be asked or did not answer (the lease may still be held).
  void release(std::string lease, std::function<void(release_result)> done) override;
  // State lives in Redis: nothing to carry. Drops the limiters that `next` no longer uses.
  void configure(const configuration& next) override;
  // Closes the connection(s) to Redis: what waits for a reply completes as failed (errc::closed), at once.
  void abandon() override;

  // Throws std::invalid_argument naming the rule (file:line) when a rule of `config` cannot be decided on Redis (a
  // sliding window whose limit · window is beyond admit::redis::sliding_window's range, say). The command calls it
  // before installing a configuration.
  static void check(const configuration& config);

  struct state;  // implementation (redis_backend.cpp)

 private:
  // Closes the connection(s) to Redis, at once or after waiting for the replies of what was sent.
  void close_connections(bool at_once);
  struct own_io;
  std::unique_ptr<own_io> io_;  // the io_context of its own, if any: destroyed after the state is let go
  std::shared_ptr<state> state_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace admit::serve
