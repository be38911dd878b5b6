// admit/asio/rejection.hpp — why the middleware refused a request, as a value a server turns into its answer:
// 429 with Retry-After and the RateLimit-* fields when a rate limit refused it, 503 when it was shed, the queue was
// full or its wait deadline passed.
//
//   res.result(rejection.status());                                       // 429 or 503
//   for (const auto& f : rejection.fields()) res.set(f.name(), f.value()); // Retry-After, RateLimit-Limit, ...
//
// The fields. `Retry-After` (RFC 9110 §10.2.3) is whole seconds, rounded up, so that a client that waits that long
// finds the request admitted (a limiter's retry_after of 1.2 s says "2"). The RateLimit-* fields follow
// draft-ietf-httpapi-ratelimit-headers-06 ("RateLimit Fields for HTTP", 22 December 2022), the last revision with the
// three separate fields (draft 07 merged them into `RateLimit` and `RateLimit-Policy`):
//   RateLimit-Limit      the service limit: here the limiter's burst (decision::limit);
//   RateLimit-Remaining  quota units left: decision::remaining;
//   RateLimit-Reset      delta seconds until the quota is back to full (decision::reset_after), rounded up — the
//                        draft asks for a non-negative integer and a client must not be told the quota is back
//                        before it is.
// Every value is a non-negative decimal integer, as the draft's Integer items and Retry-After's delay-seconds allow.
// Formatting allocates nothing (the values live in the field objects).
#pragma once

#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "admit/decision.hpp"

namespace admit::asio {

// Why a request was refused.
enum class rejection_reason : std::uint8_t {
  rate_limited,      // a rate limit (global or keyed) refused it: 429
  key_limit,         // a keyed limiter is at its cap of keys and could not store this client's key: 503
  shed,              // a concurrency limit had no free permit and a load_shed layer forbade waiting: 503
  queue_full,        // a concurrency limit's queue of waiters was full: 503
  deadline,          // the wait deadline passed before a concurrency permit was granted: 503
  closed,            // the concurrency limit's semaphore is closed (the server is shutting down): 503
  exceeds_capacity,  // the request needs more concurrency permits than the limit has in total: 503
  cancelled,         // the request's own cancellation (e.g. its connection closed) ended the wait: 503, if anyone asks
  handler_timeout,   // the handler ran past a handler_timeout layer's limit and was cancelled: 504 (or 503, as set)
};

// The name of a reason ("rate_limited", "shed", ...), for logs and metrics.
constexpr std::string_view to_string(rejection_reason r) noexcept {
  switch (r) {
    case rejection_reason::rate_limited:
      return "rate_limited";
    case rejection_reason::key_limit:
      return "key_limit";
    case rejection_reason::shed:
      return "shed";
    case rejection_reason::queue_full:
      return "queue_full";
    case rejection_reason::deadline:
      return "deadline";
    case rejection_reason::closed:
      return "closed";
    case rejection_reason::exceeds_capacity:
      return "exceeds_capacity";
    case rejection_reason::cancelled:
      return "cancelled";
    case rejection_reason::handler_timeout:
      return "handler_timeout";
  }
  return "unknown";
}

// Whole seconds in d, rounded up; zero for d <= 0. Exact for every nanoseconds value (no overflow at the maximum).
constexpr std::int64_t ceil_seconds(std::chrono::nanoseconds d) noexcept {
  const std::int64_t ns = d.count();
  if (ns <= 0) return 0;
  return ns / 1'000'000'000 + (ns % 1'000'000'000 != 0 ? 1 : 0);
}

// One response field: a name and a decimal value stored in the object itself.
class header_field {
 public:
  constexpr header_field() noexcept = default;
  header_field(std::string_view name, std::int64_t value) noexcept : name_(name) {
    const auto r = std::to_chars(buffer_.data(), buffer_.data() + buffer_.size(), value);
    size_ = static_cast<std::uint8_t>(r.ptr - buffer_.data());  // 20 characters hold every int64
  }
  constexpr std::string_view name() const noexcept { return name_; }
  std::string_view value() const noexcept { return {buffer_.data(), size_}; }

 private:
  std::string_view name_;
  std::array<char, 20> buffer_{};
  std::uint8_t size_ = 0;
};

// Up to four fields, iterable.
class header_fields {
 public:
  const header_field* begin() const noexcept { return items_.data(); }
  const header_field* end() const noexcept { return items_.data() + size_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // The value of the field called `name` (exact spelling), if present.
  std::optional<std::string_view> find(std::string_view name) const noexcept {
    for (const auto& f : *this) {
      if (f.name() == name) return f.value();
    }
    return std::nullopt;
  }
  void push_back(const header_field& f) noexcept {
    if (size_ < items_.size()) items_[size_++] = f;
  }

 private:
  std::array<header_field, 4> items_{};
  std::size_t size_ = 0;
};

// The three RateLimit-* fields of draft-ietf-httpapi-ratelimit-headers-06 for a limiter's decision (admitted or not):
// what a server may send on every response, successful ones included. Empty for a decision with limit == 0 (a keyed
// limiter's refusal of a new key, which describes no quota). RateLimit-Reset is omitted when the limiter never
// refills (reset_after == nanoseconds::max()).
inline header_fields rate_limit_fields(const decision& d) noexcept {
  header_fields out;
  if (d.limit <= 0) return out;
  out.push_back(header_field("RateLimit-Limit", d.limit));
  out.push_back(header_field("RateLimit-Remaining", d.remaining < 0 ? 0 : d.remaining));
  if (d.reset_after != std::chrono::nanoseconds::max()) {
    out.push_back(header_field("RateLimit-Reset", ceil_seconds(d.reset_after)));
  }
  return out;
}

// A refused request. A value: copy it, log it, turn it into a response.
struct rejection {
  rejection_reason reason = rejection_reason::shed;
  // The refusing limiter's decision, for rate_limited and key_limit; a default decision otherwise.
  decision rate{};
  // For handler_timeout: the status the layer was told to answer (503 or 504); 0 means 504.
  std::uint16_t timeout_status = 0;

  // 429 Too Many Requests for rate_limited, 504 Gateway Timeout for handler_timeout (or its timeout_status), 503
  // Service Unavailable for every other reason.
  constexpr unsigned status() const noexcept {
    if (reason == rejection_reason::rate_limited) return 429U;
    if (reason == rejection_reason::handler_timeout) return timeout_status != 0 ? timeout_status : 504U;
    return 503U;
  }

  // How long the client should wait, rounded up to whole seconds, for rate_limited and key_limit (at least 1 s: a
  // refusal means "not now"). Empty for the other reasons (a 503 from a concurrency limit says nothing about when a
  // permit frees up) and when waiting cannot help (decision::exceeds_capacity(): the request is larger than the
  // limiter's burst).
  constexpr std::optional<std::chrono::seconds> retry_after() const noexcept {
    if (reason != rejection_reason::rate_limited && reason != rejection_reason::key_limit) return std::nullopt;
    if (rate.retry_after == std::chrono::nanoseconds::max()) return std::nullopt;
    const std::int64_t s = ceil_seconds(rate.retry_after);
    return std::chrono::seconds{s < 1 ? 1 : s};
  }

  // The response fields: Retry-After (when retry_after() has a value), then for rate_limited the RateLimit-Limit,
  // RateLimit-Remaining and RateLimit-Reset fields of rate_limit_fields(rate). Allocates nothing.
  header_fields fields() const noexcept {
    header_fields out;
    if (const auto after = retry_after()) out.push_back(header_field("Retry-After", after->count()));
    if (reason == rejection_reason::rate_limited) {
      for (const auto& f : rate_limit_fields(rate)) out.push_back(f);
    }
    return out;
  }
};

}  // namespace admit::asio
