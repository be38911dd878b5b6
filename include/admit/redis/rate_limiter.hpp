// admit/redis/rate_limiter.hpp — what the distributed limiters whose budget refills at a rate (admit::redis::gcra and
// token_bucket) have beyond decide(): waiting for the budget, in one queue per key shared by every process.
//
//   admit::redis::token_bucket api(conn, "api", admit::rate::per_second(10), 5);
//   if (auto r = api.try_acquire_for("partner-x", 2s)) call_partner();   // waits in line for a token, up to 2 s
//   else log(r.error().message());                                       // timeout, cancelled, a Redis error...
//
// A wait is the distributed admission's (admission.hpp) with no concurrency limit and the limiter's rate: the key's
// waiters are served strictly in arrival order across every process (FIFO), each when its n tokens are there after
// those of the waiters ahead of it, and the tokens are the very ones decide(key) spends — the limiter's own Redis key
// holds them, so waits and decisions share one budget. A waiting request holds nothing. A deadline the rate cannot
// meet (the tokens, after those of the waiters ahead, come later than it) fails at once with errc::timeout and takes
// nothing; a deadline already passed does not wait (admitted now, or errc::timeout); a wait that ends without being
// admitted (its deadline, `stop`, even when a grant raced with it) takes nothing either — a grant that came too late is
// given back with its tokens. A decide() does not queue: it takes the tokens that are there, even while someone waits
// for them (as a try_acquire of the local admit::token_bucket does).
//
// The queue's keys are "{name}|q:<key>:meta" and the others of the semaphore's (redis/semaphore.hpp), in the
// limiter's hash slot; they expire 10 to 12.5 s after the key's last waiter could. One script call joins (and, when
// the tokens are there, admits); a waiter held back asks again at its tokens' time (and at least once a second), and
// an admission gives back its queue entry in the background (one more call, not waited for). Nothing wakes a waiter
// but its own calls: no connection of its own, no wake list. Across processes, every waiter of one key must use the
// same rate and burst (another fails with errc::definition_conflict) and the same version of admit.
//
// Results: admit::redis::wait_result (admitted, or the error: errc::timeout, errc::cancelled, errc::exceeds_capacity
// for n above the burst, errc::definition_conflict, or why Redis did not answer — a wait is not decided by the
// failure policy, and not taken from local leases; the call that joins the queue fails the wait, a waiter already
// queued asks again until its deadline). Each call to Redis is bounded by options().timeout; `stop` or the deadline
// end a wait, which then leaves the queue before it returns (within options().timeout; an asynchronous wait
// completes at once and leaves in the background). rate::inf admits at once without Redis; n == 0 is admitted at
// once; a negative n throws std::invalid_argument. The blocking forms must not be called on a thread that runs the
// client's executor; the asynchronous ones (async_acquire, _for, _until) wait on it, as redis::semaphore's do:
//
//   api.async_acquire_for("partner-x", 2s, 1, [](std::error_code ec) { if (!ec) call_partner(); });
//
// The client must outlive the calls; the limiter object need not outlive an asynchronous wait.
#pragma once

#include <boost/asio/async_result.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "admit/detail/deadline.hpp"
#include "admit/expected.hpp"
#include "admit/rate.hpp"
#include "admit/redis/detail/async_wait.hpp"
#include "admit/redis/limiter.hpp"

namespace admit::redis {

namespace detail {
class semaphore_core;
// An asynchronous wait of n in `queue` until `deadline` (rate_wait.cpp): `done` runs once with its outcome. The
// operation to start, or null when it needs none (a deadline already passed: one call decides, and is under way).
std::shared_ptr<async_acquire_op> make_rate_wait(const std::shared_ptr<semaphore_core>& queue, std::int64_t n,
                                                 std::optional<std::chrono::steady_clock::time_point> deadline,
                                                 std::function<void(std::error_code)> done);
}  // namespace detail

// The outcome of a wait: `if (r)` when admitted; r.error() says why not.
using wait_result = admit::expected<void, std::error_code>;

class rate_limiter : public limiter {
 public:
  using clock = std::chrono::steady_clock;

  // Waits in the key's queue until n tokens are taken for this caller, `deadline` or `stop`.
  [[nodiscard]] wait_result try_acquire_until(std::string_view key, clock::time_point deadline, std::int64_t n = 1,
                                              std::stop_token stop = {}) const {
    return wait(key, n, deadline, std::move(stop));
  }
  template <class Rep, class Period>
  [[nodiscard]] wait_result try_acquire_for(std::string_view key, std::chrono::duration<Rep, Period> timeout,
                                            std::int64_t n = 1, std::stop_token stop = {}) const {
    return wait(key, n, admit::detail::deadline_after<clock>(clock::now(), timeout), std::move(stop));
  }
  // Waits until admitted or `stop` is requested (errc::cancelled).
  [[nodiscard]] wait_result acquire(std::string_view key, std::int64_t n = 1, std::stop_token stop = {}) const {
    return wait(key, n, std::nullopt, std::move(stop));
  }

  // Asio: waits as acquire() does without blocking a thread. Completion: void(std::error_code) — empty when admitted,
  // else why not (as wait_result's errors). The handler runs through its associated executor (the client's by
  // default), never inside this call. Cancellation: terminal, through the handler's slot (errc::cancelled; leaving
  // the queue is sent without waiting, and a grant that raced with it goes back with its tokens). A negative n
  // throws std::invalid_argument in the initiating call.
  template <class CompletionToken>
  auto async_acquire(std::string_view key, std::int64_t n, CompletionToken&& token) const {
    return async_wait(key, n, std::nullopt, std::forward<CompletionToken>(token));
  }
  // The same, failing with errc::timeout at `deadline` (at once when the rate cannot meet it; a deadline already
  // passed does not wait, as try_acquire_until's).
  template <class CompletionToken>
  auto async_acquire_until(std::string_view key, clock::time_point deadline, std::int64_t n,
                           CompletionToken&& token) const {
    return async_wait(key, n, deadline, std::forward<CompletionToken>(token));
  }
  template <class Rep, class Period, class CompletionToken>
  auto async_acquire_for(std::string_view key, std::chrono::duration<Rep, Period> timeout, std::int64_t n,
                         CompletionToken&& token) const {
    return async_wait(key, n, admit::detail::deadline_after<clock>(clock::now(), timeout),
                      std::forward<CompletionToken>(token));
  }

  [[nodiscard]] rate get_rate() const noexcept { return rate_; }
  [[nodiscard]] std::int64_t burst() const noexcept { return limit(); }

 protected:
  // `state`: how the limiter's key holds the rate's state, "gcra" or "token_bucket" (semaphore.lua's rate_key).
  rate_limiter(client& c, std::shared_ptr<detail::limiter_core> core, rate r, std::chrono::microseconds interval,
               const char* state) noexcept
      : limiter(c, std::move(core)), rate_(r), interval_(interval), state_(state) {}

  rate rate_;
  std::chrono::microseconds interval_;  // 1/rate rounded up to whole microseconds (0 for rate inf)

 private:
  wait_result wait(std::string_view key, std::int64_t n, std::optional<clock::time_point> deadline,
                   std::stop_token stop) const;
  // What a wait of n comes to without asking Redis (n == 0 or rate inf: admitted; n above the burst:
  // errc::exceeds_capacity), or nullopt when it must ask. Throws std::invalid_argument for a negative n.
  std::optional<wait_result> settled_at_once(std::int64_t n) const;
  // The queue of `key`'s waits, for one wait (rate_wait.cpp).
  std::shared_ptr<detail::semaphore_core> queue_of(std::string_view key) const;

  template <class CompletionToken>
  auto async_wait(std::string_view key, std::int64_t n, std::optional<clock::time_point> deadline,
                  CompletionToken&& token) const {
    const std::optional<wait_result> at_once = settled_at_once(n);
    // Made now, not in the initiation: a deferred token may start the wait after this limiter is gone.
    std::shared_ptr<detail::semaphore_core> queue = at_once ? nullptr : queue_of(key);
    return boost::asio::async_initiate<CompletionToken, void(std::error_code)>(
        [at_once, queue = std::move(queue), fallback = redis_client().get_executor()](
            auto handler, std::int64_t count, std::optional<clock::time_point> until) {
          auto slot = boost::asio::get_associated_cancellation_slot(handler);
          auto done = detail::posted_completion<std::error_code>(std::move(handler), fallback);
          if (at_once) return done(*at_once ? std::error_code() : at_once->error());
          auto op = detail::make_rate_wait(queue, count, until, std::move(done));
          if (!op) return;  // decided by one call, without waiting
          detail::cancel_on_terminal(slot, op);
          detail::start(op);
        },
        token, n, deadline);
  }

  const char* state_;
};

}  // namespace admit::redis
