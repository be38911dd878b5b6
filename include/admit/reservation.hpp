// admit/reservation.hpp — what a limiter's reserve() returns: tokens taken now or in the future, and when the caller
// may act on them.
//
//   auto r = limiter.reserve_at(now, 3);               // token_bucket, pacer or warmup
//   if (r) sleep_for(r.delay_from(now)); else give_up();
//
// The limiters that reserve — basic_token_bucket (x/time/rate's ReserveN), basic_pacer (uber-go/ratelimit's slots)
// and basic_warmup (Guava's reserve) — return this one shape, so code that waits on a reservation works with all
// three. A reservation is ok() when the tokens were taken (now or later); a token bucket's reservation is not ok()
// when they never can be (n above the burst under oversize_policy::reject, or beyond the caller's max_wait), and the
// pacer and warm-up limiter always reserve. The time to act is the limiter's, on its Clock, rounded so that waiting
// until it never lets a caller through early. basic_token_bucket<Clock>::reservation derives from this type and adds
// cancel/settle.
//
// Thread safety: a value type (copyable; one writer or many readers). It refers to no limiter: it only reports what
// the reserve call did, which cannot be undone through it.
#pragma once

#include <chrono>
#include <cstdint>

#include "admit/clock.hpp"

namespace admit {

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_reservation {
 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // Not ok(): no tokens, never ready (what a refused reserve returns, and a moved-from token bucket reservation).
  constexpr basic_reservation() noexcept = default;
  // ok(): `tokens` taken, the caller may act from `ready_at` on.
  constexpr basic_reservation(std::int64_t tokens, time_point ready_at) noexcept
      : ready_at_(ready_at), tokens_(tokens), ok_(true) {}

  // True when the tokens were taken (now or later); false when they never can be.
  [[nodiscard]] constexpr bool ok() const noexcept { return ok_; }
  [[nodiscard]] constexpr explicit operator bool() const noexcept { return ok_; }
  // The tokens (permits, slots) the reservation holds: n as asked; 0 when not ok(), and once a token bucket
  // reservation is cancelled or settled.
  [[nodiscard]] constexpr std::int64_t tokens() const noexcept { return tokens_; }

  // When the caller may act (the reserve call's `now` when at once); time_point::max() when !ok().
  [[nodiscard]] constexpr time_point ready_at() const noexcept { return ready_at_; }
  // How long from `t` until the caller may act: zero when already due (t at or after ready_at()), duration::max()
  // when !ok().
  [[nodiscard]] constexpr duration delay_from(time_point t) const noexcept {
    if (!ok_) return duration::max();
    return ready_at_ <= t ? duration::zero() : ready_at_ - t;
  }
  // delay_from(Clock::now()).
  [[nodiscard]] duration delay() const noexcept { return delay_from(Clock::now()); }

 protected:
  // For basic_token_bucket's reservation: its tokens are gone once cancelled or settled.
  constexpr void clear_tokens() noexcept { tokens_ = 0; }

 private:
  time_point ready_at_ = time_point::max();
  std::int64_t tokens_ = 0;
  bool ok_ = false;
};

using reservation = basic_reservation<std::chrono::steady_clock>;

}  // namespace admit
