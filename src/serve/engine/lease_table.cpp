#include "serve/engine/lease_table.hpp"

#include <limits>
#include <stdexcept>
#include "admit/redis/client/detail/random_id.hpp"

namespace admit::serve {

lease_table::lease_table(options opts) : opts_(opts) {
  if (opts.ttl <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("admit serve: the lease ttl must be positive, got " + std::to_string(opts.ttl.count()) +
                                "ns");
  }
  if (opts.max_leases == 0) throw std::invalid_argument("admit serve: max_leases must be at least 1, got 0");
}

std::string lease_table::held_key(std::uint64_t owner, std::string_view key) {
  std::string k = std::to_string(owner);
  k += '\0';
  k += key;
  return k;
}

void lease_table::erase(std::unordered_map<std::string, lease>::iterator it) {
  const auto h = held_.find(it->second.held_key);
  if (h != held_.end()) {
    h->second -= std::min(h->second, it->second.n);
    if (h->second == 0) held_.erase(h);
  }
  expiry_.erase(it->second.expiry);
  leases_.erase(it);
}

void lease_table::expire(std::int64_t now_ns) {
  while (!expiry_.empty() && expiry_.begin()->first <= now_ns) {
    const auto it = leases_.find(expiry_.begin()->second);
    if (it == leases_.end()) {  // cannot happen: every expiry entry has its lease
      expiry_.erase(expiry_.begin());
      continue;
    }
    erase(it);
  }
}

lease_table::acquired lease_table::try_acquire(std::uint64_t owner, std::string_view key, std::uint64_t limit,
                                               std::uint64_t n, std::int64_t now_ns) {
  acquired a;
  std::string hk = held_key(owner, key);
  std::lock_guard lock(mutex_);
  expire(now_ns);
  const auto h = held_.find(hk);
  const std::uint64_t used = h == held_.end() ? 0 : h->second;
  a.in_flight = used;
  if (n > limit || used > limit - n) return a;
  if (n == 0) {
    a.admitted = true;
    return a;
  }
  if (leases_.size() >= opts_.max_leases) {
    a.table_full = true;
    return a;
  }
  std::string id = redis::detail::random_id();
  while (leases_.contains(id)) id = redis::detail::random_id();
  const std::int64_t ttl = opts_.ttl.count();
  const std::int64_t expires =
      now_ns > std::numeric_limits<std::int64_t>::max() - ttl ? std::numeric_limits<std::int64_t>::max() : now_ns + ttl;
  const auto e = expiry_.emplace(expires, id);
  leases_.emplace(id, lease{hk, n, e});
  held_[std::move(hk)] = used + n;
  a.admitted = true;
  a.in_flight = used + n;
  a.lease = std::move(id);
  a.expires_after = opts_.ttl;
  return a;
}

bool lease_table::release(std::string_view lease_id, std::int64_t now_ns) {
  std::lock_guard lock(mutex_);
  expire(now_ns);
  const auto it = leases_.find(std::string(lease_id));
  if (it == leases_.end()) return false;
  erase(it);
  return true;
}

void lease_table::drop_owner(std::uint64_t owner) {
  const std::string prefix = held_key(owner, {});
  std::lock_guard lock(mutex_);
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.held_key.starts_with(prefix)) {
      const auto next = std::next(it);
      erase(it);
      it = next;
    } else {
      ++it;
    }
  }
}

std::size_t lease_table::size() const {
  std::lock_guard lock(mutex_);
  return leases_.size();
}

std::uint64_t lease_table::in_flight(std::uint64_t owner, std::string_view key) const {
  const std::string hk = held_key(owner, key);
  std::lock_guard lock(mutex_);
  const auto it = held_.find(hk);
  return it == held_.end() ? 0 : it->second;
}

}  // namespace admit::serve
