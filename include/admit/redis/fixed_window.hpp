// admit/redis/fixed_window.hpp — a fixed window counter whose state lives in Redis, shared by every process that uses
// the same name: the distributed form of admit::fixed_window (<admit/fixed_window.hpp>), returning the same
// admit::decision values. The cheapest distributed limiter, and the one with the boundary burst.
//
//   admit::redis::fixed_window limiter(conn, "export", 1000, std::chrono::hours(1));   // 1000 per clock hour
//   if (auto r = limiter.decide(account); !r.decision) reply_429(r.decision.retry_after);   // until the next hour
//
// How it works. src/redis/lua/fixed_window.lua decides each request atomically on the server, with Redis TIME (never
// a client's clock). Windows are aligned on the Unix epoch: [j·window, (j+1)·window) in microseconds (a one-hour
// window starts on whole UTC hours). The key holds one string "start:window:count"; an admission rewrites it with an
// expiry at the end of its window (rounded up to the millisecond), when the count stops carrying information. A
// refusal writes nothing. One round trip per decision: a hot key cannot livelock.
//
// Bound — read this before choosing it. Each aligned window admits at most `limit`, exactly. An interval of one window
// length that straddles a boundary can hold up to 2·limit: `limit` at the end of one window and `limit` more at the
// start of the next, possibly within microseconds. When that matters, use sliding_window.hpp (at most 2·limit − 1
// in any window-long interval and no burst of 2·limit in a moment) or sliding_log.hpp (at most `limit` in any
// window-long interval, exactly).
//
// Units and rounding. The window is rounded up to whole microseconds (window()). Every decision equals
// admit::fixed_window's decide_at (constructed with window()) at the server's time, on a clock whose epoch is the
// Unix epoch: admitted, limit, remaining, retry_after and reset_after exactly (whole microseconds).
//
// Changing limit or window. A fixed_window constructed with the same name and a new limit keeps the current window's
// count (a lower limit refuses for the rest of the window, a higher one admits the difference). With a new window
// length the count is kept if the window it was counted in ended after the current window began (it then counts
// against the current window), and forgotten otherwise.
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

// A distributed fixed window counter: at most `limit` requests per aligned `window` per key.
//
// Edge cases: n == 0 is admitted and writes nothing (it reports remaining and reset_after); n > limit is refused with
// retry_after == nanoseconds::max() (decision::exceeds_capacity()). A refused request's retry_after is the time to the
// next window. A server clock that goes back into an earlier window counts against the newest window written (as the
// local limiter): it never reopens a past window. Keys are binary-safe.
class fixed_window final : public limiter {
 public:
  // The largest limit and window: the script's integers must stay exact in doubles.
  static constexpr std::int64_t max_limit = std::int64_t{1} << 51;
  static constexpr std::chrono::microseconds max_window{std::int64_t{1} << 51};

  // Throws std::invalid_argument naming the bad value: name empty or containing '{' or '}'; limit not in
  // [1, max_limit]; window <= 0 or above max_window; invalid options (limiter_options.hpp).
  fixed_window(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
               limiter_options options = {});

  // The window actually enforced: rounded up to whole microseconds.
  [[nodiscard]] std::chrono::microseconds window() const noexcept { return window_; }

 private:
  fixed_window(client& c, std::string name, std::int64_t limit, limiter_options options,
               std::chrono::microseconds window);

  std::chrono::microseconds window_;
};

}  // namespace admit::redis
