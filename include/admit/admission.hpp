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
// Reserve-then-commit. Every decision is made under one mutex: the tokens (the token bucket's state on plain values,
// detail/token_bucket_math.hpp, exactly as admit::token_bucket counts them) and the permits are both checked first,
// and only when both are there are both taken, in the same critical section. So a request never holds a permit while
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
// Cost and thread safety. Every member may be called concurrently. Each decision takes the mutex (no lock-free path).
// While nobody waits, a release is one lock-free add on its class's permit engine, collected only when a decision
// finds the permits it counts as held all taken; while requests wait, it takes the engine and then the mutex to hand
// the permits on (detail/admission_permits.hpp).
// Waiting threads sleep on Clock (so the manual clock drives them in tests), woken by a grant, by their head's token
// time, their deadline or their stop_token. Asynchronous waiters (<admit/asio/admission_acquire.hpp>) wait in the
// same queues, in the same arrival order: a grant posts their handler, and a timer of Clock on the handler's executor
// wakes them at their head's token time (and at their deadline) to serve the heads. The admission must outlive its
// permits and waiters. Permits of different classes come from different engines: permit::merge refuses to join them.
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
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/acquire_result.hpp"
#include "admit/admission_options.hpp"
#include "admit/clock.hpp"
#include "admit/detail/admission_classes.hpp"
#include "admit/detail/admission_fast_path.hpp"
#include "admit/detail/admission_ledger.hpp"
#include "admit/detail/admission_metrics.hpp"
#include "admit/detail/admission_permits.hpp"
#include "admit/detail/admission_queue.hpp"
#include "admit/detail/admission_rule.hpp"
#include "admit/detail/blocking_wait.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/futex_mutex.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/sleep.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/permit.hpp"
#include "admit/wait_histogram.hpp"

namespace admit {

template <steady_clock_like Clock = std::chrono::steady_clock>
class basic_admission {
 public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // Throws std::invalid_argument naming the value: a share < 0 (or NaN) or shares summing above 1, burst < 1 with a
  // finite rate (or a burst that takes more than 2^62 ns to refill), max_in_flight outside [0, 2^59].
  explicit basic_admission(admission_options options)
      : options_(std::move(options)), plan_(detail::plan_admission_classes(options_, to_ns<Clock>(Clock::now()))) {
    global_ = plan_.global;
    ledger_.classes.reserve(plan_.classes.size());
    for (std::size_t c = 0; c < plan_.classes.size(); ++c) {
      ledger_.classes.push_back(std::make_unique<class_state>(this, c, plan_.classes[c], &basic_admission::released));
    }
    heads_.resize(ledger_.classes.size());
    hand_back();
  }
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
    std::tie(s.in_flight, s.waiting) = read([&] {
      return std::tuple(held_now(priority), ledger_.classes[priority]->queue.waiting);
    });
    return s;
  }
  // The waits of the admissions (empty when metrics are not enabled).
  const wait_histogram& wait_times() const noexcept { return metrics_.wait_times(); }

  // --- For asynchronous waiters (<admit/asio/admission_acquire.hpp>, the middleware's admission layer) -----------
  // A decision made through these members: check_request, begin_wait, then (if queued) cancel_wait / timer_fired
  // until it is resolved, then complete exactly once (or discard, for a grant that is never delivered).

  using waiter = detail::admission_waiter;
  struct begin_result {
    bool queued = false;  // w waits: a grant calls w.notify (after the mutex is released)
    errc error{};         // when not queued: errc{} admitted now, or the refusal (would_block when !may_wait)
  };

  // Throws std::invalid_argument for n < 1 or a priority out of range (as every acquiring member does).
  void check_request(std::size_t priority, std::int64_t n) const {
    if (priority >= ledger_.classes.size() || n < 1) bad_request(priority, n);
  }
  // Admits w (w.cls, w.n set) now, refuses it now, or queues it; once queued, w.rearm is called once before this
  // returns and whenever w's token time changes (under the mutex). Records nothing (complete() does).
  begin_result begin_wait(waiter& w, std::optional<time_point> deadline, bool may_wait) {
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
  using class_state = detail::admission_class;

  // The mutex, held. Taking it takes the state over from the fast path; releasing it hands the state back (when the
  // fast path would decide as the mutex does: see detail/admission_fast_path.hpp) and then notifies the asynchronous
  // waiters granted meanwhile, in grant order, without the mutex held.
  class locked {
   public:
    explicit locked(basic_admission& owner) : owner_(owner) { lock(); }
    locked(const locked&) = delete;
    locked& operator=(const locked&) = delete;
    ~locked() {
      if (owns_) unlock();
    }
    void lock() noexcept {
      owner_.mutex_.lock();
      owns_ = true;
      owner_.take_over();
    }
    void unlock() noexcept {
      owner_.hand_back();
      detail::admission_waiter* ready = owner_.ready_.take();
      owns_ = false;
      owner_.mutex_.unlock();
      detail::admission_ready_list::notify_all(ready);
    }

   private:
    basic_admission& owner_;
    bool owns_ = false;
  };

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

  // Under the mutex: the state the fast path admitted on, if it was open.
  void take_over() noexcept {
    if (const std::optional<detail::admission_fast_path::state> s = fast_.close()) {
      last_now_ = s->latest;
      if (!global_.inf()) tat_ = s->tat;
      ledger_.held = ledger_.classes[0]->held = s->held;  // one class (the fast path's condition)
    }
  }
  void hand_back() noexcept {
    if (fast_eligible_ && waiting_ == 0 && !ledger_.armed) fast_.open({last_now_, tat_, ledger_.held}, global_.inf());
  }
  // Under the mutex: permits held (all classes, or one), without those released and not yet collected.
  std::int64_t held_now() const noexcept {
    if (!fast_.held()) return ledger_.held_now();
    const std::int64_t released = ledger_.classes[0]->permits.engine().available();  // first: see fast_.held()
    return *fast_.held() - released;                                                  // one class, disarmed
  }
  std::int64_t held_now(std::size_t priority) const noexcept {
    return fast_.held() ? held_now() : ledger_.held_now(*ledger_.classes[priority]);
  }
  // The fast path's admission of n at `now` (detail/admission_fast_path.hpp); false: decide under the mutex.
  bool admit_fast(time_point now, std::int64_t n) noexcept {
    return fast_.try_admit(global_, limited() ? plan_.max_in_flight : collect_bound, to_ns<Clock>(now), n);
  }
  // An admission's permit, recorded in the metrics (the on_admitted hook not called).
  acquire_result admitted_now(std::size_t cls, std::int64_t n, std::chrono::nanoseconds waited = {}) {
    metrics_.record(cls, errc{}, n, waited);
    return permit(ledger_.classes[cls]->permits.engine(), n);
  }

  void check_priority(std::size_t priority) const {
    if (priority >= ledger_.classes.size()) bad_request(priority, 1);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_request(std::size_t priority, std::int64_t n) const {
    if (priority >= ledger_.classes.size()) {
      throw std::invalid_argument("admit::admission: priority " + std::to_string(priority) +
                                  " is out of range: " + std::to_string(ledger_.classes.size()) + " class(es), 0 to " +
                                  std::to_string(ledger_.classes.size() - 1));
    }
    throw std::invalid_argument("admit::admission: n must be >= 1, got " + std::to_string(n));
  }

  template <class F>
  auto read(F f) const {
    std::lock_guard lock(mutex_);
    return f();
  }
  bool limited() const noexcept { return plan_.max_in_flight > 0; }
  // Without a concurrency limit, the most permits that may be released and not yet collected (an engine counts up to
  // 2^59).
  static constexpr std::int64_t collect_bound = detail::admission_fast_path::max_held;
  std::int64_t effective(std::int64_t now_ns) const noexcept { return std::max(now_ns, last_now_); }

  // The standing of class k's head (n) at effective time t.
  // Whether class k is entitled to permits and to tokens at effective time t (uses less than its guarantee).
  void entitle(const class_state& k, std::int64_t t, detail::admission_head& h) const noexcept {
    if (limited()) h.permit_entitled = ledger_.held_now(k) < k.plan.permits;
    if (!global_.inf() && !sole_) h.token_entitled = detail::assured_wait(k.plan.assured, k.assured_tat, t) == 0;
  }
  detail::admission_head stand(const class_state& k, std::int64_t t) const noexcept {
    detail::admission_head h;
    h.present = k.queue.head != nullptr;
    if (!h.present) return h;
    h.n = k.queue.head->n;
    h.arrival = k.queue.head->arrival;
    const detail::admission_free free = free_at(t);
    entitle(k, t, h);
    if (h.permit_entitled) h.permit_claim = std::min(k.queue.queued_n, k.plan.permits - ledger_.held_now(k));
    h.permits_free = free.has_permits(h.n);
    h.tokens_free = free.has_tokens(h.n);
    return h;
  }
  detail::admission_free free_at(std::int64_t t) const noexcept {
    return {limited(), plan_.max_in_flight - ledger_.held, &global_, tat_, t};
  }

  // Admits w, queued or (when nobody waits) not yet: takes its tokens and permits and records its admission.
  void admit(class_state& k, waiter& w, std::int64_t t, const detail::admission_head& st) noexcept {
    commit(k, w, t, st,
           global_.inf() ? tat_ : detail::token_bucket_step(global_, oversize_policy::reject, tat_, t, w.n).new_tat);
  }
  // admit, the global bucket's state after w's tokens already computed (new_tat).
  void commit(class_state& k, waiter& w, std::int64_t t, const detail::admission_head& st,
              std::int64_t new_tat) noexcept {
    if (w.queued) unlink(k, w);
    if (!global_.inf()) {
      tat_ = new_tat;
      if (st.token_entitled && !sole_) k.assured_tat = detail::assured_charge(k.plan.assured, k.assured_tat, t, w.n);
    }
    last_now_ = std::max(last_now_, t);
    ledger_.take(k, w.n);
    w.granted = true;
    w.at_ns = t;
    w.order = ++admitted_;
    w.within_guarantee = st.permit_entitled && st.token_entitled;
    if (w.notify != nullptr) {
      ready_.push_back(w);
    } else {
      detail::wake_blocking(w, true);  // last: w may be gone once it returns
    }
  }

  // Under the mutex: serves the heads by the share rule (top of the file) at effective time t, then gives each head
  // its token time so that it wakes when time alone could change the decision.
  void dispatch(std::int64_t t) noexcept {
    std::vector<detail::admission_head>& heads = heads_;
    for (;;) {
      for (std::size_t c = 0; c < ledger_.classes.size(); ++c) heads[c] = stand(*ledger_.classes[c], t);
      const std::size_t next = detail::admission_pick(heads, free_at(t));
      if (next == ledger_.classes.size()) break;
      admit(*ledger_.classes[next], *ledger_.classes[next]->queue.head, t, heads[next]);
    }
    for (auto& k : ledger_.classes) {
      waiter* h = k->queue.head;
      if (h == nullptr) continue;
      const std::int64_t wait = detail::admission_head_wait(global_, tat_, k->plan.assured, k->assured_tat, t, h->n);
      const std::int64_t wake = wait == detail::ns_max ? detail::ns_max : detail::sat_add(t, wait);
      if (wake != h->wake_ns) {
        h->wake_ns = wake;
        if (h->rearm != nullptr) {
          h->rearm(*h);
        } else {
          detail::wake_blocking(*h, false);
        }
      }
    }
  }

  void enqueue(class_state& k, waiter& w) noexcept {
    k.queue.push_back(w, ++arrivals_);
    ++waiting_;
  }
  void unlink(class_state& k, waiter& w) noexcept {
    k.queue.erase(w);
    --waiting_;
  }
  // Takes `w` out of its queue without admitting it, and lets the others have what it held back.
  void give_up(class_state& k, waiter& w, std::int64_t t) noexcept {
    unlink(k, w);
    dispatch(t);
  }

  // Under the mutex: serves the requests due at `now`, then admits w at once, refuses it at once, or leaves it queued
  // (see begin_wait). `stopped`: a blocking caller's stop_token was already requested.
  begin_result begin(waiter& w, time_point now, std::optional<time_point> deadline, bool may_wait, bool stopped) {
    class_state& k = *ledger_.classes[w.cls];
    const std::int64_t t = effective(to_ns<Clock>(now));
    if (limited() && w.n > plan_.max_in_flight) return {false, errc::exceeds_capacity};
    // The global bucket's answer for w, computed once: never (exceeds_capacity), or its tokens now and the state after.
    const detail::token_bucket_step_result step =
        global_.inf() ? detail::token_bucket_step_result{}
                      : detail::token_bucket_step(global_, oversize_policy::reject, tat_, t, w.n);
    if (step.never) return {false, errc::exceeds_capacity};
    // An asynchronous waiter admitted within this call is not notified: begin's result reports it.
    auto* const rearm_w = std::exchange(w.rearm, nullptr);
    auto* const notify_w = std::exchange(w.notify, nullptr);
    // Releases reach the admission at once while requests wait (armed). Otherwise they are collected only when the
    // count that still includes them says w does not fit: one compare-and-swap per engine then, none per decision
    // (at most max_in_flight, or collect_bound without a concurrency limit, released permits wait uncollected).
    if (!ledger_.armed) {
      if (detail::sat_add(ledger_.held, w.n) > (limited() ? plan_.max_in_flight : collect_bound)) ledger_.collect();
    } else if (waiting_ == 0) {
      ledger_.switch_releases(false);
    }
    if (waiting_ == 0) {
      // Nobody waits: w would be the only head, admitted by the share rule exactly when both resources are free.
      if (free_at(t).has_permits(w.n) && step.wait == 0) {
        w.arrival = ++arrivals_;
        detail::admission_head st;
        entitle(k, t, st);
        commit(k, w, t, st, step.new_tat);
        return {false, errc{}};
      }
    }
    if (!ledger_.armed) ledger_.switch_releases(true);  // w may wait: every release must serve the heads from now on
    dispatch(t);                                        // requests already due at t go first
    const std::int64_t ahead = k.queue.queued_n;
    enqueue(k, w);
    dispatch(t);
    if (w.granted) return {false, errc{}};
    errc why{};
    if (!may_wait) {
      why = errc::would_block;
    } else if (stopped || w.cancelled) {
      why = errc::cancelled;
    } else if (deadline && now >= *deadline) {
      why = errc::timeout;
    } else if (waiting_ - 1 >= options_.max_waiters) {
      why = errc::queue_full;
    } else if (deadline && detail::admission_impossible_by(global_, tat_, detail::sat_add(ahead, w.n), t,
                                                           to_ns<Clock>(*deadline))) {
      why = errc::timeout;
    }
    if (why != errc{}) {
      give_up(k, w, t);
      return {false, why};
    }
    w.rearm = rearm_w;
    w.notify = notify_w;
    if (w.rearm != nullptr) w.rearm(w);
    return {true, {}};
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

  // A permit of class `cls` was released while armed (its engine calls this without its lock).
  static void released(void* owner, std::size_t cls) noexcept {
    auto& self = *static_cast<basic_admission*>(owner);
    locked lock(self);
    class_state& k = *self.ledger_.classes[cls];
    self.ledger_.give_back(k, 1 + k.permits.called_back());
    if (self.limited() && self.waiting_ != 0) self.dispatch(self.effective(to_ns<Clock>(Clock::now())));
  }

  admission_options options_;
  detail::admission_plan plan_;
  detail::token_bucket_config global_;
  detail::admission_ledger ledger_;            // the classes and their permits (guarded by mutex_)
  std::vector<detail::admission_head> heads_;  // dispatch's scratch space, one per class (guarded by mutex_)
  detail::admission_metrics metrics_;
  // One class with the whole share: its assured bucket is the global bucket, so it is entitled to every token the
  // global bucket has, and its assured state is not kept (its requests admitted, served and woken as with it).
  const bool sole_ = plan_.classes.size() == 1 && plan_.classes[0].share >= 1;
  // One class with the whole share, no on_admitted hook and a nonzero rate: decisions while nobody waits may take the
  // fast path (the hook's arrival and admission orders are counted under the mutex).
  const bool fast_eligible_ = sole_ && !options_.on_admitted && !global_.zero();
  detail::admission_fast_path fast_;
  mutable detail::futex_mutex mutex_;
  // Guarded by mutex_.
  std::int64_t tat_ = detail::ns_min;       // the global bucket (token_bucket.hpp's representation)
  std::int64_t last_now_ = detail::ns_min;  // the latest effective time of an admission: time never goes back
  std::size_t waiting_ = 0;
  std::uint64_t arrivals_ = 0;
  std::uint64_t admitted_ = 0;
  detail::admission_ready_list ready_;  // granted asynchronous waiters to notify once the mutex is released
};

using admission = basic_admission<std::chrono::steady_clock>;

}  // namespace admit
