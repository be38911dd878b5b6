// admit/redis/sliding_log.hpp — a sliding log whose state lives in Redis, shared by every process that uses the same
// name: the distributed form of admit::sliding_log (<admit/sliding_log.hpp>), returning the same admit::decision
// values. Exact: never more than `limit` requests in any window-long interval, at the price of one sorted-set member
// per admitted unit.
//
//   admit::redis::sliding_log limiter(conn, "sms", 5, std::chrono::minutes(10));   // never 6 in any 10 minutes
//   if (auto r = limiter.decide(phone_number); !r.decision) reply_429(r.decision.retry_after);
//
// How it works. src/redis/lua/sliding_log.lua decides each request atomically on the server, with Redis TIME (never
// a client's clock). The key is a sorted set with one member per admitted unit (a request of n adds n members; a
// weight per member would make the "n-th oldest" lookup a scan), scored with the time it was recorded at and named
// "<time>:<sequence>" — unique across all callers without randomness, as the script numbers the members recorded in
// the same microsecond. n is admitted at `now` iff the members in (now − window, now] plus n are at most `limit`. An
// admission removes the members that have left the window, adds its own, and sets the key's expiry to the moment its
// newest member leaves the window (rounded up to the millisecond); a refusal only counts (ZCOUNT, ZRANGE) and writes
// nothing. One round trip per decision: a hot key cannot livelock.
//
// Bound and cost. Every interval of one window length holds at most `limit` admitted requests (of server times).
// The set holds at most `limit` members after every admission: memory is bounded by the limit, not by the traffic
// (about 60–90 bytes per member in Redis). A decision costs O(log limit) on the server, plus O(n) for an admission
// of n.
//
// Units and rounding. The window is rounded up to whole microseconds (window()). Every decision equals
// admit::sliding_log's decide_at (constructed with window()) at the server's time: admitted, limit, remaining,
// retry_after and reset_after exactly (whole microseconds).
//
// Changing limit or window. The members carry absolute times, so a new window simply changes which of them are in
// the window. A new limit applies to the same members: a lower one refuses until enough have left the window (the
// set keeps up to the old limit members meanwhile), a higher one admits the difference.
//
// Everything else — deadlines, failure policies, the circuit breaker, lost-state detection, leasing, thread safety —
// is limiter.hpp's.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "admit/redis/client/client.hpp"
#include "admit/redis/limiter.hpp"

namespace admit::redis {

// A distributed sliding log: at most `limit` requests in any `window` per key, exactly.
//
// Edge cases: n == 0 is admitted and writes nothing (it reports remaining and reset_after); n > limit is refused with
// retry_after == nanoseconds::max() (decision::exceeds_capacity()). A server clock that goes back records new members
// at the newest recorded time (as the local limiter), so the log stays in order and never over-admits. Keys are
// binary-safe.
class sliding_log final : public limiter {
 public:
  // The largest limit (the local admit::sliding_log's; the set holds up to this many members per key).
  static constexpr std::int64_t max_limit = (std::int64_t{1} << 24) - 1;
  // The longest window: the script's times must stay exact in doubles.
  static constexpr std::chrono::microseconds max_window{std::int64_t{1} << 51};

  // Throws std::invalid_argument naming the bad value: name empty or containing '{' or '}'; limit not in
  // [1, max_limit]; window <= 0 or above max_window; invalid options (limiter_options.hpp).
  sliding_log(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
              limiter_options options = {});

  // The window actually enforced: rounded up to whole microseconds.
  [[nodiscard]] std::chrono::microseconds window() const noexcept { return window_; }

 private:
  sliding_log(client& c, std::string name, std::int64_t limit, limiter_options options,
              std::chrono::microseconds window);

  std::chrono::microseconds window_;
};

}  // namespace admit::redis
