// Leases' automatic renewal: one timer per semaphore object for all its leases, armed for the earliest renewal due.
// Each lease is renewed lease_ttl / 3 after its grant or last renewal while its lease object holds it; renewals that
// fall due together are sent together (pipelined on the connection). A renewal Redis answers "unknown" (or failures
// until the lease must have expired) marks the lease lost; while renewals fail, the last try falls due at the lease's
// local expiry and waits no longer, so the loss is found then.
#include <algorithm>
#include <boost/asio/post.hpp>

#include "core.hpp"

namespace admit::redis::detail {

lease_core::lease_core(std::shared_ptr<semaphore_core> s, std::string i, std::int64_t count, std::int64_t fence,
                       std::int64_t expiry_us, steady::time_point local_expiry_at)
    : sem(std::move(s)),
      id(std::move(i)),
      n(count),
      token(fence),
      expires_us(expiry_us),
      local_expiry(local_expiry_at.time_since_epoch().count()) {
  sem->gauges().lease_begins(n);
}

lease_state lease_core::mark_released() noexcept {
  const lease_state before = state.exchange(lease_state::released);
  if (before == lease_state::held) sem->gauges().lease_ends(n);
  return before;
}

void lease_core::mark_lost() {
  lease_state expected = lease_state::held;
  if (!state.compare_exchange_strong(expected, lease_state::lost)) return;
  sem->gauges().lease_ends(n);
  sem->gauges().lease_lost();
  if (sem->options().on_lease_lost) sem->options().on_lease_lost(id, token);
}

void lease_core::renewed(std::int64_t expiry_us, steady::time_point sent) {
  expires_us.store(expiry_us, std::memory_order_relaxed);
  local_expiry.store((sent + sem->options().lease_ttl).time_since_epoch().count(), std::memory_order_relaxed);
}

void semaphore_core::schedule_renewal(const std::shared_ptr<lease_core>& l, steady::time_point due) {
  bool rearm = false;
  {
    const admit::detail::lock_guard lock(renewal_mutex_);
    if (l->state.load() != lease_state::held) return;
    if (l->renewal) renewals_.erase(*l->renewal);
    l->renewal = renewals_.emplace(due, l);
    if (due < renewal_armed_) {
      renewal_armed_ = due;
      rearm = true;
    }
  }
  if (rearm)
    asio::post(renewal_strand_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->arm_renewals();
    });
}

void semaphore_core::unschedule_renewal(lease_core& l) {
  const admit::detail::lock_guard lock(renewal_mutex_);
  if (l.renewal) renewals_.erase(*l.renewal);
  l.renewal.reset();
}

void semaphore_core::arm_renewals() {
  steady::time_point at;
  {
    const admit::detail::lock_guard lock(renewal_mutex_);
    if (renewals_.empty()) {
      renewal_armed_ = steady::time_point::max();
      renewal_timer_.cancel();
      return;
    }
    at = renewal_armed_ = renewals_.begin()->first;
  }
  renewal_timer_.expires_at(at);
  // The timer does not keep the semaphore alive: its destruction cancels the wait.
  renewal_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->renew_due_leases();
  });
}

void semaphore_core::renew_due_leases() {
  std::vector<std::shared_ptr<lease_core>> due;
  {
    const admit::detail::lock_guard lock(renewal_mutex_);
    const auto now = steady::now();
    while (!renewals_.empty() && renewals_.begin()->first <= now) {
      if (auto l = renewals_.begin()->second.lock()) {
        l->renewal.reset();
        due.push_back(std::move(l));
      }
      renewals_.erase(renewals_.begin());
    }
    renewal_armed_ = steady::time_point::max();
  }
  const auto every = std::max<steady::duration>(options_.lease_ttl / 3, std::chrono::milliseconds(1));
  for (auto& l : due) {
    if (l->state.load() != lease_state::held) continue;
    const auto sent = steady::now();
    // Never waited for past the lease's local expiry: a renewal that has no answer by then finds the lease lost at
    // that moment (not a call timeout later), so the holder can stop before Redis grants the permits again. So it is
    // a call of its own: batched, it could wait behind other calls and share their later deadline.
    const steady::time_point expiry{steady::duration(l->local_expiry.load())};
    async_command_alone({"renew", l->id, std::to_string(to_us(options_.lease_ttl))}, call_deadline(expiry),
                        [l, sent, every](boost::system::error_code e, reply r) {
                          if (l->state.load() != lease_state::held) return;
                          const auto v = e ? std::nullopt : integers(r, 2);
                          if (v && (*v)[0] == granted) {
                            l->renewed((*v)[1], sent);
                          } else if (v && (*v)[0] == unknown) {
                            return l->mark_lost();
                          } else if (steady::now().time_since_epoch().count() >= l->local_expiry.load()) {
                            return l->mark_lost();  // renewals failed until the lease must have expired
                          }
                          // The next try, at the latest at the local expiry (where a failed one marks it lost).
                          const steady::time_point until{steady::duration(l->local_expiry.load())};
                          l->sem->schedule_renewal(l, std::min(steady::now() + every, until));
                        });
  }
  arm_renewals();
}

}  // namespace admit::redis::detail
