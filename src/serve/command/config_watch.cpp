#include "serve/command/config_watch.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace admit::serve {

config_watch::config_watch(const std::filesystem::path& dir) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "inotify_init1");
  const std::uint32_t mask =
      IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
  if (inotify_add_watch(fd_, dir.c_str(), mask) < 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(e, std::generic_category(), "cannot watch \"" + dir.string() + "\"");
  }
}

config_watch::~config_watch() {
  if (fd_ >= 0) ::close(fd_);
}

bool config_watch::drain() {
  bool any = false;
  alignas(inotify_event) char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) break;
    any = true;
  }
  return any;
}

}  // namespace admit::serve
