// Leases' automatic renewal. Each lease is renewed lease_ttl / 3 after its grant or last renewal while its lease object
// holds it (when: renewal_schedule.hpp, one timer per semaphore object); renewals that fall due together are sent
// together (pipelined on the connection). A renewal Redis answers "unknown" (or failures
// until the lease must have expired) marks the lease lost; while renewals fail, they are tried again sooner and sooner
// (retry_after_failed_renewal: a failover's new master is found within the lease), the last at the lease's local
// expiry, which waits no longer, so the loss is found then.
#include <algorithm>
#include <boost/asio/post.hpp>

#include "core.hpp"

namespace admit::redis::detail {

lease_core::lease_core(std::shared_ptr<semaphore_core> owner, std::string id, std::int64_t n, std::int64_t token,
                       std::int64_t expiry_us, steady::time_point local_expiry_at,
                       std::optional<std::int64_t> available)
    : lease_core(std::move(owner), std::move(id), n, token, expiry_us, local_expiry_at, available, false) {}

lease_core::lease_core(std::shared_ptr<semaphore_core> owner, std::string id, std::int64_t n, local_grant)
    : lease_core(std::move(owner), std::move(id), n, 0, 0, steady::now(), std::nullopt, true) {}

lease_core::lease_core(std::shared_ptr<semaphore_core> owner, std::string id, std::int64_t n, std::int64_t token,
                       std::int64_t expiry_us, steady::time_point local_expiry_at,
                       std::optional<std::int64_t> available, bool local)
    : owner_(std::move(owner)),
      id_(std::move(id)),
      n_(n),
      token_(token),
      local_(local),
      available_(available),
      expires_us_(expiry_us),
      local_expiry_(local_expiry_at.time_since_epoch().count()) {
  owner_->gauges().lease_begins(n_);
}

lease_state lease_core::mark_released() noexcept {
  const lease_state before = state_.exchange(lease_state::released);
  if (before == lease_state::held) owner_->gauges().lease_ends(n_);
  return before;
}

void lease_core::mark_lost() {
  lease_state expected = lease_state::held;
  if (!state_.compare_exchange_strong(expected, lease_state::lost)) return;
  owner_->gauges().lease_ends(n_);
  owner_->gauges().lease_lost();
  if (owner_->options().on_lease_lost) owner_->options().on_lease_lost(id_, token_);
}

void lease_core::renewed(std::int64_t expiry_us, steady::time_point sent) {
  expires_us_.store(expiry_us, std::memory_order_relaxed);
  local_expiry_.store((sent + owner_->options().lease_ttl).time_since_epoch().count(), std::memory_order_relaxed);
}

void semaphore_core::schedule_renewal(const std::shared_ptr<lease_core>& l, steady::time_point due) {
  // A lease released since is not scheduled again. (Released between this check and the schedule, it falls due once
  // and is skipped: renew() checks again.)
  if (l->state() == lease_state::held) renewals_->schedule(l, due);
}

void lease_core::renew() {
  if (state() != lease_state::held) return;
  const auto& o = owner_->options();
  const auto every = std::max<steady::duration>(o.lease_ttl / 3, std::chrono::milliseconds(1));
  const auto sent = steady::now();
  // Never waited for past the lease's local expiry: a renewal that has no answer by then finds the lease lost at that
  // moment (not a call timeout later), so the holder can stop before Redis grants the permits again. So it is a call
  // of its own: batched, it could wait behind other calls and share their later deadline.
  owner_->async_command_alone(
      {"renew", id_, std::to_string(to_us(o.lease_ttl))}, owner_->call_deadline(local_expiry()),
      [l = shared_from_this(), sent, every](boost::system::error_code e, reply r) {
        if (l->state() != lease_state::held) return;
        const auto v = e ? std::nullopt : integers(r, 2);
        const steady::time_point until = l->local_expiry();
        if (v && (*v)[0] == granted) {
          l->renewed((*v)[1], sent);
          return l->owner_->schedule_renewal(l, std::min(steady::now() + every, l->local_expiry()));
        }
        if (v && (*v)[0] == unknown) return l->mark_lost();
        if (steady::now() >= until) return l->mark_lost();  // failed until it must have expired
        // Failed (no answer, or an error reply): tried again soon, at the latest at the local
        // expiry, where a failed try marks it lost.
        l->owner_->schedule_renewal(l, retry_after_failed_renewal<steady>(steady::now(), until, every));
      });
}

}  // namespace admit::redis::detail
