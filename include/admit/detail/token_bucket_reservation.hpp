// admit/detail/token_bucket_reservation.hpp — basic_token_bucket<Clock>::reservation, the token bucket's reservation
// that can be cancelled or settled. Included at the end of admit/token_bucket.hpp (include that one).
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>

#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/reservation.hpp"
#include "admit/token_bucket.hpp"

namespace admit {

// A claim on tokens now or in the future (x/time/rate's Reservation): an admit::basic_reservation<Clock> (ok(),
// tokens(), ready_at(), delay_from(t), delay(), as the pacer's and the warm-up limiter's) that can also be cancelled
// or settled, once. It derives publicly from basic_reservation because it is one — code that waits on any limiter's
// reservation takes it as `const basic_reservation<Clock>&` — and adds only the right to give tokens back; a copy of
// the base part is a plain value that carries no such right (so the slicing is harmless), and neither type has a
// virtual member (never delete one through a pointer to the base). Move-only; a moved-from reservation is not ok().
// Not thread-safe by itself (one owner), but its operations are safe against concurrent use of the bucket.
template <steady_clock_like Clock>
class basic_token_bucket<Clock>::reservation : public basic_reservation<Clock> {
  using base = basic_reservation<Clock>;

 public:
  reservation() = default;
  reservation(reservation&& other) noexcept { *this = std::move(other); }
  reservation& operator=(reservation&& other) noexcept {
    base::operator=(std::exchange(static_cast<base&>(other), base{}));
    bucket_ = std::exchange(other.bucket_, nullptr);
    time_to_act_ = other.time_to_act_;
    interval_ = other.interval_;
    inf_ = other.inf_;
    return *this;
  }

  // x/time/rate CancelAt: the caller will not act; gives back the tokens that reservations made after this one do not
  // depend on, unless the reservation is already due at `t` (then nothing). Idempotent: later calls do nothing.
  // Afterwards tokens() is 0; ok() and ready_at() are unchanged.
  void cancel_at(time_point t) {
    if (!this->ok() || inf_ || this->tokens() == 0 || bucket_ == nullptr) return;
    bucket_->state_.cancel_reservation(to_ns<Clock>(t), this->tokens(), time_to_act_, interval_);
    this->clear_tokens();
  }
  void cancel() { cancel_at(Clock::now()); }

  // Settles the reservation at its actual cost once known (e.g. bytes actually sent): a smaller cost gives the
  // difference back to the bucket (capped at the burst), a larger one takes the difference (possibly into debt,
  // which later requests wait out). Can be called once; later calls, or calls after cancel, do nothing. Afterwards
  // tokens() is 0.
  void settle_at(time_point t, std::int64_t actual) {
    detail::check_n("admit::token_bucket::reservation::settle", actual, "actual");
    if (!this->ok() || inf_ || bucket_ == nullptr || this->tokens() == 0) return;
    const std::int64_t delta = this->tokens() - actual;
    if (delta != 0) {
      detail::token_bucket_state& state = bucket_->state_;
      state.give_back(state.effective_now(to_ns<Clock>(t)), static_cast<double>(delta));
    }
    this->clear_tokens();
  }
  void settle(std::int64_t actual) { settle_at(Clock::now(), actual); }

 private:
  friend class basic_token_bucket;
  reservation(basic_token_bucket* b, std::int64_t n, std::int64_t time_to_act, double interval, bool inf) noexcept
      : base(n, detail::ceil_time_point<typename Clock::time_point>(time_to_act)),  // (never early on a coarse clock)
        bucket_(b),
        time_to_act_(time_to_act),
        interval_(interval),
        inf_(inf) {}

  basic_token_bucket* bucket_ = nullptr;
  std::int64_t time_to_act_ = 0;  // ready_at() in nanoseconds, exactly (the bucket's unit)
  double interval_ = 0;  // the interval in force when the tokens were reserved (CancelAt restores at that rate)
  bool inf_ = false;
};

}  // namespace admit
