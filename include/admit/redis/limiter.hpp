// admit/redis/limiter.hpp — what every distributed rate limiter is (admit::redis::gcra, token_bucket, fixed_window,
// sliding_window, sliding_log): a name, a Lua script that decides atomically on the server, and the same
// admit::decision values as the local limiters; with a deadline on every decision, a failure policy, a circuit
// breaker, lost-state detection and optional local token leasing (limiter_options.hpp).
//
//   admit::redis::limiter& l = gcra_limiter;   // any algorithm: the middleware and the command line take a limiter&
//   if (auto r = l.decide("user:42"); !r.decision) reply_429(r.decision.retry_after);
//
// Storage. The state of `decide(key)` is the Redis key "{name}:key"; the limiter's epoch (lost-state detection) is
// "{name}". Every key of one limiter shares the hash tag {name}, so a Redis Cluster keeps them in one slot.
//
// A decision, in order: rate inf admits without a call; a key with enough leased tokens spends them without a call;
// an open circuit breaker answers by the failure policy without a call; otherwise the script runs, within
// options().timeout. A timeout or a lost connection leaves it unknown whether the script ran (and charged the
// request); it is never retried.
//
// Metrics (opt-in, enable_metrics): every decide, async_decide and async_decide_detailed counts exactly one
// admit::acquire_outcome in an admit::limiter_metrics kept in the state the limiter shares with its copies (copies,
// and slices to limiter&, count together):
//   admitted          admitted without an error: by Redis, from a lease, or for rate inf
//   unavailable       refused by Redis: not enough tokens now
//   exceeds_capacity  refused by Redis because n is above the limit (retry_after == nanoseconds::max())
//   timeout           limiter_result::error is errc::timeout (options().timeout passed)
//   cancelled         errc::cancelled (an Asio cancellation)
//   closed            errc::closed (the client was closed)
//   failed            any other error: a lost connection, outcome_unknown, an error or unexpected reply, an open
//                     circuit breaker.
// An outcome other than admitted, unavailable and exceeds_capacity means Redis did not decide, whatever the failure
// policy then answered: a fail_open admission during an outage counts as failed (or timeout, ...), not as admitted,
// so that an outage shows in the metrics under every policy; the policy's answer is in limiter_result (and
// statistics().failures counts these decisions too). The wait of a decision is its latency, from the call until its
// outcome is known (for the async forms, just before the completion handler is dispatched): the wait histogram is
// the latency of the admissions; decisions made without a Redis call (rate inf, a lease, an open breaker) count a
// wait of 0, so `waited` counts the admissions Redis made. The event hook (limiter_metrics.hpp) runs once per
// decision: for a blocking decide and for a decision made without a call, on the calling thread (what it throws
// reaches the caller); for an asynchronous decision that called Redis, on the client's executor before the
// completion — there it must not throw (the exception would leave the executor's run() and the completion be lost).
//
// Thread safety: every member may be called concurrently from any thread (the blocking ones not from a thread that
// runs the client's executor). The client must outlive the limiter and its operations in flight (operations in flight
// keep the limiter's shared state alive themselves).
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "admit/asio/error_code.hpp"
#include "admit/decision.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/rate.hpp"
#include "admit/redis/circuit_breaker.hpp"
#include "admit/redis/client/client.hpp"
#include "admit/redis/client/command.hpp"
#include "admit/redis/client/detail/request.hpp"
#include "admit/redis/client/reply.hpp"
#include "admit/redis/client/script.hpp"
#include "admit/redis/limiter_options.hpp"
#include "admit/redis/limiter_result.hpp"

namespace admit::redis {

namespace detail {

// What an algorithm gives the shared machinery (see src/redis/lua/common.lua for the scripts' calling convention).
struct limiter_algorithm {
  const script* lua = nullptr;
  std::vector<std::string> params;  // ARGV[2..]: the script's parameters
  // The script's third parameter says whether refused requests are charged (limiter_options::charge_refused): gcra
  // and token_bucket. params then holds "0", which make_limiter_core turns into "1" when the option is set.
  bool charges_refused = false;
  // Rate algorithms: the µs one token takes to refill (a remembered refusal lasts until a whole lease has refilled);
  // 0 for the windows.
  std::int64_t refill_us = 0;
  std::int64_t limit = 1;  // decision.limit: the burst or the window's limit
  std::int64_t max_n = 1;  // the largest n that can ever be admitted (larger: exceeds_capacity at once)
  bool inf = false;        // rate inf: admit everything without Redis
  // The local equivalent at full share, for failure_policy::local_fallback: a GCRA of this rate and burst per key.
  rate fallback_rate = rate::inf();
  std::int64_t fallback_burst = 1;
};

// What `before` decided: done (no call), or the call to make.
struct limiter_plan {
  std::optional<limiter_result> done;
  std::int64_t k = 0;  // ARGV[2]: the most the script may take
  breaker_pass pass = breaker_pass::call;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::chrono::steady_clock::time_point start{};  // when the decision started (set when a call is to be made)
};

// What a limiter is, fixed at construction (read by any thread without a lock).
struct limiter_identity {
  std::string name;
  std::string prefix;  // "{name}:": state keys are prefix + key; the epoch key is "{name}"
  limiter_options options;
  std::int64_t limit = 1;  // decision.limit
};

// The state shared by a limiter and its operations in flight: the batcher, the token leases, the epoch tracker and
// the failure handler (src/redis/limiter/). Defined in src/redis/limiter/limiter.cpp.
class limiter_core;
// Validates (std::invalid_argument naming the bad value: "admit::redis::<algorithm>: ...") and builds.
std::shared_ptr<limiter_core> make_limiter_core(std::string_view algorithm, std::string name, limiter_algorithm algo,
                                                limiter_options options);
// A decision's first step: decided without a call (rate inf, a lease, an open breaker), or the call to make.
limiter_plan limiter_before(limiter_core& core, std::string_view key, std::int64_t n);
// Hands the script call of a decision (plan.k, plan.deadline) to the limiter's batcher, which sends it through `conn`
// alone or with others (see limiter_options::max_batch) and completes `req` with the decision's own reply (the shape
// of one decision: {admitted, granted, remaining, retry_after_us, reset_after_us, now_us, epoch_id, epoch_seq}), an
// error, or not at all when something else completed `req` first (its deadline, a cancellation). A request completed
// before its batch leaves is never sent.
void limiter_submit(const std::shared_ptr<limiter_core>& core, client& conn, std::shared_ptr<request_base> req,
                    std::string_view key, std::int64_t n, const limiter_plan& plan);
// A decision's last step: the call's outcome read as a decision (or the failure policy's).
limiter_result limiter_after(limiter_core& core, std::string_view key, std::int64_t n, const limiter_plan& plan,
                             const boost::system::error_code& ec, const reply& r);
const limiter_identity& limiter_identity_of(const limiter_core& core) noexcept;
limiter_statistics limiter_get_statistics(const limiter_core& core) noexcept;
// Metrics (see limiter::enable_metrics): installs them once; the snapshot (zero when not enabled); the waits.
void limiter_enable_metrics(limiter_core& core, limiter_metrics::event_handler on_event);
limiter_snapshot limiter_get_metrics(const limiter_core& core) noexcept;
const wait_histogram& limiter_wait_times(const limiter_core& core) noexcept;
breaker_state limiter_breaker_state(const limiter_core& core) noexcept;

// The asynchronous decision. Detailed completes with (limiter_result), otherwise with (error_code, decision).
template <bool Detailed>
struct limiter_op {
  client* conn;
  std::shared_ptr<limiter_core> core;
  std::string key;
  std::int64_t n;
  limiter_plan plan{};
  bool started = false;

  template <class Self>
  void operator()(Self& self) {
    if (started) return finish(self, std::move(*plan.done));  // decided without a call, after the post below
    started = true;
    plan = limiter_before(*core, key, n);
    if (plan.done) {
      // Complete through the handler's executor, never inside the initiating call.
      boost::asio::post(std::move(self));
      return;
    }
    // The request owns `self` (and so this object) from here on: copy what the submission needs first.
    const std::shared_ptr<limiter_core> c = core;
    const std::string k = key;
    const std::int64_t cost = n;
    const limiter_plan p = plan;
    auto req = std::make_shared<async_request<std::decay_t<Self>>>(std::move(self), conn->get_executor());
    req->attach_cancellation();
    limiter_submit(c, *conn, std::move(req), k, cost, p);
  }

  template <class Self>
  void operator()(Self& self, boost::system::error_code ec, reply r) {
    finish(self, limiter_after(*core, key, n, plan, ec, r));
  }

  template <class Self>
  static void finish(Self& self, limiter_result result) {
    if constexpr (Detailed) {
      self.complete(std::move(result));
    } else {
      self.complete(admit::asio::to_error_code(result.error), result.decision);
    }
  }
};

}  // namespace detail

class limiter {
 public:
  virtual ~limiter() = default;

  // Blocking: decides n for `key` within options().timeout (see limiter_result for the outcomes). Must not be called
  // on a thread that runs the client's executor. n == 0 is a query (admitted, writes nothing); a negative n
  // throws std::invalid_argument in every build (so do the async forms, in the initiating call); n above the limit is
  // refused with retry_after == nanoseconds::max().
  [[nodiscard]] limiter_result decide(std::string_view key, std::int64_t n = 1) const;

  // Asynchronous: completion void(error_code, admit::decision). With an error the decision is the failure policy's
  // (with use_awaitable, wrap it in as_tuple: otherwise the error becomes an exception and the decision is lost). The
  // handler runs on its associated executor (the client's by default), never inside this call. Cancellation:
  // terminal, through the handler's slot: completes with operation_aborted (async_decide_detailed: errc::cancelled in
  // limiter_result::error) and the policy's decision (the script may still run on the server).
  template <class CompletionToken>
  auto async_decide(std::string_view key, std::int64_t n, CompletionToken&& token) const {
    return initiate<false, void(boost::system::error_code, admit::decision)>(key, n,
                                                                             std::forward<CompletionToken>(token));
  }
  // The same, completing with the whole result: void(limiter_result).
  template <class CompletionToken>
  auto async_decide_detailed(std::string_view key, std::int64_t n, CompletionToken&& token) const {
    return initiate<true, void(limiter_result)>(key, n, std::forward<CompletionToken>(token));
  }

  // The Redis key that holds the state of `key`: "{name}:key".
  [[nodiscard]] std::string storage_key(std::string_view key) const {
    std::string k = identity().prefix;
    k.append(key);
    return k;
  }
  // The Redis key of the limiter's epoch (lost-state detection): "{name}".
  [[nodiscard]] std::string epoch_key() const {
    std::string k = identity().prefix;
    k.pop_back();  // "{name}:" without the ':'
    return k;
  }

  [[nodiscard]] const std::string& name() const noexcept { return identity().name; }
  [[nodiscard]] const limiter_options& options() const noexcept { return identity().options; }
  // decision.limit: the burst, or the window's limit.
  [[nodiscard]] std::int64_t limit() const noexcept { return identity().limit; }
  [[nodiscard]] limiter_statistics statistics() const noexcept { return detail::limiter_get_statistics(*core_); }
  [[nodiscard]] breaker_state circuit_state() const noexcept { return detail::limiter_breaker_state(*core_); }

  // Starts counting decisions (see "Metrics" above) in the state this limiter shares with its copies, calling
  // `on_event` (if not empty) once per decision. Calling it again (on this limiter or a copy) starts the counters
  // from zero with the new hook; the previous counters (about 16 KB) stay in memory until the limiter and its copies
  // are gone, and a decision already under way may still count there. Thread-safe: may be called while decisions
  // run (those that finish before it are not counted).
  void enable_metrics(limiter_metrics::event_handler on_event = {}) {
    detail::limiter_enable_metrics(*core_, std::move(on_event));
  }
  // The counters (all 0 before enable_metrics) of this limiter and its copies. The gauges are 0: a rate limiter has
  // no concurrency limit, holds no permits and queues nobody. Lock-free, no Redis call (about a microsecond).
  [[nodiscard]] limiter_snapshot metrics() const noexcept { return detail::limiter_get_metrics(*core_); }
  // The latencies of the admissions (empty before enable_metrics), for histogram buckets and other percentiles.
  [[nodiscard]] const wait_histogram& wait_times() const noexcept { return detail::limiter_wait_times(*core_); }

 protected:
  limiter(client& c, std::shared_ptr<detail::limiter_core> core) noexcept : client_(&c), core_(std::move(core)) {}
  limiter(const limiter&) = default;
  limiter& operator=(const limiter&) = default;
  // The client the limiter calls Redis through.
  client& redis_client() const noexcept { return *client_; }

 private:
  const detail::limiter_identity& identity() const noexcept { return detail::limiter_identity_of(*core_); }

  template <bool Detailed, class Signature, class CompletionToken>
  auto initiate(std::string_view key, std::int64_t n, CompletionToken&& token) const {
    admit::detail::check_n("admit::redis::limiter", n);
    return boost::asio::async_compose<CompletionToken, Signature>(
        detail::limiter_op<Detailed>{client_, core_, std::string(key), n}, token, client_->get_executor());
  }

  client* client_;
  std::shared_ptr<detail::limiter_core> core_;
};

}  // namespace admit::redis
