// The waiters a grant can wake, and the BLMPOP loop that brings the grants (wake_registry.hpp).
#include "wake_registry.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <cstdio>
#include <system_error>
#include <utility>

#include "admit/detail/deadline.hpp"
#include "admit/redis/client/command.hpp"

namespace admit::redis::detail {

wake_registry::wake_registry(std::unique_ptr<client> waker, std::function<void()> close_waker, std::string wake_key,
                             std::chrono::milliseconds poll_interval, std::chrono::milliseconds timeout)
    : waker_(std::move(waker)),
      close_waker_(std::move(close_waker)),
      wake_key_(std::move(wake_key)),
      poll_interval_(std::max<std::chrono::milliseconds>(poll_interval, std::chrono::milliseconds(1))),
      timeout_(timeout) {
  if (waker_) pause_.emplace(waker_->get_executor());
}

void wake_registry::add(const std::string& id, callback on_wake) {
  {
    const admit::detail::lock_guard lock(mutex_);
    waiters_[id] = std::move(on_wake);
    if (running_ || closed_ || !waker_) return;
    running_ = true;
  }
  boost::asio::post(waker_->get_executor(), [self = shared_from_this()] { self->loop(); });
}

void wake_registry::remove(const std::string& id) {
  const admit::detail::lock_guard lock(mutex_);
  waiters_.erase(id);
}

void wake_registry::deliver(const reply& grants, std::size_t from) {
  if (!grants.is_array() || grants.elements().size() <= from) return;
  const auto& e = grants.elements();
  const admit::detail::lock_guard lock(mutex_);
  for (std::size_t i = from; i < e.size(); ++i) {
    if (!e[i].is_string()) continue;
    const std::string_view text = e[i].str();
    if (auto it = waiters_.find(text.substr(0, text.find(':'))); it != waiters_.end()) it->second(parse(text));
  }
}

void wake_registry::close() {
  {
    const admit::detail::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    // (A program that runs the executor until it runs out of work would otherwise wait for the pause to end.)
    if (pause_) pause_->cancel();
  }
  if (close_waker_) close_waker_();
}

bool wake_registry::keep_running() {
  const admit::detail::lock_guard lock(mutex_);
  return keep_running_locked();
}

bool wake_registry::keep_running_locked() {
  if (waiters_.empty() || closed_) running_ = false;
  return running_;
}

void wake_registry::loop() {
  if (!keep_running()) return;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", std::chrono::duration<double>(poll_interval_).count());
  // BLMPOP ... RIGHT COUNT: every grant waiting on the list (up to 128), oldest first, in one reply — one wake-up per
  // round trip would fall behind the grants of a busy semaphore.
  waker_->async_execute_command(admit::detail::deadline_after<std::chrono::steady_clock>(
                                    std::chrono::steady_clock::now(), poll_interval_ + timeout_),
                                command{"BLMPOP", seconds, "1", wake_key_, "RIGHT", "COUNT", "128"},
                                [self = shared_from_this()](boost::system::error_code ec, reply r) {
                                  // {key, {"id:n:token:expiry:now", ...}}, or nil after the block
                                  if (!ec && r.is_array() && r.elements().size() == 2)
                                    self->deliver(r.elements()[1], 0);
                                  if (ec) return self->pause_then_loop();
                                  self->loop();
                                });
}

void wake_registry::pause_then_loop() {
  const admit::detail::lock_guard lock(mutex_);
  if (!keep_running_locked()) return;  // closed, or nobody waits any more: a pause would keep the executor busy
  // Redis is away: the waiters poll meanwhile; the next BLMPOP after a pause instead of spinning. (A pause cut short by
  // close() finds the loop stopped.)
  pause_->expires_after(poll_interval_);
  pause_->async_wait([self = shared_from_this()](boost::system::error_code) { self->loop(); });
}

wake_registry::grant wake_registry::parse(std::string_view text) {
  grant g;
  g.reserve(5);
  g.push_back(0);  // the script's status "granted"
  const char* const end = text.data() + text.size();
  for (std::size_t at = text.find(':'); at != std::string_view::npos && g.size() < 5; at = text.find(':', at + 1)) {
    std::int64_t v = 0;
    const auto [next, ec] = std::from_chars(text.data() + at + 1, end, v);
    if (ec != std::errc() || (next != end && *next != ':')) return {};
    g.push_back(v);
  }
  if (g.size() != 5) g.clear();
  return g;
}

}  // namespace admit::redis::detail
