// admit/redis/client/detail/random_id.hpp — identities that no two holders share, across threads, processes and
// hosts: 128 bits from the kernel's random source (getrandom(2)) as 32 lowercase hex digits. Every call reads the
// kernel afresh, so there is no generator state for fork() to copy into a child (which would then hand out the
// parent's next identities). Thread safety: any thread. Throws std::system_error if the kernel gives no randomness.
#pragma once

#include <string>

namespace admit::redis::detail {

std::string random_id();

}  // namespace admit::redis::detail
