// tests/cli/stream_testing.hpp — what the tests of the streaming replays (replay_concurrency_stream_test.cpp,
// replay_stream_test.cpp) share to check their memory bound: whether a sanitizer runs (its quarantine makes the
// resident set meaningless) and the process's peak resident set.
#pragma once

#include <sys/resource.h>

namespace admit::cli::stream_testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

// The peak resident set of this process so far, in kilobytes (Linux's ru_maxrss).
inline long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace admit::cli::stream_testing
