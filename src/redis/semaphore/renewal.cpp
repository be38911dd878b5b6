// A lease's automatic renewal: every lease_ttl / 3 on the lease's strand while the lease object lives and holds it;
// a renewal Redis answers "unknown" (or failures until the lease must have expired) marks the lease lost.
#include <algorithm>
#include <boost/asio/post.hpp>

#include "core.hpp"

namespace admit::redis::detail {

lease_core::lease_core(std::shared_ptr<semaphore_core> s, std::string i, std::int64_t count, std::int64_t fence,
                       std::int64_t expiry_us, steady::time_point local)
    : sem(std::move(s)),
      id(std::move(i)),
      n(count),
      token(fence),
      expires_us(expiry_us),
      local_expiry(local.time_since_epoch().count()),
      strand(asio::make_strand(sem->link_.get_executor())),
      timer(strand) {}

void lease_core::mark_lost() {
  lease_state expected = lease_state::held;
  if (state.compare_exchange_strong(expected, lease_state::lost) && sem->options_.on_lease_lost) {
    sem->options_.on_lease_lost(id, token);
  }
}

void lease_core::renewed(std::int64_t expiry_us, steady::time_point sent) {
  expires_us.store(expiry_us, std::memory_order_relaxed);
  local_expiry.store((sent + sem->options_.lease_ttl).time_since_epoch().count(), std::memory_order_relaxed);
}

void lease_core::schedule_renewal(std::optional<steady::duration> delay) {
  asio::post(strand, [self = shared_from_this(), delay] {
    self->timer.expires_after(
        delay ? *delay : std::max<steady::duration>(self->sem->options_.lease_ttl / 3, std::chrono::milliseconds(1)));
    self->timer.async_wait([self](boost::system::error_code ec) {
      if (ec || self->state.load() != lease_state::held) return;
      const auto sent = steady::now();
      self->sem->async_command(
          self->sem->make("renew", {self->id, std::to_string(to_us(self->sem->options_.lease_ttl))}),
          self->sem->call_deadline({}), [self, sent](boost::system::error_code e, reply r) {
            if (self->state.load() != lease_state::held) return;
            const auto v = e ? std::nullopt : integers(r, 2);
            if (v && (*v)[0] == granted) {
              self->renewed((*v)[1], sent);
            } else if (v && (*v)[0] == unknown) {
              return self->mark_lost();
            } else if (steady::now().time_since_epoch().count() >= self->local_expiry.load()) {
              return self->mark_lost();  // renewals failed until the lease must have expired
            }
            self->schedule_renewal();
          });
    });
  });
}

void lease_core::stop_renewal() {
  asio::post(strand, [self = shared_from_this()] { self->timer.cancel(); });
}

}  // namespace admit::redis::detail
