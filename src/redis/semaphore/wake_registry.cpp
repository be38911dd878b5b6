// The waiters a grant can wake (wake_registry.hpp).
#include "wake_registry.hpp"

#include <cstdlib>
#include <utility>

namespace admit::redis::detail {

bool wake_registry::add(const std::string& id, callback on_wake) {
  const admit::detail::lock_guard lock(mutex_);
  waiters_[id] = std::move(on_wake);
  if (running_) return false;
  running_ = true;
  return true;
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
    const std::string& text = e[i].str();
    if (auto it = waiters_.find(text.substr(0, text.find(':'))); it != waiters_.end()) it->second(parse(text));
  }
}

bool wake_registry::keep_running(bool closing) {
  const admit::detail::lock_guard lock(mutex_);
  if (waiters_.empty() || closing) running_ = false;
  return running_;
}

wake_registry::grant wake_registry::parse(const std::string& text) {
  grant g{0};  // the script's status "granted"
  for (std::size_t at = text.find(':'); at != std::string::npos && g.size() < 5; at = text.find(':', at + 1)) {
    g.push_back(std::strtoll(text.c_str() + at + 1, nullptr, 10));
  }
  if (g.size() != 5) g.clear();
  return g;
}

}  // namespace admit::redis::detail
