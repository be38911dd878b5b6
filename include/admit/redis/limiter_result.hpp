// admit/redis/limiter_result.hpp — one decision of a distributed limiter with how it was made: by Redis, from a local
// lease, by the failure policy (and why), or by the local fallback limiter.
//
//   admit::redis::limiter_result r = limiter.decide("user:42");
//   if (!r.decision) reply_429(r.decision.retry_after); if (r.error) log(r.error.message());
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>

#include "admit/decision.hpp"
#include "admit/errc.hpp"

namespace admit::redis {

// Who made a decision.
enum class decided_by {
  redis,           // the script ran and its reply was read
  lease,           // tokens leased earlier by this process (local token leasing)
  failure_policy,  // fail_closed or fail_open, because of `error`
  local_fallback,  // the local fallback limiter, because of `error`
  unlimited,       // rate inf: no state, no call
};

struct limiter_result {
  // The answer. A failure-policy decision: fail_closed {admitted false, remaining 0, retry_after =
  // failure_retry_after, reset_after 0}; fail_open {admitted true, remaining 0, retry_after 0, reset_after 0}; limit
  // is the limiter's. A lease decision: remaining is what this process still holds leased for the key, reset_after 0.
  admit::decision decision;
  // Empty when Redis decided (or a lease, or rate inf). Else why Redis did not: errc::timeout (the connection's
  // last_connect_error() says why, when it was down), errc::outcome_unknown (the script may have run and charged the
  // request), errc::closed, errc::cancelled when cancelled (async_decide's error_code is then Asio's
  // operation_aborted), errc::error_reply, unexpected_reply or circuit_open.
  std::error_code error;
  decided_by source = decided_by::failure_policy;
  // True when the decision is Redis's (source == decided_by::redis).
  bool consulted = false;
  // The Redis TIME the script used, in microseconds since the Unix epoch (zero when not consulted): the instant the
  // decision is about. For diagnostics and tests (replaying the local arithmetic at exactly that time).
  std::chrono::microseconds server_time{0};
  // Tokens the script took: n, or more with leasing (the surplus is leased to this process); 0 when refused.
  std::int64_t granted = 0;
  // The text of Redis's error reply for errc::error_reply; empty otherwise.
  std::string message;
};

// Counters since the limiter was created (relaxed; each exact once the limiter is quiet).
struct limiter_statistics {
  std::uint64_t decisions = 0;        // all decisions, by any source
  std::uint64_t redis = 0;            // decided by Redis
  std::uint64_t leased = 0;           // decided from a local lease without calling Redis
  std::uint64_t failures = 0;         // decided by the failure policy or the local fallback (error set)
  std::uint64_t circuit_refused = 0;  // of which the breaker was open (Redis not called)
  std::uint64_t lost_state = 0;       // lost_state events
  std::uint64_t circuit_opened = 0;   // circuit_opened events
};

}  // namespace admit::redis
