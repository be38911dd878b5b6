// admit::redis::lease: a granted lease, released exactly once (release(), or the destructor). See semaphore.hpp for
// what the destructor waits for.
#include "core.hpp"

#include <boost/asio/system_executor.hpp>

namespace admit::redis {

lease::lease() noexcept = default;
lease::lease(std::shared_ptr<detail::lease_core> core) noexcept : core_(std::move(core)) {}
lease::lease(lease&&) noexcept = default;
lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    lease old(std::move(*this));  // released by its destructor
    core_ = std::move(other.core_);
  }
  return *this;
}

lease::~lease() {
  if (!core_) return;
  core_->stop_renewal();
  // A lease found lost is released too, as release() does: "lost" is this process's estimate (its renewals got no
  // answer until the lease would have expired), and Redis may still hold it if only the answers were lost.
  if (core_->mark_released() == lease_state::released) return;
  if (core_->local()) {
    core_->owner().local_released(core_->count());
  } else {
    core_->owner().release_before_return(core_->id(), core_->count());
  }
}

std::optional<std::pair<lease::release_status, std::error_code>> lease::release_locally(detail::lease_core* core) {
  if (core == nullptr) return std::pair{release_status::not_held, std::error_code()};
  core->stop_renewal();
  // A lease found lost is still asked for: Redis says whether it had it.
  const lease_state before = core->mark_released();
  if (!core->local()) return std::nullopt;
  if (before == lease_state::released) return std::pair{release_status::not_held, std::error_code()};
  core->owner().local_released(core->count());
  return std::pair{release_status::released, std::error_code()};
}

std::pair<lease::release_status, std::error_code> lease::release() {
  if (auto done = release_locally(core_.get())) return *done;
  return core_->owner().release_now(core_->id(), core_->count());
}

std::string lease::detach() {
  if (!core_) return {};
  const std::shared_ptr<detail::lease_core> core = std::move(core_);
  core->stop_renewal();
  if (core->mark_released() == lease_state::released) return {};
  if (core->local()) {  // in this process only: nobody could release it by its id
    core->owner().local_released(core->count());
    return {};
  }
  return core->id();
}

void lease::release_then(const std::shared_ptr<detail::lease_core>& core,
                         std::function<void(release_status, std::error_code)> done) {
  if (auto now = release_locally(core.get())) return done(now->first, now->second);
  // Asked again once on a lost connection, as release() does (semaphore_core::send_release).
  core->owner().release_async(core->id(), core->count(),
                              [done = std::move(done)](const detail::semaphore_core::release_answer& answer) {
                                done(answer.first, answer.second);
                              });
}

boost::asio::any_io_executor lease::executor_of(const detail::lease_core* core) {
  if (core == nullptr) return boost::asio::system_executor();
  return detail::executor_of(core->owner());
}

std::pair<bool, std::error_code> lease::renew() {
  if (!core_ || core_->state() != lease_state::held) return {false, {}};
  if (core_->local()) return {true, {}};  // not in Redis: nothing expires
  const auto sent = std::chrono::steady_clock::now();
  const result r =
      core_->owner().call(core_->owner().call_deadline({}),
                          {"renew", core_->id(), std::to_string(detail::to_us(core_->owner().options().lease_ttl))});
  if (r.error) return {false, detail::as_error(r.error)};
  const auto v = detail::integers(r.value, 2);
  if (!v) return {false, detail::script_error()};
  if ((*v)[0] != detail::granted) {
    core_->mark_lost();
    return {false, {}};
  }
  core_->renewed((*v)[1], sent);
  return {true, {}};
}

std::int64_t lease::count() const noexcept { return core_ ? core_->count() : 0; }
std::int64_t lease::fencing_token() const noexcept { return core_ ? core_->token() : 0; }
const std::string& lease::id() const noexcept {
  static const std::string none;
  return core_ ? core_->id() : none;
}
std::optional<std::int64_t> lease::available() const noexcept { return core_ ? core_->available() : std::nullopt; }
lease_state lease::state() const noexcept { return core_ ? core_->state() : lease_state::released; }
std::chrono::microseconds lease::expires_at() const noexcept {
  return std::chrono::microseconds(core_ ? core_->expires_us() : 0);
}

}  // namespace admit::redis
