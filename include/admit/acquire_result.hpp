// admit/acquire_result.hpp — the outcome of a wait for permits: the permit, or why there is none.
//
//   if (auto r = sem.try_acquire_for(10ms)) use(r.value());
//   else if (r.error() == admit::errc::queue_full) shed();
//
// Shaped like std::expected<admit::permit, admit::errc> (C++23), which C++20 lacks.
#pragma once

#include <cassert>
#include <system_error>
#include <utility>

#include "admit/errc.hpp"
#include "admit/permit.hpp"

namespace admit {

class [[nodiscard]] acquire_result {
 public:
  acquire_result(permit p) noexcept : permit_(std::move(p)) {}          // NOLINT(google-explicit-constructor): a result
  acquire_result(errc e) noexcept : error_(e) { assert(e != errc{}); }  // NOLINT(google-explicit-constructor)

  // True when the permits were acquired.
  bool has_value() const noexcept { return error_ == errc{}; }
  explicit operator bool() const noexcept { return has_value(); }

  // The permit; throws std::system_error carrying error() when there is none.
  permit& value() & {
    check();
    return permit_;
  }
  const permit& value() const& {
    check();
    return permit_;
  }
  permit&& value() && {
    check();
    return std::move(permit_);
  }

  // Unchecked access (precondition: has_value()).
  permit& operator*() & noexcept { return permit_; }
  permit&& operator*() && noexcept { return std::move(permit_); }
  permit* operator->() noexcept { return &permit_; }
  const permit* operator->() const noexcept { return &permit_; }

  // Why the wait failed; errc{} (no error) when it succeeded.
  errc error() const noexcept { return error_; }

 private:
  void check() const {
    if (!has_value()) throw std::system_error(make_error_code(error_));
  }

  permit permit_;
  errc error_{};
};

}  // namespace admit
