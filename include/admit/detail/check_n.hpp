// admit/detail/check_n.hpp — the check of a request's count `n`, made in every build (release included).
//
// The rule for the whole API: a count is a std::int64_t; a rate limiter accepts n >= 0 (n == 0 takes nothing), a
// semaphore or concurrency limiter n >= 1. Anything else throws std::invalid_argument naming the function's owner,
// the value and what is accepted, before any state is read or changed: a negative n would otherwise give tokens back.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace admit::detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_bad_n(const char* who, const char* what, std::int64_t n) {
  throw std::invalid_argument(std::string(who) + ": " + what + " must be >= 0, got " + std::to_string(n));
}

// Throws std::invalid_argument "<who>: n must be >= 0, got <n>" for a negative n.
inline void check_n(const char* who, std::int64_t n, const char* what = "n") {
  if (n < 0) [[unlikely]]
    throw_bad_n(who, what, n);
}

}  // namespace admit::detail
