// admit/errc.hpp — why an acquisition failed, as a std::error_code.
//
// Expected failures of a wait are values, not exceptions: each `acquire`-style call returns a result whose error is an
// `admit::errc`, and `std::error_code{admit::errc::timeout}` compares and prints like any other error code.
//
//   std::error_code ec = admit::errc::queue_full;   // ec.message() == "queue full: too many waiters"
#pragma once

#include <string>
#include <system_error>

namespace admit {

enum class errc {
  // 0 is "no error", as for every std::error_code.
  queue_full = 1,        // max_waiters were already waiting: rejected at once, without waiting
  timeout = 2,           // the deadline passed before the request was granted
  cancelled = 3,         // the caller's stop_token (or the operation's cancellation) ended the wait
  closed = 4,            // the semaphore was closed before the request was granted
  exceeds_capacity = 5,  // more permits than the semaphore holds in total: it could never grant them
};

namespace detail {
class errc_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "admit"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::queue_full:
        return "queue full: too many waiters";
      case errc::timeout:
        return "timed out waiting for a permit";
      case errc::cancelled:
        return "wait cancelled";
      case errc::closed:
        return "semaphore closed";
      case errc::exceeds_capacity:
        return "request exceeds the semaphore's capacity";
    }
    return "unknown admit error " + std::to_string(value);
  }
};
}  // namespace detail

// The category of admit::errc. One object for the whole program (an inline variable's address is unique).
inline const std::error_category& error_category() noexcept {
  static const detail::errc_category category;
  return category;
}

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

}  // namespace admit

template <>
struct std::is_error_code_enum<admit::errc> : std::true_type {};
