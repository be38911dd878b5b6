// src/redis/limiter/failure_handler.hpp — what a distributed limiter does when Redis does not decide (private to
// admit_redis): the circuit breaker that stops calling a Redis that does not answer, and the failure policy's
// decision (limiter_options::on_failure: fail_closed, fail_open, or the local fallback limiter with its share).
//
//   failure_handler h(options, algorithm);
//   if (h.allow(now) == breaker_pass::refused) return h.decide(key, n, errc::circuit_open, {}, now);
//   ... the call ends with ec ... if (h.report(ec, pass, now) == breaker_change::opened) tell(ec);
//
// Which errors count is the breaker's rule (circuit_breaker::report, is_outage). Times are passed in (steady_clock by
// the limiter), so the handler is deterministic under test.
//
// Thread safety: every member may be called concurrently (the breaker is lock-free; the fallback limiter is
// admit::keyed's, thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "admit/redis/circuit_breaker.hpp"
#include "admit/redis/limiter.hpp"
#include "admit/redis/limiter_options.hpp"
#include "admit/redis/limiter_result.hpp"

namespace admit::redis::detail {

class failure_handler {
 public:
  using clock = std::chrono::steady_clock;

  // Throws std::invalid_argument for invalid breaker options or a fallback rate local admit::gcra refuses.
  failure_handler(const limiter_options& options, const limiter_algorithm& algorithm);

  // The breaker's verdict for a call at `now` (circuit_breaker::allow).
  breaker_pass allow(clock::time_point now) noexcept { return breaker_.allow(now); }
  // A call with pass `pass` ended at `now` with ec (none: Redis answered, even with an error reply).
  breaker_change report(const std::error_code& ec, breaker_pass pass, clock::time_point now) noexcept {
    return breaker_.report(ec, pass, now);
  }
  [[nodiscard]] breaker_state state(clock::time_point now) const noexcept { return breaker_.state(now); }

  // The failure policy's decision of n for key at `now`, with ec (and an error reply's text) as the reason:
  // fail_closed refuses with failure_retry_after; fail_open admits; local_fallback asks the local GCRA of the key
  // (fallback_share of the rate and burst, at least 1), refusing n > max_n with retry_after nanoseconds::max(), and
  // admits everything for rate inf (remaining = limit). limit is the limiter's in every case.
  [[nodiscard]] limiter_result decide(std::string_view key, std::int64_t n, std::error_code ec, std::string message,
                                      clock::time_point now);

 private:
  failure_policy policy_;
  std::chrono::nanoseconds retry_after_;
  std::int64_t limit_;
  std::int64_t max_n_;
  circuit_breaker breaker_;
  std::unique_ptr<keyed<admit::gcra>> fallback_;  // local_fallback only (and not for rate inf)
};

}  // namespace admit::redis::detail
