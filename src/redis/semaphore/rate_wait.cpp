// admit::redis::rate_limiter's waits (rate_limiter.hpp): for each key, a queue of the admission's script with no
// concurrency limit and the limiter's rate, whose state is the limiter's own key (semaphore.lua's rate_key), so that
// waits and decide() spend one budget. A wait is a semaphore_core of its own for the one call: no wake-up loop (a
// waiter held back by the rate asks again at its tokens' time, which its reply names), no renewal; its grant's queue
// entry — a lease of n of the unlimited permits — is given back in the background as soon as it is granted.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "admit/detail/check_n.hpp"
#include "admit/errc.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/rate_limiter.hpp"
#include "core.hpp"
#include "hash_tag.hpp"

namespace admit::redis {

wait_result rate_limiter::wait(std::string_view key, std::int64_t n, std::optional<clock::time_point> deadline,
                               std::stop_token stop) const {
  admit::detail::check_n("admit::redis::rate_limiter", n);
  if (n == 0 || interval_.count() == 0) return {};  // a query, or rate inf: nothing to wait for
  if (n > burst()) return make_error_code(errc::exceeds_capacity);
  if (stop.stop_requested()) return make_error_code(errc::cancelled);

  semaphore_options o;
  // The limiter's call timeout, in whole milliseconds (at least one).
  o.timeout = std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(options().timeout));
  o.lease_ttl = 3 * o.poll_interval + o.timeout;  // outlives the poll of a waiter granted by another's call
  o.auto_renew = false;
  o.on_failure = failure_policy::fail_closed;  // a wait is never decided by a failure policy: the error is returned
  o.idle_ttl = std::chrono::seconds(10);
  std::string prefix = detail::hash_tag(name()) + "|q:";
  prefix.append(key);
  prefix += ':';
  const std::string definition = std::to_string(admission::unlimited_capacity) + "/" +
                                 std::to_string(interval_.count()) + "/" + std::to_string(burst()) + "@" + state_;
  auto core =
      std::make_shared<detail::semaphore_core>(redis_client(), nullptr, std::function<void()>{}, name(), definition, o,
                                               std::vector<std::string>{prefix + "waiters", storage_key(key)}, prefix);
  // A deadline already passed does not wait, as the local bucket's: admitted now (nobody waiting first) or timeout.
  const bool now_only = deadline && *deadline <= clock::now();
  semaphore_result r = now_only ? core->try_acquire(n) : core->acquire(n, deadline, stop);
  core->close();
  if (!r && now_only && r.error() == errc::would_block) return make_error_code(errc::timeout);
  if (!r) return r.error();
  // The tokens are spent for good; the unlimited permits go back. (If that release is lost, the entry expires at
  // lease_ttl: it holds nothing anyone waits for.)
  if (std::string id = r.value().detach(); !id.empty()) core->release_async(id, n);
  return {};
}

}  // namespace admit::redis
