// admit/asio/middleware_outcome.hpp — what a request that went through the middleware (<admit/asio/middleware.hpp>)
// comes back as: the handler's response together with the concurrency permits it still holds, or a rejection.
//
//   admit::asio::outcome<response> out = co_await protected_service(request);
//   if (out) co_await write(out.response()); else co_await write(render(out.rejected()));
//   out.release();   // the permits go back once the response is written (at the latest when `out` dies)
//
// Why the permits travel with the response: tower's ConcurrencyLimit moves its permit into the response future, so it
// is held until the response is complete. Here the handler's coroutine has returned by the time the server writes the
// response; the permits ride along in the outcome so that a server can hold them through the write, and a slow
// client reading a large body counts against the concurrency limit as the work it causes does.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <utility>
#include <variant>

#include "admit/asio/rejection.hpp"
#include "admit/decision.hpp"
#include "admit/permit.hpp"

namespace admit::asio {

// The permits one request holds, from up to `max_size` concurrency limits (one per concurrency layer). Move-only;
// releases them all on destruction or release(). Thread safety: as a value.
class held_permits {
 public:
  static constexpr std::size_t max_size = 4;

  held_permits() noexcept {}  // NOLINT(modernize-use-equals-default): the slots stay unconstructed
  held_permits(held_permits&& other) noexcept { take(other); }
  held_permits& operator=(held_permits&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~held_permits() { release(); }

  // Adds a permit (precondition: fewer than max_size held; the middleware checks this when it is built).
  void add(permit p) noexcept {
    assert(size_ < max_size && "admit::asio::held_permits: more than max_size concurrency layers");
    ::new (static_cast<void*>(&slots_[size_].item)) permit(std::move(p));
    ++size_;
  }

  // Releases every permit, innermost (last added) first, and leaves this empty.
  void release() noexcept {
    while (size_ > 0) slots_[--size_].item.~permit();  // a permit's destructor releases it
  }

  // How many permit objects are held (one per concurrency layer passed), and the permits they hold in total.
  std::size_t size() const noexcept { return size_; }
  std::int64_t count() const noexcept {
    std::int64_t n = 0;
    for (std::size_t i = 0; i < size_; ++i) n += slots_[i].item.count();
    return n;
  }

 private:
  // Only the first size_ slots hold a permit, so that moving and destroying touch only those (a request through one
  // concurrency limit moves one permit, not max_size).
  union slot {
    slot() noexcept {}  // NOLINT(modernize-use-equals-default)
    ~slot() {}          // NOLINT(modernize-use-equals-default)
    permit item;
  };

  // Moves other's permits here (precondition: this holds none) and leaves other empty.
  void take(held_permits& other) noexcept {
    for (std::size_t i = 0; i < other.size_; ++i) {
      ::new (static_cast<void*>(&slots_[i].item)) permit(std::move(other.slots_[i].item));
      other.slots_[i].item.~permit();  // moved from: holds nothing
    }
    size_ = std::exchange(other.size_, 0);
  }

  std::array<slot, max_size> slots_;
  std::size_t size_ = 0;
};

namespace detail {

// What the middleware's driver co_returns for an admitted request: references to the handler's response and to what
// the request collected on the way, from which the outcome is built in place in the driver's promise (one move of the
// response instead of a temporary outcome that is then moved).
template <class Response>
struct admitted {
  Response& response;
  held_permits& permits;
  const std::optional<decision>& rate;
};

}  // namespace detail

// A request's outcome: admitted (the handler's Response, the permits still held, and the tightest rate-limit decision
// made on the way, for RateLimit-* fields on a successful response) or refused (a rejection). Move-only because of the
// permits. Thread safety: as a value.
template <class Response>
class [[nodiscard]] outcome {
 public:
  explicit outcome(rejection r) noexcept : value_(std::in_place_index<1>, r) {}
  outcome(Response response, held_permits permits, std::optional<decision> rate)
      : value_(std::in_place_index<0>, std::move(response)), permits_(std::move(permits)), rate_(rate) {}
  // For the middleware's driver (co_return of an admitted request): moves the response and the permits in.
  explicit outcome(detail::admitted<Response>&& a)
      : value_(std::in_place_index<0>, std::move(a.response)), permits_(std::move(a.permits)), rate_(a.rate) {}

  outcome(outcome&&) = default;
  outcome& operator=(outcome&&) = default;

  bool admitted() const noexcept { return value_.index() == 0; }
  explicit operator bool() const noexcept { return admitted(); }

  // The handler's response. Precondition: admitted().
  Response& response() & noexcept {
    assert(admitted());
    return *std::get_if<0>(&value_);
  }
  const Response& response() const& noexcept {
    assert(admitted());
    return *std::get_if<0>(&value_);
  }
  Response&& response() && noexcept {
    assert(admitted());
    return std::move(*std::get_if<0>(&value_));
  }

  // Why the request was refused. Precondition: !admitted().
  const rejection& rejected() const noexcept {
    assert(!admitted());
    return *std::get_if<1>(&value_);
  }

  // For an admitted request: the admitting decision of the rate limit with the fewest remaining requests, if the
  // request passed any rate limit (rate_limit_fields() turns it into RateLimit-* fields). Empty for a refused one.
  const std::optional<decision>& rate() const noexcept { return rate_; }

  // The concurrency permits an admitted request still holds (none for a refused one).
  held_permits& permits() noexcept { return permits_; }
  const held_permits& permits() const noexcept { return permits_; }

  // Returns the permits now: call it once the response is written. Idempotent; the destructor does it otherwise.
  void release() noexcept { permits_.release(); }

 private:
  std::variant<Response, rejection> value_;
  held_permits permits_;
  std::optional<decision> rate_;
};

}  // namespace admit::asio
