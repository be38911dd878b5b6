// admit/expected.hpp — a value or the error code that says why there is none: the result type of every admit call
// that can fail in an expected way (a wait that timed out, a queue that was full).
//
//   admit::expected<admit::permit, admit::errc> r = sem.try_acquire_for(10ms);   // admit::acquire_result
//   if (r) use(*r); else if (r.error() == admit::errc::queue_full) shed();
//
// The subset of C++23 std::expected<T, E> that admit needs, for C++20, with two deliberate differences:
// - It converts implicitly from an E (std::expected wants std::unexpected(e)), so a function returns `errc::timeout`
//   or a permit alike. T and E must be different types, and neither may convert to the other.
// - error() is defined when there is a value: it returns E{} ("no error", 0 for every error code), so
//   `r.error() == admit::errc{}` means success. (std::expected leaves error() undefined then.)
// E is an error code: std::error_code or an enum registered with std::is_error_code_enum (admit::errc). value() on an
// error throws std::system_error carrying it (std::expected throws bad_expected_access<E>). When E is
// std::error_code, any registered error code enum converts to it too (an admit::errc becomes a std::error_code).
// expected<void, E> is the result of a wait that yields nothing but success (a rate limiter's acquire): default-
// constructed it is a success; from an E, a failure.
// Not provided: emplace, swap, value_or, and_then/transform, comparison operators.
//
// Thread safety: a value type; like any object, one writer or many readers. Copyable when T is, movable when T is
// (moves must not throw). Holds either a T or an E, never both: a T is constructed only for a success.
#pragma once

#include <cassert>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>

namespace admit {

namespace detail {
template <class E>
concept error_code_like = std::is_same_v<E, std::error_code> || std::is_error_code_enum_v<E>;
}  // namespace detail

template <class T, detail::error_code_like E>
class [[nodiscard]] expected {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>, "admit::expected holds an object");
  static_assert(!std::is_convertible_v<T, E> && !std::is_convertible_v<E, T>,
                "admit::expected<T, E>: T and E must not convert to each other (the constructors would be ambiguous)");
  static_assert(std::is_nothrow_move_constructible_v<T>, "admit::expected<T, E>: T's move must not throw");

 public:
  using value_type = T;
  using error_type = E;

  // A success holding `v`.
  expected(const T& v) noexcept(std::is_nothrow_copy_constructible_v<T>)  // NOLINT(google-explicit-constructor)
      requires std::is_copy_constructible_v<T> : has_value_(true) {
    std::construct_at(std::addressof(value_), v);
  }
  expected(T&& v) noexcept : has_value_(true) {  // NOLINT(google-explicit-constructor): a result is a T or an E
    std::construct_at(std::addressof(value_), std::move(v));
  }
  // A failure carrying `e`, which must be an error (not E{}): checked by assert.
  expected(E e) noexcept : has_value_(false) {  // NOLINT(google-explicit-constructor)
    std::construct_at(std::addressof(error_), e);
    assert(is_error(e) && "admit::expected: an error must not be E{} (no error)");
  }
  // A failure from another error code enum when E is std::error_code (an admit::errc, say).
  template <class G>
  requires(std::is_same_v<E, std::error_code>&& std::is_error_code_enum_v<G>) expected(G e)
  noexcept : expected(E(e)) {}  // NOLINT(google-explicit-constructor)

  expected(const expected& other) noexcept(
      std::is_nothrow_copy_constructible_v<T>) requires std::is_copy_constructible_v<T> : has_value_(other.has_value_) {
    if (has_value_) {
      std::construct_at(std::addressof(value_), other.value_);
    } else {
      std::construct_at(std::addressof(error_), other.error_);
    }
  }
  expected(expected&& other) noexcept : has_value_(other.has_value_) {
    if (has_value_) {
      std::construct_at(std::addressof(value_), std::move(other.value_));
    } else {
      std::construct_at(std::addressof(error_), other.error_);
    }
  }
  // Assignment destroys what is held and constructs the other's content in its place (strong guarantee for a
  // copy: the copy is made first).
  expected& operator=(const expected& other) requires std::is_copy_constructible_v<T> {
    if (this != &other) *this = expected(other);
    return *this;
  }
  expected& operator=(expected&& other) noexcept {
    if (this != &other) {
      destroy();
      has_value_ = other.has_value_;
      if (has_value_) {
        std::construct_at(std::addressof(value_), std::move(other.value_));
      } else {
        std::construct_at(std::addressof(error_), other.error_);
      }
    }
    return *this;
  }
  ~expected() { destroy(); }

  // True when there is a value.
  bool has_value() const noexcept { return has_value_; }
  explicit operator bool() const noexcept { return has_value_; }

  // The value; throws std::system_error carrying error() when there is none.
  T& value() & {
    check();
    return value_;
  }
  const T& value() const& {
    check();
    return value_;
  }
  T&& value() && {
    check();
    return std::move(value_);
  }

  // Unchecked access (precondition: has_value(), checked by assert).
  T& operator*() & noexcept { return assert(has_value_), value_; }
  const T& operator*() const& noexcept { return assert(has_value_), value_; }
  T&& operator*() && noexcept { return assert(has_value_), std::move(value_); }
  T* operator->() noexcept { return assert(has_value_), std::addressof(value_); }
  const T* operator->() const noexcept { return assert(has_value_), std::addressof(value_); }

  // Why there is no value; E{} (no error) when there is one.
  E error() const noexcept { return has_value_ ? E{} : error_; }

 private:
  void check() const {
    if (has_value_) return;
    if constexpr (std::is_same_v<E, std::error_code>) {
      throw std::system_error(error_);
    } else {
      throw std::system_error(make_error_code(error_));  // found by argument-dependent lookup, as std::error_code does
    }
  }
  static constexpr bool is_error(E e) noexcept {
    if constexpr (std::is_same_v<E, std::error_code>) {
      return static_cast<bool>(e);
    } else {
      return e != E{};
    }
  }
  void destroy() noexcept {
    if (has_value_) {
      std::destroy_at(std::addressof(value_));
    } else {
      std::destroy_at(std::addressof(error_));
    }
  }

  union {
    T value_;
    E error_;
  };
  bool has_value_;
};

// The result of an operation that yields no value: success, or the error that says why not. `if (r)` tests success;
// value() throws std::system_error carrying the error when there is one; error() is E{} on success.
template <detail::error_code_like E>
class [[nodiscard]] expected<void, E> {
 public:
  using value_type = void;
  using error_type = E;

  // A success.
  expected() noexcept = default;
  // A failure carrying `e`, which must be an error (not E{}): checked by assert.
  expected(E e) noexcept : error_(e) {  // NOLINT(google-explicit-constructor)
    assert(is_error(e) && "admit::expected: an error must not be E{} (no error)");
  }
  // A failure from another error code enum when E is std::error_code.
  template <class G>
  requires(std::is_same_v<E, std::error_code>&& std::is_error_code_enum_v<G>) expected(G e)
  noexcept : expected(E(e)) {}  // NOLINT(google-explicit-constructor)

  bool has_value() const noexcept { return !is_error(error_); }
  explicit operator bool() const noexcept { return has_value(); }
  // Throws std::system_error carrying error() when there is one.
  void value() const {
    if (has_value()) return;
    if constexpr (std::is_same_v<E, std::error_code>) {
      throw std::system_error(error_);
    } else {
      throw std::system_error(make_error_code(error_));
    }
  }
  E error() const noexcept { return error_; }

 private:
  static constexpr bool is_error(E e) noexcept {
    if constexpr (std::is_same_v<E, std::error_code>) {
      return static_cast<bool>(e);
    } else {
      return e != E{};
    }
  }

  E error_{};
};

}  // namespace admit
