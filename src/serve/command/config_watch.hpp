// serve/command/config_watch.hpp — a file descriptor that becomes readable when something in a directory changes
// (inotify: a file written and closed, created, deleted, moved or renamed, including Kubernetes' ConfigMap swap of a
// symbolic link), for `admit serve`'s hot reload.
//
// Thread safety: one thread uses an instance.
#pragma once

#include <filesystem>

namespace admit::serve {

class config_watch {
 public:
  // Throws std::system_error when the directory cannot be watched.
  explicit config_watch(const std::filesystem::path& dir);
  ~config_watch();
  config_watch(const config_watch&) = delete;
  config_watch& operator=(const config_watch&) = delete;

  // For poll(2): readable when a change is pending.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  // Reads every pending event; returns whether there was any. Never blocks.
  bool drain();

 private:
  int fd_ = -1;
};

}  // namespace admit::serve
