// serve/command/config_watch.hpp — a file descriptor that becomes readable when something in a directory changes
// (inotify: a file written and closed, created, deleted, moved or renamed, including Kubernetes' ConfigMap swap of a
// symbolic link), for `admit serve`'s hot reload. It follows the directory's path, not only the directory found there
// at first: the directory replaced (`mv new dir`), or a symbolic link on its path swapped (envoyproxy/ratelimit's
// `RUNTIME_ROOT` pointing at a link that a deployment renames over), is a change too, and from then on the watch is on
// what the path names now.
//
// Thread safety: one thread uses an instance.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>

namespace admit::serve {

class config_watch {
 public:
  // Throws std::system_error when the directory cannot be watched.
  explicit config_watch(std::filesystem::path dir);
  ~config_watch();
  config_watch(const config_watch&) = delete;
  config_watch& operator=(const config_watch&) = delete;

  // For poll(2): readable when an event is pending (which may concern something else in a watched parent).
  [[nodiscard]] int fd() const noexcept { return fd_; }
  // Reads every pending event; returns whether any was a change of the directory's (or of its path). Never blocks.
  bool drain();
  // Watches what the path names now (drain() does so by itself when the path changed; a reload asked for by hand
  // calls it too). A path that names nothing for the moment is watched again once an entry of it comes back.
  void rearm();

 private:
  // Replaces every watch by those of what the path names now; the errno of watching the directory (0: watched).
  int watch_path();

  std::filesystem::path dir_;
  int fd_ = -1;
  int dir_wd_ = -1;  // the directory itself; -1 while the path names no directory
  // A parent directory on the path (watch descriptor) -> the names in it that the path goes through and that can be
  // replaced without the directory seeing it: the directory's own name, and every symbolic link's.
  std::map<int, std::set<std::string>> entries_;
};

}  // namespace admit::serve
