// admit/redis/circuit_breaker.hpp — stops calling a Redis that does not answer: after `failure_threshold`
// consecutive failures the breaker opens, and for `open_for` every decision is made at once by the failure policy;
// then a single probe call goes through, and its success closes the breaker (its failure opens it again).
//
//   admit::redis::circuit_breaker breaker({.failure_threshold = 5, .open_for = std::chrono::seconds(1)});
//   if (auto pass = breaker.allow(now); pass != admit::redis::breaker_pass::refused) {
//     /* call Redis; at its completion, with its error code: */ breaker.report(ec, pass, now);
//   }
//
// Why: with a dead Redis every call would wait for its whole deadline before the failure policy answers. Open, the
// breaker answers in nanoseconds and sends one probe per `open_for` instead of the whole load.
//
// Thread safety: every member may be called concurrently; the state is three atomics (no lock). Times are passed in
// (steady_clock by the limiters), so the breaker is deterministic under test.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

#include "admit/errc.hpp"

namespace admit::redis {

struct circuit_breaker_options {
  // Consecutive failures that open the breaker; 0 disables it (every call goes to Redis). Must be >= 0.
  int failure_threshold = 5;
  // How long the breaker stays open before it lets one probe through. Must be > 0.
  std::chrono::nanoseconds open_for = std::chrono::seconds(1);
};

// What allow() grants.
enum class breaker_pass {
  refused,  // open: do not call; decide by the failure policy
  call,     // closed: call normally
  probe,    // the one call that tests a breaker whose open_for has passed; report its outcome, or cancel_probe()
};

enum class breaker_state { closed, open, half_open };

// What one reported outcome did to the breaker.
enum class breaker_change { none, opened, closed };

// Whether a call's error says that Redis did not answer — a timeout, a refused, lost or failed connection,
// outcome_unknown: what counts against the breaker. Not an outage: no error; an answer (error_reply,
// unexpected_reply: Redis is there); a call that was never made (circuit_open); a call ended without an answer by its
// caller or by the connection's owner (cancelled, operation_canceled, closed).
inline bool is_outage(const std::error_code& ec) noexcept {
  if (!ec) return false;
  if (ec == admit::errc::cancelled || ec == std::errc::operation_canceled || ec == admit::errc::closed) return false;
  return ec != admit::errc::error_reply && ec != admit::errc::unexpected_reply && ec != admit::errc::circuit_open;
}

class circuit_breaker {
 public:
  using clock = std::chrono::steady_clock;

  // Throws std::invalid_argument naming the bad value.
  explicit circuit_breaker(circuit_breaker_options options = {}) : options_(options) {
    if (options.failure_threshold < 0) {
      throw std::invalid_argument("admit::redis::circuit_breaker: failure_threshold must not be negative, got " +
                                  std::to_string(options.failure_threshold));
    }
    if (options.open_for <= std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument("admit::redis::circuit_breaker: open_for must be positive, got " +
                                  std::to_string(options.open_for.count()) + "ns");
    }
  }

  // Whether a call may go to Redis at `now`. Closed: call. Open before open_for has passed: refused. Open after: the
  // first caller gets probe (the breaker is then half-open), everyone else refused until the probe reports.
  breaker_pass allow(clock::time_point now) noexcept {
    const std::int64_t until = open_until_.load(std::memory_order_acquire);
    if (until == closed_) return breaker_pass::call;
    if (ticks(now) < until) return breaker_pass::refused;
    if (probing_.exchange(true, std::memory_order_acq_rel)) return breaker_pass::refused;
    return breaker_pass::probe;
  }

  // A call answered (Redis is alive). Resets the failure count; closes an open breaker. Returns true when this call
  // closed it.
  bool on_success() noexcept {
    failures_.store(0, std::memory_order_relaxed);
    if (open_until_.load(std::memory_order_acquire) == closed_) return false;
    probing_.store(false, std::memory_order_release);
    return open_until_.exchange(closed_, std::memory_order_acq_rel) != closed_;
  }

  // A call failed at `now` (timeout, lost or refused connection). A failed probe reopens the breaker for open_for;
  // the failure_threshold-th consecutive failure opens a closed one. Returns true when this call opened it.
  bool on_failure(clock::time_point now, breaker_pass pass) noexcept {
    if (options_.failure_threshold == 0) return false;
    const int failures = failures_.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::int64_t reopen = ticks(now) + options_.open_for.count();
    if (pass == breaker_pass::probe) {
      open_until_.store(reopen, std::memory_order_release);
      probing_.store(false, std::memory_order_release);
      return false;
    }
    if (failures < options_.failure_threshold) return false;
    std::int64_t expected = closed_;
    return open_until_.compare_exchange_strong(expected, reopen, std::memory_order_acq_rel);
  }

  // The probe ended without an answer either way (cancelled): the next allow() after open_for may probe again.
  void cancel_probe() noexcept { probing_.store(false, std::memory_order_release); }

  // The outcome of a call that allow() let through with `pass`, ended at `now` with `ec`: every such call is reported
  // once, by this. An outage (is_outage) is a failure (on_failure); no error or an answer, even an error reply, is a
  // success (on_success); a cancellation is neither, and a cancelled probe lets the next caller probe. Returns opened
  // or closed when this report opened or closed the breaker.
  breaker_change report(const std::error_code& ec, breaker_pass pass, clock::time_point now) noexcept {
    if (is_outage(ec)) return on_failure(now, pass) ? breaker_change::opened : breaker_change::none;
    const bool answered = !ec || ec == admit::errc::error_reply || ec == admit::errc::unexpected_reply;
    if (answered) return on_success() ? breaker_change::closed : breaker_change::none;
    if (pass == breaker_pass::probe) cancel_probe();
    return breaker_change::none;
  }

  [[nodiscard]] breaker_state state(clock::time_point now) const noexcept {
    const std::int64_t until = open_until_.load(std::memory_order_acquire);
    if (until == closed_) return breaker_state::closed;
    return ticks(now) < until && !probing_.load(std::memory_order_acquire) ? breaker_state::open
                                                                           : breaker_state::half_open;
  }
  [[nodiscard]] const circuit_breaker_options& options() const noexcept { return options_; }

 private:
  static constexpr std::int64_t closed_ = INT64_MIN;
  static std::int64_t ticks(clock::time_point t) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }

  circuit_breaker_options options_;
  std::atomic<int> failures_{0};
  std::atomic<std::int64_t> open_until_{closed_};  // steady-clock ns at which a probe may go; closed_ when closed
  std::atomic<bool> probing_{false};
};

}  // namespace admit::redis
