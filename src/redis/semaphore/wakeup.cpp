// The wake-up loop: while this semaphore object has waiters, one connection of its own blocks in BLMPOP on the
// object's wake list, where the script pushes each grant it makes to one of them ("id:n:token:expiry:now"), and hands
// each grant to its waiter (wake_registry). Nobody else is woken; a lost wake-up costs at most poll_interval (the
// waiters poll).
#include <boost/asio/post.hpp>
#include <cstdio>
#include <utility>

#include "admit/detail/deadline.hpp"
#include "core.hpp"

namespace admit::redis::detail {

static_assert(granted == 0, "wake_registry::parse gives a grant the script's status granted, 0");

void semaphore_core::register_waiter(const std::string& id, wake_registry::callback on_wake) {
  if (wakes_.add(id, std::move(on_wake))) {
    asio::post(waker_->get_executor(), [self = shared_from_this()] { self->waker_loop(); });
  }
}

// Runs on the connection's executor, one BLMPOP at a time, until this process has no waiters.
void semaphore_core::waker_loop() {
  if (!wakes_.keep_running(closing())) return;
  const auto wait = std::max<std::chrono::milliseconds>(options_.poll_interval, std::chrono::milliseconds(1));
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", std::chrono::duration<double>(wait).count());
  // BLMPOP ... RIGHT COUNT: every grant waiting on the list (up to 128), oldest first, in one reply — one wake-up per
  // round trip would fall behind the grants of a busy semaphore.
  waker_->async_execute_command(
      admit::detail::deadline_after<steady>(steady::now(), wait + options_.timeout),
      command{"BLMPOP", seconds, "1", wake_key_, "RIGHT", "COUNT", "128"},
      [self = shared_from_this()](boost::system::error_code ec, reply r) {
        // {key, {"id:n:token:expiry:now", ...}} (semaphore.lua), or nil after the timeout
        if (!ec && r.is_array() && r.elements().size() == 2) self->wakes_.deliver(r.elements()[1], 0);
        if (ec && !self->closing()) {
          // Redis is away: the waiters poll meanwhile; try again after a pause instead of spinning.
          self->waker_timer_.expires_after(self->options().poll_interval);
          self->waker_timer_.async_wait([self](boost::system::error_code) { self->waker_loop(); });
          return;
        }
        self->waker_loop();
      });
}

}  // namespace admit::redis::detail
