#include "serve/engine/lease_table.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

#include "admit/redis/client/detail/random_id.hpp"

namespace admit::serve {

lease_table::lease_table(options opts) : opts_(opts) {
  if (opts.ttl <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("admit serve: the lease ttl must be positive, got " + std::to_string(opts.ttl.count()) +
                                "ns");
  }
  if (opts.max_leases == 0) throw std::invalid_argument("admit serve: max_leases must be at least 1, got 0");
}

lease_table::held_permit lease_table::take(lease_map::iterator it) {
  held_permit p = std::move(it->second.held);
  expiry_.erase(it->second.expiry);
  leases_.erase(it);
  return p;
}

void lease_table::expire_locked(std::int64_t now_ns, std::vector<held_permit>& out) {
  while (!expiry_.empty() && expiry_.begin()->first <= now_ns) {
    const auto it = leases_.find(expiry_.begin()->second);
    if (it == leases_.end()) {  // cannot happen: every expiry entry has its lease
      expiry_.erase(expiry_.begin());
      continue;
    }
    out.push_back(take(it));
  }
}

void lease_table::expire(std::int64_t now_ns) {
  std::vector<held_permit> done;  // released at the end of the call, after the lock
  const admit::detail::lock_guard lock(mutex_);
  expire_locked(now_ns, done);
}

std::optional<std::string> lease_table::hold(std::uint64_t owner,
                                             std::shared_ptr<admit::keyed_concurrency_limiter<>> limiter, permit p,
                                             std::int64_t now_ns) {
  std::vector<held_permit> done;
  const admit::detail::lock_guard lock(mutex_);
  expire_locked(now_ns, done);
  if (leases_.size() >= opts_.max_leases) {
    done.push_back({std::move(limiter), std::move(p)});
    return std::nullopt;
  }
  std::string id = redis::detail::random_id();
  while (leases_.contains(id)) id = redis::detail::random_id();
  const std::int64_t ttl = opts_.ttl.count();
  const std::int64_t expires =
      now_ns > std::numeric_limits<std::int64_t>::max() - ttl ? std::numeric_limits<std::int64_t>::max() : now_ns + ttl;
  const auto e = expiry_.emplace(expires, id);
  leases_.emplace(id, lease{owner, {std::move(limiter), std::move(p)}, e});
  return id;
}

bool lease_table::release(std::string_view lease_id, std::int64_t now_ns) {
  std::vector<held_permit> done;
  const admit::detail::lock_guard lock(mutex_);
  expire_locked(now_ns, done);
  const auto it = leases_.find(std::string(lease_id));
  if (it == leases_.end()) return false;
  done.push_back(take(it));
  return true;
}

void lease_table::drop_owner(std::uint64_t owner) {
  std::vector<held_permit> done;
  const admit::detail::lock_guard lock(mutex_);
  for (auto it = leases_.begin(); it != leases_.end();) {
    const auto next = std::next(it);
    if (it->second.owner == owner) done.push_back(take(it));
    it = next;
  }
}

std::size_t lease_table::size() const {
  const admit::detail::lock_guard lock(mutex_);
  return leases_.size();
}

}  // namespace admit::serve
