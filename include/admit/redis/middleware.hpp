// admit/redis/middleware.hpp — a distributed rate limit as a layer of admit's request middleware
// (<admit/asio/middleware.hpp>): every request spends n of `limiter`'s key for the request, decided by Redis (or by
// the limiter's failure policy), and a refusal is a 429 with Retry-After and the RateLimit-* fields, exactly as the
// local rate-limit layers answer.
//
//   auto mw = admit::redis::rate_limit(admit::asio::middleware<request, response>{}.load_shed(), limiter,
//                                      [](const request& r) { return r.client_ip; });
//
// Unlike the local layers, this one always suspends the request for the decision's round trip (bounded by the
// limiter's timeout); the layers before it have run, the layers after it run once Redis has answered. A decision made
// by the failure policy (Redis unreachable) goes through the same path: fail_closed refuses with its
// failure_retry_after, fail_open and local_fallback admit or refuse as they decided. Cancellation of the request
// while it waits completes the decision with operation_aborted: the request is then refused as cancelled.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "admit/asio/middleware.hpp"
#include "admit/asio/middleware_layers.hpp"
#include "admit/asio/rejection.hpp"
#include "admit/decision.hpp"
#include "admit/redis/limiter.hpp"

namespace admit::redis {

namespace detail {

// The layer: enter() keeps the request's key and asks the driver to wait; wait() asks Redis.
template <class KeyOf>
class distributed_rate_layer {
 public:
  static constexpr bool holds_permits = false;

  distributed_rate_layer(const limiter& l, KeyOf key_of, std::int64_t n)
      : limiter_(&l), key_of_(std::move(key_of)), n_(n) {
    if (n < 0) {
      throw std::invalid_argument("admit::redis::rate_limit: n must be >= 0, got " + std::to_string(n));
    }
  }

  template <class Request>
  admit::asio::detail::step enter(admit::asio::detail::request_context& ctx, const Request& req) const {
    ctx.key.assign(key_of_(req));
    return {admit::asio::detail::step_kind::wait, {}, &wait, this};
  }

 private:
  static boost::asio::awaitable<std::optional<admit::asio::rejection>> wait(const void* self_ptr,
                                                                            admit::asio::detail::request_context& ctx) {
    const auto& self = *static_cast<const distributed_rate_layer*>(self_ptr);
    const auto [ec, d] =
        co_await self.limiter_->async_decide(ctx.key, self.n_, boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec == boost::asio::error::operation_aborted) {
      co_return admit::asio::rejection{admit::asio::rejection_reason::cancelled, {}};
    }
    if (!d) co_return admit::asio::rejection{admit::asio::rejection_reason::rate_limited, d};
    ctx.note(d);
    co_return std::nullopt;
  }

  const limiter* limiter_;
  KeyOf key_of_;
  std::int64_t n_;
};

}  // namespace detail

// `mw` with a distributed rate limit added after its layers: every request spends n >= 0 of
// `l.decide(key_of(request), n)`. key_of takes a const Request& and returns something a std::string can be assigned
// from (std::string_view, std::string, const char*); it is called concurrently and must be safe for that. The limiter
// (and its client) must outlive the middleware's calls. Throws std::invalid_argument for n < 0.
template <class Middleware, class KeyOf>
auto rate_limit(const Middleware& mw, const limiter& l, KeyOf key_of, std::int64_t n = 1) {
  return mw.with(detail::distributed_rate_layer<KeyOf>(l, std::move(key_of), n));
}

}  // namespace admit::redis
