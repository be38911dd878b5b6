// Local token leasing (see lease_table.hpp).
#include "lease_table.hpp"

#include <algorithm>
#include "admit/detail/deadline.hpp"

namespace admit::redis::detail {

std::int64_t lease_table::take(std::int64_t n) const noexcept {
  if (!enabled() || n <= 0 || n > max_n_) return n;
  return std::max(n, std::min(lease_, max_n_));
}

std::optional<std::int64_t> lease_table::try_spend(std::string_view key, std::int64_t n, clock::time_point now) {
  if (!enabled() || n <= 0 || n > max_n_) return std::nullopt;
  const admit::detail::lock_guard lock(mutex_);
  const auto it = leases_.find(key);
  if (it == leases_.end()) return std::nullopt;
  if (it->second.expires <= now) {
    leases_.erase(it);
    return std::nullopt;
  }
  if (it->second.tokens < n) return std::nullopt;
  const std::int64_t left = it->second.tokens -= n;
  if (left == 0) leases_.erase(it);
  return left;
}

bool lease_table::add(std::string_view key, std::int64_t surplus, clock::time_point now) {
  // Saturated: a lease_ttl as long as nanoseconds::max() (a lease that never expires) must not overflow.
  const clock::time_point expires = admit::detail::deadline_after<clock>(now, ttl_);
  const admit::detail::lock_guard lock(mutex_);
  if (const auto it = leases_.find(key); it != leases_.end()) {
    it->second.tokens += surplus;
    it->second.expires = expires;
    return true;
  }
  if (leases_.size() >= max_keys_) {
    std::erase_if(leases_, [&](const auto& kv) { return kv.second.expires <= now; });
    if (leases_.size() >= max_keys_) return false;
  }
  leases_.emplace(std::string(key), entry{surplus, expires});
  return true;
}

void lease_table::refused(std::string_view key, std::int64_t n, clock::time_point until, clock::time_point now) {
  if (!enabled() || n <= 0 || until <= now) return;
  const admit::detail::lock_guard lock(mutex_);
  if (const auto it = refusals_.find(key); it != refusals_.end()) {
    it->second = {n, until};
    return;
  }
  if (refusals_.size() >= max_keys_) {
    if (now < next_refusal_sweep_) return;  // none has ended since the last sweep: not walked again for every key
    std::erase_if(refusals_, [&](const auto& kv) { return kv.second.until <= now; });
    next_refusal_sweep_ = clock::time_point::max();
    for (const auto& kv : refusals_) next_refusal_sweep_ = std::min(next_refusal_sweep_, kv.second.until);
    if (refusals_.size() >= max_keys_) return;
  }
  refusals_.emplace(std::string(key), refusal{n, until});
  next_refusal_sweep_ = std::min(next_refusal_sweep_, until);
}

std::optional<lease_table::clock::time_point> lease_table::refuses(std::string_view key, std::int64_t n,
                                                                   clock::time_point now) {
  if (!enabled() || n <= 0 || n > max_n_) return std::nullopt;  // above the limit: Redis says "never", not "later"
  const admit::detail::lock_guard lock(mutex_);
  const auto it = refusals_.find(key);
  if (it == refusals_.end()) return std::nullopt;
  if (it->second.until <= now) {
    refusals_.erase(it);
    return std::nullopt;
  }
  if (n < it->second.n) return std::nullopt;
  return it->second.until;
}

std::size_t lease_table::size() const {
  const admit::detail::lock_guard lock(mutex_);
  return leases_.size();
}

}  // namespace admit::redis::detail
