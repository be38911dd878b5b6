// admit/wait_result.hpp — the outcome of a rate limiter's wait: admitted, or why not.
//
//   if (auto r = bucket.try_acquire_for(50ms)) serve();
//   else if (r.error() == admit::errc::queue_full) shed();   // or timeout, cancelled, exceeds_capacity
//
// An admit::expected<void, admit::errc> (admit/expected.hpp): `if (r)` / has_value() is true when the wait admitted
// the request; error() says why not (errc{} when admitted); value() throws std::system_error carrying the error. The
// waits of token_bucket, pacer and warmup return it (the pacer's take() returns the time it let the caller through,
// as an admit::expected<time_point, errc>). The errors:
// - queue_full: max_waiters callers were already waiting; rejected at once, nothing taken.
// - timeout: the request could not be admitted by the deadline; rejected at once, nothing taken (a rate limiter
//   knows in advance when it will admit, so it never sleeps in vain).
// - cancelled: the stop_token was requested, before the call (nothing taken) or while it slept (what it had taken is
//   given back where the limiter can; see each limiter).
// - exceeds_capacity: n cannot be admitted at the limit's present capacity (above a token bucket's burst, or a zero
//   rate that cannot cover it).
#pragma once

#include "admit/errc.hpp"
#include "admit/expected.hpp"

namespace admit {

using wait_result = expected<void, errc>;

}  // namespace admit
