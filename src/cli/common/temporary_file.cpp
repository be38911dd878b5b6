#include "cli/common/temporary_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace admit::cli {

std::filesystem::path temporary_directory() {
  if (const char* d = std::getenv("TMPDIR"); d != nullptr && *d != '\0') return d;
  return "/tmp";
}

std::FILE* temporary_file() {
  const std::filesystem::path dir = temporary_directory();
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // A file system without unnamed files: a name, removed as soon as the file is open.
    std::string name = (dir / "admit-XXXXXX").string();
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) (void)::unlink(name.c_str());
  }
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "w+b");
  if (f == nullptr) {
    const int e = errno;
    ::close(fd);
    errno = e;
  }
  return f;
}

}  // namespace admit::cli
