// admit/redis/gcra.hpp — a GCRA rate limiter whose state lives in Redis, shared by every process that uses the same
// name: the distributed form of admit::gcra (<admit/gcra.hpp>), returning the same admit::decision values. The
// default distributed algorithm: one key per limited key, one small value, exact.
//
//   admit::redis::gcra limiter(conn, "api", admit::rate::per_second(100), 20);   // 100/s per key, bursts of 20
//   if (auto r = limiter.decide("user:42"); !r.decision) reply_429(r.decision.retry_after);
//
// How it works. src/redis/lua/gcra.lua decides each request atomically on the server: it reads the time with Redis
// TIME (never a client's clock), reads the key's TAT (theoretical arrival time, integer microseconds since the Unix
// epoch), and on an admission writes the new TAT with an expiry at TAT, the moment the limiter is full again and the
// key stops carrying information. A refusal writes nothing. One round trip per decision, no compare-and-swap loop: a
// hot key cannot livelock; concurrent callers are serialized by Redis and pipelined by the connection. Rate and burst
// travel as script arguments: a gcra constructed with the same name and new limits continues from the stored TAT
// (time already charged stays charged; remaining is recomputed with the new burst and interval).
//
// Units and rounding. The emission interval T = 1/rate is rounded up to whole microseconds (the script's unit; see
// common.lua for why not nanoseconds): the enforced rate is 1/ceil_us(T), slower than asked by less than 1 µs per
// request (under 0.1% for rates up to 1,000/s; rates above 1,000,000/s behave as 1,000,000/s). With that interval and
// the server's TIME, every decision equals admit::gcra's decide_at at the same time: the same admitted, limit,
// remaining, retry_after and reset_after, the durations being whole microseconds.
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

// A distributed GCRA: rate r per key, bursts of up to `burst`.
//
// Edge cases: n == 0 is admitted and writes nothing (it reports remaining and reset_after); n > burst is refused with
// retry_after == nanoseconds::max() (decision::exceeds_capacity(), as admit::gcra's oversize_policy::reject; the debt
// policy is not offered). rate::inf() admits everything without calling Redis (decided_by::unlimited). Keys are
// binary-safe. With limiter_options::charge_refused, refusals are charged and may put a key in debt, during which
// n == 0 is refused too.
class gcra final : public rate_limiter {
 public:
  // Throws std::invalid_argument naming the bad value: name empty or containing '{' or '}'; rate zero (a quota that
  // never refills would keep its key forever: use a counter); burst < 1; burst·T above 2^51 µs (~71 years: the
  // script's arithmetic must stay exact in doubles); invalid options (limiter_options.hpp).
  gcra(client& c, std::string name, rate r, std::int64_t burst, limiter_options options = {});

  // The emission interval actually enforced: 1/rate rounded up to whole microseconds (0 for rate inf).
  [[nodiscard]] std::chrono::microseconds emission_interval() const noexcept { return interval_; }

 private:
  gcra(client& c, std::string name, rate r, std::int64_t burst, limiter_options options, std::chrono::microseconds t);
};

}  // namespace admit::redis
