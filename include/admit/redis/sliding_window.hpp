// admit/redis/sliding_window.hpp — a sliding window counter whose state lives in Redis, shared by every process that
// uses the same name: the distributed form of admit::sliding_window (<admit/sliding_window.hpp>), returning the same
// admit::decision values. No 2×-limit burst at window boundaries, for two counters per key.
//
//   admit::redis::sliding_window limiter(conn, "login", 10, std::chrono::minutes(1));   // about 10 per minute
//   if (auto r = limiter.decide(client_ip); !r.decision) reply_429(r.decision.retry_after);
//
// How it works. src/redis/lua/sliding_window.lua decides each request atomically on the server, with Redis TIME
// (never a client's clock). Windows are aligned on the Unix epoch: [j·window, (j+1)·window) in microseconds. A request
// of n is admitted iff
//   previous_count · (window − elapsed) / window + current_count + n <= limit
// (the previous window's requests taken as spread evenly; exact integer arithmetic, the weighted share rounded up).
// The key holds one string "start:window:previous:current"; an admission rewrites it with an expiry at the end of the
// window after the current one (rounded up to the millisecond), when both counts have left the estimate. A refusal
// writes nothing. One round trip per decision: a hot key cannot livelock.
//
// Bound. At every instant, the current window's admissions plus the previous window's count weighted by its overlap
// with the last window length (rounded up) are at most `limit`. Hence any interval of length d <= window holds at most
// limit + floor(limit·d/window) admissions: fewer than 2·limit even over a whole window (at most 2·limit − 1, reached
// only when the previous window's requests were all at its very end), and a burst of `limit` right before a boundary
// is followed right after it by almost nothing — never by another `limit`, the fixed window's 2× in a moment. For an
// exact `limit` in every interval, use sliding_log.hpp.
//
// Units and rounding. The window is rounded up to whole microseconds (window()). Every decision equals
// admit::sliding_window's decide_at (constructed with window()) at the server's time — admitted, limit, remaining,
// reset_after exactly; retry_after is the local one rounded up to the whole microsecond (the local limiter answers to
// the nanosecond, the server's clock ticks in microseconds).
//
// Changing limit or window. A sliding_window constructed with the same name and a new limit keeps the counts (a lower
// limit refuses until they decay, a higher one admits more at once). A new window length cannot reuse the counts'
// alignment; they are carried over conservatively: all the stored requests count as the current window's if their
// window ended after the current window began, as the previous window's if it ended during the previous one, and are
// forgotten otherwise (they have left the estimate under either length).
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

// A distributed sliding window counter: about `limit` requests per `window` per key.
//
// Edge cases: n == 0 is admitted and writes nothing (it reports remaining and reset_after); n > limit is refused with
// retry_after == nanoseconds::max() (decision::exceeds_capacity()). A server clock that goes back into an earlier
// window is judged at the start of the newest window written, where the estimate is highest (as the local limiter):
// it never reopens a past window. Keys are binary-safe.
class sliding_window final : public limiter {
 public:
  // The largest limit (the local admit::sliding_window's).
  static constexpr std::int64_t max_limit = (std::int64_t{1} << 24) - 1;

  // Throws std::invalid_argument naming the bad value: name empty or containing '{' or '}'; limit not in
  // [1, max_limit]; window <= 0; limit · window above 2^51 µs·requests (the script's products must stay exact in
  // doubles: a limit of 1,000 allows windows up to ~26 days, 1,000,000 up to ~37 minutes); invalid options
  // (limiter_options.hpp).
  sliding_window(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
                 limiter_options options = {});

  // The window actually enforced: rounded up to whole microseconds.
  [[nodiscard]] std::chrono::microseconds window() const noexcept { return window_; }

 private:
  sliding_window(client& c, std::string name, std::int64_t limit, limiter_options options,
                 std::chrono::microseconds window);

  std::chrono::microseconds window_;
};

}  // namespace admit::redis
