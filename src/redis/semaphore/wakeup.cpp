// The wake-up loop: while this semaphore object has waiters, one connection of its own blocks in BLMPOP on the
// object's wake list, where the script pushes each grant it makes to one of them ("id:n:token:expiry:now"), and hands
// each grant to its waiter. Nobody else is woken; a lost wake-up costs at most poll_interval (the waiters poll).
#include <boost/asio/post.hpp>
#include <cstdio>
#include <cstdlib>

#include "core.hpp"

#include "admit/detail/deadline.hpp"
namespace admit::redis::detail {

void semaphore_core::register_waiter(const std::string& id, std::function<void(const grant_reply&)> on_wake) {
  bool start = false;
  {
    const admit::detail::lock_guard lock(wake_mutex_);
    waiters_[id] = std::move(on_wake);
    if (!waker_running_) start = waker_running_ = true;
  }
  if (start) asio::post(waker_->get_executor(), [self = shared_from_this()] { self->waker_loop(); });
}

void semaphore_core::unregister_waiter(const std::string& id) {
  const admit::detail::lock_guard lock(wake_mutex_);
  waiters_.erase(id);
}

namespace {

// "id:n:token:expiry:now" -> {0, n, token, expiry, now}; empty when unreadable.
semaphore_core::grant_reply parse_grant(const std::string& text) {
  semaphore_core::grant_reply grant{granted};
  for (std::size_t at = text.find(':'); at != std::string::npos && grant.size() < 5; at = text.find(':', at + 1)) {
    grant.push_back(std::strtoll(text.c_str() + at + 1, nullptr, 10));
  }
  if (grant.size() != 5) grant.clear();
  return grant;
}

}  // namespace

void semaphore_core::dispatch_locked(const reply& grants, std::size_t from) {
  if (!grants.is_array()) return;
  const auto& e = grants.elements();
  for (std::size_t i = from; i < e.size(); ++i) {
    if (!e[i].is_string()) continue;
    const std::string& text = e[i].str();
    // A grant nobody here waits for any more (given up meanwhile) stays a lease in Redis: the waiter's leave-queue
    // call finds it and releases it.
    if (auto it = waiters_.find(text.substr(0, text.find(':'))); it != waiters_.end()) it->second(parse_grant(text));
  }
}

void semaphore_core::deliver_grants(const reply& r, std::size_t from) {
  if (!r.is_array() || r.elements().size() <= from) return;
  const admit::detail::lock_guard lock(wake_mutex_);
  dispatch_locked(r, from);
}

// Runs on the connection's executor, one BLMPOP at a time, until this process has no waiters.
void semaphore_core::waker_loop() {
  {
    const admit::detail::lock_guard lock(wake_mutex_);
    if (waiters_.empty() || closing) {
      waker_running_ = false;
      return;
    }
  }
  const auto wait = std::max<std::chrono::milliseconds>(options.poll_interval, std::chrono::milliseconds(1));
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", std::chrono::duration<double>(wait).count());
  // BLMPOP ... RIGHT COUNT: every grant waiting on the list (up to 128), oldest first, in one reply — one wake-up per
  // round trip would fall behind the grants of a busy semaphore.
  waker_->async_execute_command(
      admit::detail::deadline_after<steady>(steady::now(), wait + options.timeout),
      command{"BLMPOP", seconds, "1", wake_key, "RIGHT", "COUNT", "128"},
      [self = shared_from_this()](boost::system::error_code ec, reply r) {
        // {key, {"id:n:token:expiry:now", ...}} (semaphore.lua), or nil after the timeout
        if (!ec && r.is_array() && r.elements().size() == 2 && r.elements()[1].is_array()) {
          const admit::detail::lock_guard lock(self->wake_mutex_);
          self->dispatch_locked(r.elements()[1], 0);
        }
        if (ec && !self->closing) {
          // Redis is away: the waiters poll meanwhile; try again after a pause instead of spinning.
          self->waker_timer_.expires_after(self->options.poll_interval);
          self->waker_timer_.async_wait([self](boost::system::error_code) { self->waker_loop(); });
          return;
        }
        self->waker_loop();
      });
}

}  // namespace admit::redis::detail
