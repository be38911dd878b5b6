// admit/redis/limiter_options.hpp — how a distributed limiter behaves when Redis cannot decide: the deadline of each
// decision, the failure policy (refuse, admit, or a local limiter with a share of the rate), the circuit breaker,
// lost-state detection with its event hook, and local token leasing.
//
//   admit::redis::limiter_options o{.on_failure = admit::redis::failure_policy::local_fallback, .fallback_share =
//   0.25}; admit::redis::gcra limiter(conn, "api", admit::rate::per_second(100), 20, o);   // 25/s per key while Redis
//   is out
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <system_error>

#include "admit/redis/circuit_breaker.hpp"

namespace admit::redis {

// What a decision is when Redis could not make it (timeout, connection error, error reply, breaker open).
enum class failure_policy {
  fail_closed,     // refuse (the default): over-admission is impossible, an outage refuses everyone
  fail_open,       // admit: an outage admits everyone, nothing is limited until Redis answers again
  local_fallback,  // decide with a local limiter of this process: fallback_share of the rate and of the burst per key
};

// Something a limiter noticed, reported through limiter_options::on_event.
enum class limiter_event_kind {
  lost_state,      // Redis lost state this process had written (restart without persistence, flush, failover to a
                   // replica that lacked the latest writes): keys may admit up to one extra burst
  circuit_opened,  // consecutive failures opened the breaker: decisions go to the failure policy without calling Redis
  circuit_closed,  // a call succeeded again: decisions go back to Redis
};

struct limiter_event {
  limiter_event_kind kind;
  std::string_view limiter;  // the limiter's name
  std::string_view key;      // lost_state: the key whose reply revealed it; empty otherwise
  std::error_code error;     // circuit_opened: the failure that opened it
};

struct limiter_options {
  // The deadline of each decision, from its start, for the whole exchange (EVALSHA, and after NOSCRIPT the SCRIPT
  // LOAD and the retry). Must be > 0 and finite.
  std::chrono::nanoseconds timeout = std::chrono::milliseconds(100);
  failure_policy on_failure = failure_policy::fail_closed;
  // Batching: decisions of this limiter asked for at about the same time (the completions of one read on the
  // client's executor, other threads' calls) go to Redis together, as one script call that decides them in order at
  // one instant of the server's clock. The first decision queued schedules a flush on the client's executor; a batch
  // leaves at once when it reaches min(max_batch, 8), and the flush sends what is left as one call.
  // A call costs the server a fixed ~5 µs of dispatch and setup on top of each decision's own work, so batches raise
  // the decisions/s one Redis core can make (docs/perf/redis.md). The call's deadline is the earliest of its
  // decisions', so a decision can time out a little early (by the spread of its batch's start times), never late.
  // 1 disables batching (one call per decision; the connection still pipelines them); must be >= 1.
  std::size_t max_batch = 64;
  // retry_after of a fail_closed refusal (what a server would put in Retry-After during an outage). Must be >= 0.
  std::chrono::nanoseconds failure_retry_after = std::chrono::seconds(1);
  // local_fallback: the share of the limit this process enforces alone while Redis is out, in (0, 1] — with P
  // processes, 1/P keeps the fleet at the global limit. Applies to the rate and to the burst (at least 1).
  double fallback_share = 1.0;
  // Most keys the local fallback limiter holds (admit::keyed's max_keys; beyond it new keys are refused). >= 1.
  std::size_t fallback_max_keys = 100'000;
  // Consecutive failures that stop calling Redis, and for how long; failure_threshold 0 disables the breaker.
  circuit_breaker_options breaker{};
  // Keep the limiter's epoch key in Redis to notice lost state (a restart without persistence, a flush, a failover to
  // a lagging replica) and report it through on_event. Off by default: it adds a hash update and an expiry to every
  // admission, which cost 25-40% of the server's throughput for the GCRA script (docs/perf/redis.md).
  bool detect_lost_state = false;
  // Called on the thread that completes a decision, outside admit's locks, for each limiter_event. Must not block;
  // may be empty.
  std::function<void(const limiter_event&)> on_event{};
  // Local token leasing: when > 1, an admission takes up to `lease` tokens from Redis in the same call (never more
  // than are available, never fewer than asked) and this process spends the surplus locally, without calling Redis,
  // until it is used up or `lease_ttl` has passed (unspent tokens are then dropped: they were charged, so dropping
  // them only refuses more). The fleet can admit up to (lease − 1) × processes more than the limit in a short time
  // (leased tokens are spent later than they were charged). With leasing, a refusal is remembered too: a request at
  // least as large on the key is refused without a call until the refusal's retry_after (Redis would refuse it:
  // capacity only comes back with time) and, for gcra and token_bucket, until a whole lease has refilled after it (at
  // most a second longer) — so a refused process asks again when it can take a lease, and up to lease − 1 tokens per
  // process may wait in Redis meanwhile (they are not lost: the next request to ask takes them). Not when refusals are
  // charged (charge_refused): each must reach Redis. 0 or 1: off (the default). Must be >= 0 and, for window
  // algorithms, at most the window's limit.
  std::int64_t lease = 0;
  std::chrono::nanoseconds lease_ttl = std::chrono::milliseconds(100);
  // Most keys with leased tokens held at once (beyond it, new keys are decided without leasing). >= 1.
  std::size_t lease_max_keys = 10'000;
  // gcra and token_bucket only (other limiters throw std::invalid_argument): a refused request is charged all the
  // same, as a fixed window's INCRBY counts a hit over the limit. The key then goes into debt — more spent than the
  // burst allowed — and refuses every request, n = 0 included, until the rate has repaid it; a refusal's retry_after
  // is the time until then (never nanoseconds::max(): a request above the burst is charged too). This is the budget
  // of a cost known only afterwards (the tokens a response used): ask with n = 0 first, charge the cost after. A debt
  // is capped at 2^51 µs (71 years) of the rate. Off by default (a refusal charges nothing). The local fallback and
  // leased tokens do not charge refusals.
  bool charge_refused = false;
};

}  // namespace admit::redis
