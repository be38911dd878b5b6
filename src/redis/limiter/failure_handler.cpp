// The circuit breaker and the failure policy (see failure_handler.hpp).
#include "failure_handler.hpp"

#include <algorithm>
#include <boost/asio/error.hpp>
#include <cmath>
#include <system_error>
#include <utility>

#include "admit/errc.hpp"
#include "admit/rate.hpp"

namespace admit::redis::detail {

failure_handler::failure_handler(const limiter_options& options, const limiter_algorithm& algorithm)
    : policy_(options.on_failure),
      retry_after_(options.failure_retry_after),
      limit_(algorithm.limit),
      max_n_(algorithm.max_n),
      breaker_(options.breaker) {
  if (policy_ == failure_policy::local_fallback && !algorithm.inf) {
    const double share = options.fallback_share;
    const auto burst = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::floor(static_cast<double>(algorithm.fallback_burst) * share)));
    keyed_options ko;
    ko.max_keys = options.fallback_max_keys;
    fallback_ =
        std::make_unique<keyed<admit::gcra>>(rate::per_second(algorithm.fallback_rate.per_second() * share), burst, ko);
  }
}

limiter_result failure_handler::decide(std::string_view key, std::int64_t n, std::error_code ec, std::string message,
                                       clock::time_point now) {
  limiter_result r;
  r.error = ec;
  r.message = std::move(message);
  r.decision.limit = limit_;
  switch (policy_) {
    case failure_policy::fail_open:
      r.source = decided_by::failure_policy;
      r.decision.admitted = true;
      break;
    case failure_policy::fail_closed:
      r.source = decided_by::failure_policy;
      r.decision.retry_after = retry_after_;
      break;
    case failure_policy::local_fallback:
      r.source = decided_by::local_fallback;
      if (!fallback_) {
        // Rate inf has no local limiter: it admits everything, as the limiter itself does (which answers it before
        // calling Redis, so it never fails; a handler used alone can still be asked).
        r.decision.admitted = true;
        r.decision.remaining = limit_;
      } else if (n > max_n_) {
        r.decision.retry_after = std::chrono::nanoseconds::max();
      } else {
        r.decision = fallback_->decide_at(key, now, n);
      }
      break;
  }
  return r;
}

}  // namespace admit::redis::detail
