// admit/admission.hpp — admission control in one object: a rate (token bucket), a concurrency limit (permits held
// until released), a bounded queue, and priority classes that each have a guaranteed share of both.
//
//   admit::admission adm{{.rate = admit::rate::per_second(100), .burst = 10, .max_in_flight = 8, .max_waiters = 64,
//                         .classes = {{"interactive", 0.7}, {"batch", 0.3}}}};
//   if (auto r = adm.try_acquire_for(50ms, /*priority=*/0)) serve();   // r.value() is an admit::permit
//
// A request of class c asking for n is admitted when, at the head of its class's queue, n tokens of the rate AND n
// permits of max_in_flight are both available and the share rule below lets it take them; it then holds n permits
// until the admit::permit it got is released (the tokens are spent for good, as a token bucket's).
//
// Reserve-then-commit. Every decision is made on one state, under one mutex (or, for the fast path below, by one
// atomic compare-and-swap of the same state): the tokens (the token bucket's state on plain values,
// detail/token_bucket_math.hpp, exactly as admit::token_bucket counts them) and the permits are both checked first,
// and only when both are there are both taken, in the same step. So a request never holds a permit while
// it waits for tokens, and tokens are never taken for a request that then cannot get a permit: a waiting request
// holds nothing.
//
// The share rule (stated in full in detail/admission_rule.hpp, which computes it). Class c has a share s_c (shares
// sum to at most 1); its guarantee is g_c permits (the shares of max_in_flight apportioned by largest remainder) and an
// assured token bucket at s_c·rate. On each resource, heads of class queues entitled to it (their class uses less than
// its guarantee) rank first, by arrival, then those that would borrow it; a borrower takes only what the entitled
// classes' waiters cannot use; the earliest-arrived admissible head goes first. So a class never waits behind another
// for a resource while its own share of it is unused; what a class does not use, the others borrow. Within a class,
// requests are served strictly FIFO (a large head holds back the smaller requests behind it).
//
// Deadlines fail fast: a timed request whose tokens, together with those of the requests ahead of it in its class,
// the global bucket cannot accrue by its deadline fails at once with errc::timeout (as the rate limiters' timed waits,
// which never sleep in vain); it takes nothing. Results are an admit::acquire_result: the permit, or errc::would_block
// (try_acquire: not now), queue_full (max_waiters already waiting), timeout, cancelled, exceeds_capacity (n above
// max_in_flight or, with a finite rate, above the burst; or the zero rate and fewer tokens left than n: it can never be
// admitted). A grant that races with a deadline or a cancel wins.
//
// Cost and thread safety. Every member may be called concurrently. Decisions take the mutex, except one kind: with a
// single class (no classes given, or one with share 1), no on_admitted hook and a nonzero rate, a blocking or try_*
// request made while nobody waits is admitted without the mutex when its tokens and permits are there (one 16-byte
// compare-and-swap on x86-64; detail/admission_fast_path.hpp). It is decided exactly as under the mutex; anything else
// (a refusal, a wait) is decided under the mutex. While nobody waits, a release is one lock-free add on its class's
// permit engine, collected only when a decision finds the permits it counts as held all taken; while requests wait, it
// takes the engine and then the mutex to hand the permits on (detail/admission_permits.hpp). Waiting threads sleep on
// Clock (so the manual clock drives them in tests), woken by a grant, by their head's token time, their deadline or
// their stop_token. Asynchronous waiters (<admit/asio/admission_acquire.hpp>) wait in the same queues, in the same
// arrival order: a grant posts their handler, and a timer of Clock on the handler's executor wakes them at their head's
// token time (and at their deadline) to serve the heads. The admission must outlive its permits and waiters. Permits of
// different classes come from different engines: permit::merge refuses to join them.
//
// Metrics. enable_metrics() counts one acquire_outcome per decision (blocking, try_*, asynchronous) in a
// limiter_metrics (<admit/limiter_metrics.hpp>): admitted with its wait, unavailable (would_block), queue_full,
// timeout, cancelled, exceeds_capacity; metrics() adds the gauges limit (max_in_flight, 0 without a concurrency
// limit), in_flight and waiting, for all classes; metrics(priority) is one class's (limit: its g_c; its counters when
// enabled per class). The on_admitted
// hook is the detailed view of each admission (class, n, arrival and admission order, within its guarantee or
// borrowing). Both run once per admission, without the mutex held: the metrics' event hook first, then on_admitted.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/acquire_result.hpp"
#include "admit/admission_options.hpp"
#include "admit/clock.hpp"
#include "admit/detail/admission_core.hpp"
#include "admit/detail/admission_queue.hpp"
#include "admit/detail/blocking_wait.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/sleep.hpp"
#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/permit.hpp"
#include "admit/wait_histogram.hpp"

namespace admit {

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_admission : private detail::admission_core<Clock> {
  using core = detail::admission_core<Clock>;  // the state and the decisions (detail/admission_core.hpp)
  using core::admit_fast;
  using core::admitted_now;
  using core::begin;
  using core::check_priority;
  using core::dispatch;
  using core::effective;
  using core::give_up;
  using core::held_now;
  using core::ledger_;
  using core::metrics_;
  using core::mutex_;
  using core::options_;
  using core::plan_;
  using core::read;
  using core::waiting_;
  using typename core::locked;

 public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // Throws std::invalid_argument naming the value: a share < 0 (or NaN) or shares summing above 1, burst < 1 with a
  // finite rate (or a burst that takes more than 2^62 ns to refill), max_in_flight outside [0, 2^59].
  explicit basic_admission(admission_options options) : core(std::move(options)) {}
  basic_admission(const basic_admission&) = delete;
  basic_admission& operator=(const basic_admission&) = delete;

  // --- Never waits -------------------------------------------------------------------------------------------------

  // Admits n (>= 1) of class `priority` if the share rule admits it now (nobody of its class waiting ahead of it);
  // otherwise errc::would_block (or exceeds_capacity). Requests already waiting that are due at `now` are served
  // first. Throws std::invalid_argument for n < 1 or a priority out of range.
  acquire_result try_acquire_at(time_point now, std::size_t priority, std::int64_t n = 1) {
    check_request(priority, n);
    if (admit_fast(now, n)) return admitted_now(priority, n);
    return try_acquire_locked(now, priority, n);
  }
  acquire_result try_acquire(std::size_t priority, std::int64_t n = 1) {
    return try_acquire_at(Clock::now(), priority, n);
  }

  // --- Waiting -----------------------------------------------------------------------------------------------------

  // Waits until admitted (FIFO within its class, the share rule between classes), `stop` is requested (cancelled),
  // or fails at once with queue_full / exceeds_capacity. A stop already requested only admits at once.
  acquire_result acquire(std::stop_token stop, std::size_t priority, std::int64_t n = 1) {
    return wait_for_admission(priority, n, std::nullopt, stop);
  }

  // As acquire, at most until `deadline` on Clock (timeout). Fails at once with timeout when the rate alone cannot
  // provide its tokens and those of the requests ahead of it in its class by then. A deadline already passed only
  // admits at once.
  acquire_result try_acquire_until(time_point deadline, std::size_t priority, std::int64_t n = 1,
                                   std::stop_token stop = {}) {
    return wait_for_admission(priority, n, deadline, stop);
  }

  // try_acquire_until(now + timeout); a zero or negative timeout does not wait. Saturates for huge timeouts.
  template <class Rep, class Period>
  acquire_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::size_t priority, std::int64_t n = 1,
                                 std::stop_token stop = {}) {
    return try_acquire_until(detail::deadline_after<Clock>(Clock::now(), timeout), priority, n, std::move(stop));
  }

  // --- Observers (snapshots, each exact at some instant during the call) ----------------------------------------

  std::size_t classes() const noexcept { return ledger_.classes.size(); }
  // Requests waiting (all classes, or one), and permits held (while requests wait, released ones count until their
  // engine calls back).
  std::size_t waiting() const {
    return read([&] { return waiting_; });
  }
  std::size_t waiting(std::size_t priority) const {
    check_priority(priority);
    return read([&] { return ledger_.classes[priority]->queue.waiting; });
  }
  std::int64_t in_flight() const {
    return read([&] { return held_now(); });
  }
  std::int64_t in_flight(std::size_t priority) const {
    check_priority(priority);
    return read([&] { return held_now(priority); });
  }
  // The class's guaranteed permits g_c (0 without a concurrency limit).
  std::int64_t guaranteed_permits(std::size_t priority) const {
    check_priority(priority);
    return ledger_.classes[priority]->plan.permits;
  }

  // --- Metrics (see the top of the file) ---------------------------------------------------------------------------

  // Starts counting outcomes; `on_event` (may be empty) runs once per decision, see limiter_metrics. With `per_class`,
  // each class also gets its own counters (metrics(priority)), at one more relaxed add per decision. Call before the
  // admission is shared: not thread-safe against decisions. Calling it again starts from zero.
  void enable_metrics(limiter_metrics::event_handler on_event = {}, bool per_class = false) {
    metrics_.enable(ledger_.classes.size(), std::move(on_event), per_class);
  }
  // The counters (all 0 when not enabled) and the gauges: limit = max_in_flight, in_flight, waiting (all classes).
  limiter_snapshot metrics() const {
    limiter_snapshot s = metrics_.snapshot();
    std::tie(s.limit, s.in_flight, s.waiting) =
        read([&] { return std::tuple(plan_.max_in_flight, held_now(), waiting_); });
    return s;
  }
  // One class's counters (its decisions only, when enabled per class; the event hook is not called for them) and
  // gauges: limit = its
  // guaranteed permits g_c (in_flight above it: the class borrows), in_flight(priority), waiting(priority).
  limiter_snapshot metrics(std::size_t priority) const {
    check_priority(priority);
    limiter_snapshot s = metrics_.snapshot(priority);
    s.limit = ledger_.classes[priority]->plan.permits;
    std::tie(s.in_flight, s.waiting) =
        read([&] { return std::tuple(held_now(priority), ledger_.classes[priority]->queue.waiting); });
    return s;
  }
  // The waits of the admissions (empty when metrics are not enabled).
  const wait_histogram& wait_times() const noexcept { return metrics_.wait_times(); }

  // --- For asynchronous waiters (<admit/asio/admission_acquire.hpp>, the middleware's admission layer) -----------
  // A decision made through these members: check_request, begin_wait, then (if queued) cancel_wait / timer_fired
  // until it is resolved, then complete exactly once (or discard, for a grant that is never delivered).
  using waiter = detail::admission_waiter;
  // queued: w waits (a grant calls w.notify after the mutex is released); error, when not queued: errc{} admitted
  // now, or the refusal (would_block when !may_wait).
  using begin_result = typename core::begin_result;
  // Throws std::invalid_argument for n < 1 or a priority out of range (as every acquiring member does).
  using core::check_request;

  // Admits w (w.cls, w.n set) now, refuses it now, or queues it; once queued, w.rearm is called once before this
  // returns and whenever w's token time changes (under the mutex). Records nothing (complete() does).
  begin_result begin_wait(waiter& w, std::optional<time_point> deadline, bool may_wait) {
    if (admit_fast(Clock::now(), w.n)) return {false, errc{}};  // nobody waits, all there: at once
    locked lock(*this);
    return begin(w, Clock::now(), deadline, may_wait, false);
  }
  // True: w was still queued and has left the queue (its place goes to the others). False: it was granted first
  // (the grant stands: w.notify has been or will be called) or had already left.
  bool cancel_wait(waiter& w) {
    locked lock(*this);
    if (!w.queued) return false;
    give_up(*ledger_.classes[w.cls], w, effective(to_ns<Clock>(Clock::now())));
    return true;
  }
  // w's timer went off: serves the heads now. True: w's deadline has passed and it left the queue (timeout). False:
  // it was granted (w.notify), had left, or still waits (w.rearm was called with its next time).
  bool timer_fired(waiter& w, std::optional<time_point> deadline) {
    locked lock(*this);
    if (!w.queued) return false;
    const time_point now = Clock::now();
    const std::int64_t t = effective(to_ns<Clock>(now));
    dispatch(t);
    if (!w.queued) return false;
    if (deadline && now >= *deadline) {
      give_up(*ledger_.classes[w.cls], w, t);
      return true;
    }
    w.rearm(w);
    return false;
  }
  // Ends the decision on w: records `outcome` (errc{}: admitted after `waited`) and, for an admission, calls
  // on_admitted and returns the permit. Call without the mutex held; throws what the hooks throw (the permit is then
  // released).
  acquire_result complete(const waiter& w, errc outcome, std::chrono::nanoseconds waited) {
    if (outcome != errc{}) {
      metrics_.record(w.cls, outcome, w.n, waited);
      return outcome;
    }
    acquire_result r = admitted_now(w.cls, w.n, waited);
    if (options_.on_admitted) {
      options_.on_admitted({w.cls, w.n, std::chrono::nanoseconds{w.at_ns}, w.arrival, w.order, w.within_guarantee});
    }
    return r;
  }
  // A grant that will never be delivered (its handler was destroyed unrun): its permits go back. Records nothing.
  void discard(const waiter& w) noexcept { permit(ledger_.classes[w.cls]->permits.engine(), w.n).release(); }

 private:
  // try_acquire_at's decision under the mutex: begin() without what only a wait needs (a stop callback, the wait).
  [[gnu::noinline]] acquire_result try_acquire_locked(time_point now, std::size_t priority, std::int64_t n) {
    waiter w;
    w.cls = priority;
    w.n = n;
    errc result{};
    {
      locked lock(*this);
      result = begin(w, now, std::nullopt, false, false).error;
    }
    return complete(w, result, std::chrono::nanoseconds{0});
  }

  // acquire and try_acquire_until in one: see their comments.
  acquire_result wait_for_admission(std::size_t priority, std::int64_t n, std::optional<time_point> deadline,
                                    std::stop_token stop) {
    check_request(priority, n);
    if (admit_fast(Clock::now(), n)) return admitted_now(priority, n);  // nobody waits, all there: at once
    waiter w;
    w.cls = priority;
    w.n = n;
    // Constructed and destroyed without the mutex held: it takes the mutex (and its destructor waits for it to end).
    auto on_stop = [this, &w]() noexcept {
      std::lock_guard lock(mutex_);
      w.cancelled = true;
      if (w.queued) detail::wake_blocking(w, false);
    };
    std::optional<std::stop_callback<decltype(on_stop)>> stop_callback;
    if (stop.stop_possible()) stop_callback.emplace(stop, on_stop);

    errc result{};
    std::chrono::nanoseconds waited{0};
    {
      locked lock(*this);
      const time_point start = Clock::now();
      const begin_result begun = begin(w, start, deadline, true, stop.stop_requested());
      result = begun.error;
      if (begun.queued) {
        wait(w, deadline, lock);
        result = w.granted ? errc{} : w.cancelled ? errc::cancelled : errc::timeout;
        waited = std::max(std::chrono::nanoseconds{0},
                          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start));
      }
    }
    return complete(w, result, waited);
  }

  // Sleeps (the mutex released) until `w` is granted, cancelled or past its deadline, serving the heads each time it
  // wakes. On return `w` is granted (the mutex held or not: a grant seen on the futex returns without it, so that a
  // woken waiter does not queue for the mutex again), or out of its queue, the mutex held (cancelled if w.cancelled,
  // else timed out).
  void wait(waiter& w, std::optional<time_point> deadline, locked& lock) {
    for (;;) {
      const time_point wake =
          w.wake_ns == detail::ns_max ? time_point::max() : detail::ceil_time_point<time_point>(w.wake_ns);
      const time_point until = deadline ? std::min(*deadline, wake) : wake;
      if constexpr (detail::clock_with_sleep<Clock>) {
        std::stop_source interrupt;
        w.interrupt = &interrupt;
        lock.unlock();
        (void)detail::sleep_until<Clock>(until, interrupt.get_token());
        lock.lock();
        w.interrupt = nullptr;
      } else {
        w.futex_sleeper = true;
        const std::uint32_t seen = w.signal.load(std::memory_order_relaxed);
        lock.unlock();
        detail::futex_wait(w.signal, seen, detail::steady_deadline<Clock>(until));
        if ((w.signal.load(std::memory_order_acquire) & waiter::granted_signal) != 0) return;
        lock.lock();
      }
      if (w.granted) return;
      const time_point woke = Clock::now();
      const std::int64_t t = effective(to_ns<Clock>(woke));
      dispatch(t);
      if (w.granted) return;
      if (w.cancelled || (deadline && woke >= *deadline)) {
        give_up(*ledger_.classes[w.cls], w, t);
        return;
      }
    }
  }
};

using admission = basic_admission<std::chrono::steady_clock>;

}  // namespace admit
