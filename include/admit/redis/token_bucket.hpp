// admit/redis/token_bucket.hpp — a token bucket whose state lives in Redis, shared by every process that uses the
// same name: the distributed form of admit::token_bucket (<admit/token_bucket.hpp>), returning the same
// admit::decision values.
//
//   admit::redis::token_bucket bucket(conn, "uploads", admit::rate::per_second(50), 200);   // 50/s, bursts of 200
//   if (auto r = bucket.decide("tenant:7", bytes_in_kib); !r.decision) reply_429(r.decision.retry_after);
//
// How it works. src/redis/lua/token_bucket.lua decides each request atomically on the server: it reads the time with
// Redis TIME (never a client's clock) and the key's state, the instant at which the bucket was (or will be) empty in
// integer microseconds since the Unix epoch, so that tokens(now) = min(burst, (now − empty_at) / interval) — the
// local bucket's representation. An admission writes the new instant with an expiry at the moment the bucket is full
// again (empty_at + burst·interval, rounded up to the millisecond), when the key stops carrying information; a
// refusal writes nothing. One round trip per decision, no compare-and-swap loop: a hot key cannot livelock.
//
// Units and rounding. The refill interval 1/rate is rounded up to whole nanoseconds (as admit::token_bucket), then to
// whole microseconds (the script's unit; see common.lua): the enforced rate is 1/ceil_us(interval), slower than asked
// by under 1 µs per token (rates above 1,000,000/s behave as 1,000,000/s). With that interval and the server's TIME,
// every decision equals admit::token_bucket's decide_at at the same time, field by field, durations being whole
// microseconds.
//
// Changing rate or burst. A token_bucket constructed with the same name and new parameters continues from the stored
// empty instant: the tokens are recounted at the new interval from that instant and capped at the new burst (a faster
// rate refills the time already passed faster; nothing is reset). The local bucket's set_rate instead keeps the token
// count at the moment of the change; the two agree whenever the bucket was full or empty at that moment. The key's
// expiry was set with the old parameters: when it passes, the bucket is full under the new ones.
//
// A token bucket and a GCRA (gcra.hpp) of the same rate and burst make the same decisions; they differ in what a
// parameter change keeps (GCRA: the time already charged; the bucket: the instant it was empty).
//
// Everything else — deadlines, failure policies, the circuit breaker, lost-state detection, leasing, thread safety —
// is limiter.hpp's.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "admit/rate.hpp"
#include "admit/redis/client/client.hpp"
#include "admit/redis/rate_limiter.hpp"

namespace admit::redis {

// A distributed token bucket: `burst` tokens per key, starting full, refilling at rate r.
//
// Edge cases: n == 0 is admitted and writes nothing (it reports remaining and reset_after); n > burst is refused with
// retry_after == nanoseconds::max() (decision::exceeds_capacity(), admit::token_bucket's oversize_policy::reject; the
// debt policy and reservations are not offered). rate::inf() admits everything without calling Redis
// (decided_by::unlimited). A server clock that goes back makes the bucket hold fewer tokens (never more) until it
// catches up. Keys are binary-safe. With limiter_options::charge_refused, refusals are charged and may put a key in
// debt, during which n == 0 is refused too.
class token_bucket final : public rate_limiter {
 public:
  // Throws std::invalid_argument naming the bad value: name empty or containing '{' or '}'; rate zero (a bucket that
  // never refills would keep its key forever: use a counter); burst < 1; burst·interval above 2^51 µs (~71 years: the
  // script's arithmetic must stay exact in doubles); invalid options (limiter_options.hpp).
  token_bucket(client& c, std::string name, rate r, std::int64_t burst, limiter_options options = {});

  // The refill interval actually enforced: 1/rate rounded up to whole microseconds (0 for rate inf).
  [[nodiscard]] std::chrono::microseconds refill_interval() const noexcept { return interval_; }

 private:
  token_bucket(client& c, std::string name, rate r, std::int64_t burst, limiter_options options,
               std::chrono::microseconds interval);
};

}  // namespace admit::redis
