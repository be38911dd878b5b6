// admit/redis/client/detail/random_id.hpp — identities that no two holders share, across threads, processes and
// hosts: 128 bits from the kernel's random source (getrandom(2)) as 32 lowercase hex digits. Each thread reads the
// kernel's bytes for 16 identities at a time and gives each byte out once; a child of fork() reads afresh before its
// first identity (pthread_atfork), so it never hands out the bytes its parent copied to it. Thread safety: any thread.
// Throws std::system_error if the kernel gives no randomness.
#pragma once

#include <string>

namespace admit::redis::detail {

std::string random_id();

}  // namespace admit::redis::detail
