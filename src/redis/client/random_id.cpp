#include "admit/redis/client/detail/random_id.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <system_error>

namespace admit::redis::detail {

std::string random_id() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ::ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "admit: getrandom for an identity");
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string id(2 * sizeof bytes, '0');
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    id[2 * i] = digits[bytes[i] >> 4];
    id[2 * i + 1] = digits[bytes[i] & 0xF];
  }
  return id;
}

}  // namespace admit::redis::detail
