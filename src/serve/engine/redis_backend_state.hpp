// serve/engine/redis_backend_state.hpp — what redis_backend (redis_backend.hpp) is made of: the client (a connection or
// a cluster client, chosen once the server says which it is), the fixed-window queue, the admit::redis limiters and
// semaphores. Private to src/serve/engine/redis_backend*.cpp.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "admit/asio/error_code.hpp"
#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/errc.hpp"
#include "admit/redis/circuit_breaker.hpp"
#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/detail/random_id.hpp"
#include "admit/redis/client/options.hpp"
#include "admit/redis/client/script.hpp"
#include "admit/redis/limiter.hpp"
#include "admit/redis/semaphore.hpp"
#include "serve/engine/redis_backend.hpp"
#include "serve/engine/window_stock.hpp"

namespace admit::serve {

namespace detail {

using steady = std::chrono::steady_clock;

// One decide() call under way: its hits' calls (each writes its own outcome) complete it when the last one is in.
struct pending_request {
  explicit pending_request(std::shared_ptr<pending_decision> c) : call(std::move(c)), left(call->hits.size()) {}
  std::shared_ptr<pending_decision> call;
  std::atomic<std::size_t> left;

  void finish(std::size_t i, hit_outcome o) {
    call->outcomes[i] = std::move(o);
    if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) call->complete();
  }
  void fail(std::size_t i, std::string why) {
    hit_outcome o;
    o.result = hit_outcome::state::failed;
    o.error = std::move(why);
    finish(i, std::move(o));
  }
};

// One fixed-window hit waiting for, or riding in, a script call.
struct window_hit {
  std::shared_ptr<pending_request> req;
  std::size_t index = 0;
  std::string key;
  std::uint32_t n = 0;
  std::int64_t expire_seconds = 0;
  std::uint32_t limit = 0;
  bool drop = false;       // over_limit_hits: drop — hits that would take the count above `limit` are not counted
  std::uint32_t take = 0;  // >= n: the hits to add when n fit (the surplus refills the stock, window_stock.hpp)
  bool refill = false;     // this hit refills the stock: window_stock::refilled() must follow, then resume()
  std::int64_t window_end_s = 0;  // with prefetch: the window's end (Unix seconds), for window_stock::learned()
  std::uint32_t prefetch = 0;     // with prefetch: the rule's
  std::int64_t now_s = 0;         // with prefetch: the decision's time (Unix seconds)
  std::chrono::nanoseconds reset_after{0};
  steady::time_point deadline;
};

// The limit a hit is decided against: the caller's override, else the rule's.
struct effective_limit {
  std::uint32_t requests = 0;
  unit per = unit::unknown;
};
inline effective_limit limit_of(const hit& h) {
  if (h.override_limit && h.rule->algorithm != algorithm::concurrency) {
    return {h.override_limit->requests_per_unit, h.override_limit->per};
  }
  return {h.rule->requests_per_unit, h.rule->per};
}

// Whether a rule's refused hits are charged by its admit::redis limiter (over_limit_hits: count on gcra or
// token_bucket; the fixed window charges in its own script).
inline bool charges_refused(const rate_limit_rule& r) {
  return over_limit_hits_of(r) == over_limit_hits::count &&
         (r.algorithm == algorithm::gcra || r.algorithm == algorithm::token_bucket);
}

// The limiters map's key: the limiter's name, and its prefetch (leasing is an option of the limiter object, not of
// the keys in Redis, which rules of the same limit share whatever their prefetch).
inline std::string limiter_slot(const std::string& name, std::uint32_t prefetch) {
  return prefetch > 1 ? name + "|prefetch " + std::to_string(prefetch) : name;
}

// Lowercase hex of bytes, and back (std::nullopt for anything else).
std::string hex(std::string_view bytes);
std::optional<std::string> unhex(std::string_view text);
// Leases: "cc2.<limit>.<hex of the counter key>.<the semaphore's lease id>", so that any process can find the
// semaphore a lease is of.
inline constexpr std::string_view lease_format = "cc2.";
// `text` with '%', '{' and '}' written as %25, %7B and %7D: a descriptor's value in a semaphore's name, which becomes
// the hash tag of its keys and must not contain braces.
std::string escape_braces(std::string_view text);

// The server of `o`, for messages: host:port, the socket path, or the Sentinel master's name; never the password.
std::string address_of(const redis::connection_options& o);
// What keeps a rule from being decided by an admit::redis limiter (their constructors' ranges), if anything.
std::optional<std::string> limiter_problem(algorithm a, std::uint32_t requests, unit per,
                                           std::optional<std::uint32_t> burst);

}  // namespace detail

struct redis_backend::state : std::enable_shared_from_this<state> {
  using resolved = std::function<void(redis::client*, const std::string& error)>;

  // Validates the options (std::invalid_argument) and makes the client: a cluster client, or a connection to the
  // URL's server (with topology::automatic, the client until INFO says the server is a cluster node).
  state(boost::asio::any_io_executor executor, redis_backend_options o);

  boost::asio::any_io_executor ex;
  redis_backend_options opts;
  redis::connection_options node_options;
  std::string address;
  std::unique_ptr<redis::connection> conn;      // the URL's server (the client, unless it is a cluster node)
  std::unique_ptr<redis::cluster> nodes;        // when the URL's server is a cluster node
  std::atomic<redis::client*> target{nullptr};  // null until the topology is known
  std::atomic<bool> clustered{false};           // set (before target) when `nodes` is the client

  admit::detail::mutex topology_mutex;
  bool probing ADMIT_GUARDED_BY(topology_mutex) = false;
  std::vector<resolved> waiting ADMIT_GUARDED_BY(topology_mutex);  // decisions waiting for the topology

  admit::detail::mutex limiters_mutex;
  std::unordered_map<std::string, std::shared_ptr<redis::limiter>> limiters ADMIT_GUARDED_BY(limiters_mutex);

  redis::circuit_breaker breaker;  // of the script calls (the limiters have their own)

  detail::window_stock<detail::window_hit> stock;  // prefetched fixed-window hits, and those waiting for a refill

  admit::detail::mutex queue_mutex;
  std::vector<detail::window_hit> queue ADMIT_GUARDED_BY(queue_mutex);
  bool flush_scheduled ADMIT_GUARDED_BY(queue_mutex) = false;
  // Fixed-window calls sent and not completed.
  std::size_t calls_in_flight ADMIT_GUARDED_BY(queue_mutex) = 0;

  // ---- the client, once the topology is known ----

  // Calls `then` with the client (at once when known), or with why it is not known (INFO cluster failed).
  void with_client(detail::steady::time_point deadline, resolved then);
  void learned_topology(boost::system::error_code ec, const redis::reply& r);

  // "Redis at host:port: timeout (connection refused)".
  std::string failure_text(const std::error_code& ec) const;
  std::string reply_text(const redis::reply& r) const { return "Redis at " + address + " answered " + r.str(); }

  detail::steady::time_point deadline() const {
    return admit::detail::deadline_after<detail::steady>(detail::steady::now(), opts.timeout);
  }

  // ---- fixed windows ----
  // A hit of a rule with prefetch: answered from the stock, left waiting for a refill under way, or added to `out`
  // (for Redis: its own n, or a refill of the stock).
  void take_prefetched(detail::window_hit&& w, std::vector<detail::window_hit>& out);
  // The hits that waited for a refill (window_stock::refilled()): taken again, or failed with the refill's `error`.
  void resume(std::vector<detail::window_hit> waiters, const std::string& error);
  void submit(std::vector<detail::window_hit> hits);
  // Around each fixed-window call: counted in calls_in_flight from before it is made (in_flight; a call that throws
  // before it is made is counted out again) until its completion (call_done), which flushes the hits queued meanwhile.
  struct in_flight {
    explicit in_flight(state& s);
    ~in_flight();
    in_flight(const in_flight&) = delete;
    in_flight& operator=(const in_flight&) = delete;
    void started() noexcept { made = true; }
    state& owner;
    bool made = false;
  };
  void call_done();
  void flush();
  void send_all(std::vector<detail::window_hit> batch);
  void send_chunks(redis::client& c, std::vector<detail::window_hit> hits);
  void send(redis::client& c, std::vector<detail::window_hit> hits);
  void counted(std::vector<detail::window_hit>& hits, boost::system::error_code ec, const redis::reply& r);
  // envoyproxy/ratelimit's own commands instead of the script, for the hits that only add (over_limit_hits: count)
  // on one server (not a cluster): per counter of the batch, INCRBY counter (the sum of its hits' `take`) and
  // EXPIRE counter unit NX, or GET when the sum is 0; all in one pipeline. A refill (take > n) adds its whole take:
  // what lies beyond the limit is never spent (counted_plain), as refused hits counted under `count` are not.
  static bool plain(const detail::window_hit& h) noexcept { return !h.drop; }
  // One counter of such a batch: the index of its reply (INCRBY's, or GET's), its EXPIRE's right after it when
  // `hits` > 0; the hits of the batch on it; the first of them (the batch's index).
  struct plain_counter {
    std::size_t reply = 0;
    std::uint64_t hits = 0;
    std::size_t first = 0;
  };
  void send_plain(std::vector<detail::window_hit> hits);
  // counter_of[i]: the index in `counters` of hits[i]'s counter; `replies`: the pipeline's commands.
  void counted_plain(std::vector<detail::window_hit>& hits, const std::vector<std::size_t>& counter_of,
                     const std::vector<plain_counter>& counters, std::size_t replies, boost::system::error_code ec,
                     const redis::reply& r);
  // A fixed-window hit Redis did not count fails with `why`, and so do the hits waiting for it when it refills.
  void fail_window_hit(detail::window_hit& h, const std::string& why);
  // The outcome of a fixed-window hit, from the counter after it: `extra` hits refill the stock when it refills it,
  // `holds` is what the counter now holds (learned when prefetching); then the hits that waited for it go on.
  void finish_window_hit(detail::window_hit& h, std::uint64_t count_after, std::uint32_t extra, std::uint64_t holds);

  // ---- the other algorithms ----

  // The limiter of `h`'s algorithm, rate and burst (made on first use), or why there is none.
  std::shared_ptr<redis::limiter> limiter_for(redis::client& c, const hit& h, std::string& error);

  // The limiter's name (the hash tag of its keys): "<prefix><algorithm>:<requests>/<unit>:<burst>", and ":count"
  // when refused hits are charged (its keys are then apart from those of the same limit that drops them).
  std::string signature(algorithm a, std::uint32_t requests, unit per, std::optional<std::uint32_t> burst,
                        bool charge) const;

  void decide_on_limiter(redis::client& c, const std::shared_ptr<detail::pending_request>& req, std::size_t i,
                         const hit& h);

  // ---- concurrency (redis_concurrency.cpp) ----
  // One admit::redis::semaphore per counter and limit, named "<prefix>cc:<limit>:<counter key, escape_braces>" (a
  // changed limit counts afresh, as the other algorithms' limiters do), with idle_ttl so that Redis forgets a
  // counter nobody holds. Its leases are detached: Redis holds them until released by id (from any process) or
  // lease_ttl.
  admit::detail::mutex semaphores_mutex;
  // The objects in use, by name; cleared when it reaches max_limiters entries and at each configure (they keep no
  // state a decision needs: an object made again is as good).
  std::unordered_map<std::string, std::shared_ptr<redis::semaphore>> semaphores ADMIT_GUARDED_BY(semaphores_mutex);
  // The semaphore of `counter_key` at `limit`: the cached one, else made (and cached when `cached`); the client must
  // be known (with_client).
  std::shared_ptr<redis::semaphore> semaphore_for(const std::string& counter_key, std::uint32_t limit,
                                                  bool cached = true);

  void acquire(const std::shared_ptr<detail::pending_request>& req, std::size_t i, const hit& h);
  void release(const std::string& lease, std::function<void(release_result)> done);

  // EVALSHA (and on NOSCRIPT: SCRIPT LOAD, EVALSHA again), all by `until`; `handler(error_code, reply)` runs on
  // the client's executor. Through the breaker: while it is open, the handler gets errc::circuit_open at once (on the
  // executor too) and Redis is not called; an I/O failure counts against it, any reply closes it.
  template <class Handler>
  void call_script(redis::client& c, const redis::script& s, redis::command cmd, detail::steady::time_point until,
                   Handler handler) {
    call_guarded(std::move(handler), [&](auto reported) {
      boost::asio::async_compose<decltype(reported), void(boost::system::error_code, redis::reply)>(
          redis::detail::evalsha_op{&c, &s, std::move(cmd), std::optional<detail::steady::time_point>(until)}, reported,
          c.get_executor());
    });
  }
  // The breaker of call_script around any call: `start(reported)` makes the call, whose completion is `reported`
  // (void(error_code, reply), run on the executor), unless the breaker is open.
  template <class Handler, class Start>
  void call_guarded(Handler handler, Start start) {
    const redis::breaker_pass pass = breaker.allow(detail::steady::now());
    if (pass == redis::breaker_pass::refused) {
      boost::asio::post(ex, [handler = std::move(handler)]() mutable {
        handler(admit::asio::to_error_code(errc::circuit_open), redis::reply());
      });
      return;
    }
    auto reported = [self = shared_from_this(), pass, handler = std::move(handler)](boost::system::error_code ec,
                                                                                    redis::reply r) mutable {
      self->breaker.report(admit::asio::from_error_code(ec), pass, detail::steady::now());
      handler(ec, std::move(r));
    };
    start(std::move(reported));
  }
};

}  // namespace admit::serve
