#include "serve/command/config_watch.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <utility>

namespace admit::serve {

namespace {

constexpr std::uint32_t dir_events =
    IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
// In a parent on the path: an entry appearing, going or renamed (a link swapped by rename, a directory moved over).
constexpr std::uint32_t entry_events = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR;

}  // namespace

config_watch::config_watch(std::filesystem::path dir) : dir_(std::move(dir)) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "inotify_init1");
  if (const int e = watch_path(); e != 0) {
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(e, std::generic_category(), "cannot watch \"" + dir_.string() + "\"");
  }
}

config_watch::~config_watch() {
  if (fd_ >= 0) ::close(fd_);
}

void config_watch::rearm() { watch_path(); }

int config_watch::watch_path() {
  // The new watches are made before the old ones go, and the parents' before the directory's: a directory made on
  // the path meanwhile is then seen either way (its watch, or its parent's event), and a watch that names the same
  // directory as before keeps its descriptor (inotify gives it back), so that its queued events still count.
  std::map<int, std::set<std::string>> entries;
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::absolute(dir_, ec).lexically_normal();
  if (!ec) {
    std::filesystem::path at = path.root_path();
    for (const auto& part : path.relative_path()) {
      if (part.empty()) continue;
      const std::filesystem::path parent = at;
      at /= part;
      if (at != path && !std::filesystem::is_symlink(at, ec)) continue;
      // (A parent watched already gets the same descriptor, with the same events: its names join.)
      const int wd = inotify_add_watch(fd_, parent.c_str(), entry_events);
      if (wd >= 0) entries[wd].insert(part.string());
    }
  }
  const int dir_wd = inotify_add_watch(fd_, dir_.c_str(), dir_events);
  const int result = dir_wd < 0 ? errno : 0;
  if (dir_wd_ >= 0 && dir_wd_ != dir_wd) inotify_rm_watch(fd_, dir_wd_);
  for (const auto& [wd, names] : entries_) {
    if (entries.count(wd) == 0 && wd != dir_wd) inotify_rm_watch(fd_, wd);
  }
  dir_wd_ = dir_wd;
  entries_ = std::move(entries);
  return result;
}

bool config_watch::drain() {
  bool changed = false, path_changed = false;
  alignas(inotify_event) char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      inotify_event e{};
      std::memcpy(&e, buf + at, sizeof e);
      const char* name = buf + at + sizeof e;
      at += static_cast<ssize_t>(sizeof e + e.len);
      if (e.wd == -1 || (e.mask & IN_Q_OVERFLOW) != 0) {  // events were lost: assume the worst
        changed = path_changed = true;
      } else if (e.wd == dir_wd_) {
        changed = true;
        if ((e.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) path_changed = true;
      } else if (auto it = entries_.find(e.wd); it != entries_.end() && e.len > 0 && it->second.count(name) > 0) {
        changed = path_changed = true;
      }
    }
  }
  if (path_changed) rearm();
  return changed;
}

}  // namespace admit::serve
