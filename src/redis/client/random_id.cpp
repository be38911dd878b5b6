#include "admit/redis/client/detail/random_id.hpp"

#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <system_error>

namespace admit::redis::detail {

namespace {

// Moved on in a child of fork(), which starts with a copy of the forking thread's bytes read ahead: a buffer filled in
// another generation is read afresh before it gives out anything.
std::atomic<unsigned> fork_generation{0};
void on_fork_child() noexcept { fork_generation.fetch_add(1, std::memory_order_relaxed); }

constexpr std::size_t id_bytes = 16;

// The kernel's random bytes, read ahead for 16 identities at a time on each thread: one getrandom(2) where one per
// identity cost a semaphore's waiter about 1 µs of the kernel's time.
struct bytes_ahead {
  unsigned char bytes[16 * id_bytes];
  std::size_t used = sizeof bytes;  // all given out: read before the first identity
  unsigned generation = 0;

  void refill() {
    std::size_t got = 0;
    while (got < sizeof bytes) {
      const ::ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::system_error(errno, std::generic_category(), "admit: getrandom for an identity");
      }
      got += static_cast<std::size_t>(n);
    }
    used = 0;
  }
};
thread_local bytes_ahead ahead;

}  // namespace

std::string random_id() {
  // Registered before the first bytes are read ahead: a fork() before then copies none.
  [[maybe_unused]] static const int registered = ::pthread_atfork(nullptr, nullptr, on_fork_child);
  const unsigned generation = fork_generation.load(std::memory_order_relaxed);
  if (ahead.used + id_bytes > sizeof ahead.bytes || ahead.generation != generation) {
    ahead.refill();
    ahead.generation = generation;
  }
  const unsigned char* bytes = ahead.bytes + ahead.used;
  ahead.used += id_bytes;
  static constexpr char digits[] = "0123456789abcdef";
  std::string id(2 * id_bytes, '0');
  for (std::size_t i = 0; i < id_bytes; ++i) {
    id[2 * i] = digits[bytes[i] >> 4];
    id[2 * i + 1] = digits[bytes[i] & 0xF];
  }
  return id;
}

}  // namespace admit::redis::detail
