// admit/decision.hpp — the answer a rate limiter gives: admitted or not, and what a server needs to say about it.
//
// Every local limiter (and later the distributed ones) returns this value from its `decide`/`decide_at` member, so a
// middleware or the command line can fill `Retry-After` and the `RateLimit-*` headers from any of them.
//
//   admit::decision d = bucket.decide_at(now);
//   if (!d) reply_429(d.retry_after, d.limit, d.remaining, d.reset_after);
//
// A refusal is a value, never an exception. "Not yet" (retry_after finite) and "never, at this size"
// (retry_after == nanoseconds::max(), see exceeds_capacity()) are different answers.
#pragma once

#include <chrono>
#include <cstdint>

namespace admit {

struct decision {
  // True when the request was admitted (and its tokens consumed).
  bool admitted = false;
  // The limit a client sees (the burst, or the per-window limit): `RateLimit-Limit`.
  std::int64_t limit = 0;
  // Whole requests of size 1 that would be admitted right after this decision: `RateLimit-Remaining`. Never negative.
  std::int64_t remaining = 0;
  // Zero when admitted. When refused: how long until the same request would be admitted if nothing else happened
  // (`Retry-After`); nanoseconds::max() when it never can (more tokens than the limiter can ever hold).
  std::chrono::nanoseconds retry_after{0};
  // How long until the limiter is back to its idle, full state (`RateLimit-Reset`).
  std::chrono::nanoseconds reset_after{0};

  [[nodiscard]] explicit constexpr operator bool() const noexcept { return admitted; }

  // True for a refusal that waiting cannot fix: the request is larger than the limiter's capacity.
  [[nodiscard]] constexpr bool exceeds_capacity() const noexcept {
    return !admitted && retry_after == std::chrono::nanoseconds::max();
  }

  friend constexpr bool operator==(const decision&, const decision&) noexcept = default;
};

// How a limiter treats a request larger than its burst (or window limit).
enum class oversize_policy {
  // Refuse it: it can never be served (x/time/rate, governor). The default.
  reject,
  // Admit it when the limiter is full and go into debt for the excess, which later requests wait out (Guava's
  // RateLimiter). The long-run rate still holds; the burst bound does not, for that one request.
  debt,
};

}  // namespace admit
