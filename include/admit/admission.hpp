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
// The share rule. Class c has a share s_c (shares sum to at most 1). Its guarantee is
// - g_c permits: the shares of max_in_flight apportioned by largest remainder (floor(s_c·M) or ceil(s_c·M); the g_c
//   sum to floor(Σs·M); ties go to the lower index), and
// - an assured token bucket of its own: rate s_c·rate, burst max(1, ceil(s_c·burst)), starting full (none when
//   s_c == 0).
// Each resource is judged on its own. The head request of class c (n permits, n tokens) is
// - *entitled to permits* while the class holds fewer than g_c permits (always, without a concurrency limit), and
// - *entitled to tokens* while its assured bucket holds at least one whole token (always, with the infinite rate).
// Admitting it takes n global tokens and n permits; if it was entitled to tokens it also charges n to its assured
// bucket (into debt when n exceeds what is there, which the class then waits out before it is entitled again), so a
// class's entitled admissions never exceed s_c·rate (plus its assured burst). Whenever something changes (an arrival,
// a release, a cancel or timeout, time reaching a head's token time), the heads are served, one admission at a time,
// until none can be:
//   - on each resource, the heads entitled to it rank first, among themselves by arrival; then the heads that would
//     borrow it;
//   - a head is admissible when, on each resource, its n is free beyond the n of every head ranking before it that
//     could use it now (whose n of the other resource is free) — against a borrower of permits, a class entitled to
//     them claims all its waiters may take within g_c, not only its head's n — so that a borrower takes only the
//     surplus over what the entitled classes can use, and an entitled head is never made to wait by one that arrived
//     after it (a head short of both resources claims neither: what it cannot use yet is not kept idle for it). One
//     conflict is settled by arrival: of two heads that each would borrow what the other is entitled to, where either
//     would leave the other short, the earlier one goes first;
//   - the earliest-arrived admissible head is admitted (detail/admission_rule.hpp computes it).
// So a class never waits behind another class for a resource while its own share of it is unused: a head entitled to
// a resource is only ever behind entitled heads that arrived before it, whose guarantees fit together with its own (Σ
// g_c ≤ M; the assured rates add up to at most the rate). Under saturation (every class always has requests waiting)
// each class holds about g_c permits or more when permits are scarce, and is admitted at s_c·rate or more over time
// when tokens are scarce. What the shares leave unreserved (1 − Σs) and what a class does not use is borrowed by the
// others, in arrival order (among borrowers a head that does not fit does not hold back another). A class of share 0,
// or whose g_c rounds to 0, has no guarantee of that resource: it only borrows it. Within a class, requests are served
// strictly FIFO (a large head holds back the smaller requests behind it).
//
// Deadlines fail fast: a timed request whose tokens, together with those of the requests ahead of it in its class,
// the global bucket cannot accrue by its deadline fails at once with errc::timeout (as the rate limiters' timed waits,
// which never sleep in vain); it takes nothing. Results are an admit::acquire_result: the permit, or errc::would_block
// (try_acquire: not now), queue_full (max_waiters already waiting), timeout, cancelled, exceeds_capacity (n above
// max_in_flight or, with a finite rate, above the burst; or the zero rate and fewer tokens left than n: it can never be
// admitted). A grant that races with a deadline or a cancel wins.
//
// Cost and thread safety. Every member may be called concurrently. Each decision takes the mutex (no lock-free path);
// a release takes the class's permit engine (detail/semaphore_state.hpp) and then the mutex to hand the permits on.
// Waiting threads sleep on Clock (so the manual clock drives them in tests), woken by a grant, by their head's token
// time, their deadline or their stop_token. The admission must outlive its permits and waiters. Permits of different
// classes come from different engines: permit::merge refuses to join them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "admit/acquire_result.hpp"
#include "admit/clock.hpp"
#include "admit/detail/admission_classes.hpp"
#include "admit/detail/admission_rule.hpp"
#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/detail/sleep.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/errc.hpp"
#include "admit/permit.hpp"
#include "admit/priority_class.hpp"
#include "admit/rate.hpp"

namespace admit {

// One admission, as the on_admitted hook sees it.
struct admission_event {
  std::size_t priority = 0;        // the class index
  std::int64_t n = 1;              // tokens and permits taken
  std::chrono::nanoseconds at{0};  // when it was decided, on the admission's clock (since its epoch)
  std::uint64_t arrival = 0;       // arrival order of the request (1, 2, ..., over all classes)
  std::uint64_t order = 0;         // admission order (1, 2, ...): `at` never decreases along it
  bool within_guarantee = false;   // entitled to both permits and tokens when admitted (false: it borrowed some)
};

struct admission_options {
  // The rate, and the burst of its token bucket (>= 1 unless the rate is inf; see token_bucket.hpp).
  admit::rate rate = admit::rate::inf();
  std::int64_t burst = 1;
  // Permits in flight at most, in [0, 2^59]; 0: no concurrency limit (permits are still handed out and counted).
  std::int64_t max_in_flight = 0;
  // Requests that may wait at once (all classes together); the next one that would wait fails with queue_full.
  std::size_t max_waiters = std::numeric_limits<std::size_t>::max();
  // The priority classes; a request's `priority` is an index into them. Empty: one class, index 0, with share 1.
  std::vector<priority_class> classes = {};
  // Called once per admission, on the admitted request's thread, after the admission's mutex is released (it may
  // call into the admission). Must be safe to call from many threads at once. May be empty.
  std::function<void(const admission_event&)> on_admitted = {};
};

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
    classes_.reserve(plan_.classes.size());
    for (std::size_t c = 0; c < plan_.classes.size(); ++c) {
      auto k = std::make_unique<class_state>();
      k->plan = plan_.classes[c];
      k->watch.owner = this;
      k->watch.cls = c;
      k->watch.notify = &release_watch::on_release;
      (void)rearm(*k);  // takes the engine's one initial permit (not a request's)
      classes_.push_back(std::move(k));
    }
    heads_.resize(classes_.size());
  }
  basic_admission(const basic_admission&) = delete;
  basic_admission& operator=(const basic_admission&) = delete;
  ~basic_admission() {
    for (auto& k : classes_) (void)k->permits.cancel_wait(k->watch);
  }

  // --- Never waits -------------------------------------------------------------------------------------------------

  // Admits n (>= 1) of class `priority` if the share rule admits it now (nobody of its class waiting ahead of it);
  // otherwise errc::would_block (or exceeds_capacity). Requests already waiting that are due at `now` are served
  // first. Throws std::invalid_argument for n < 1 or a priority out of range.
  acquire_result try_acquire_at(time_point now, std::size_t priority, std::int64_t n = 1) {
    return run(priority, n, std::nullopt, {}, false, now);
  }
  acquire_result try_acquire(std::size_t priority, std::int64_t n = 1) {
    return try_acquire_at(Clock::now(), priority, n);
  }

  // --- Waiting -----------------------------------------------------------------------------------------------------

  // Waits until admitted (FIFO within its class, the share rule between classes), `stop` is requested (cancelled),
  // or fails at once with queue_full / exceeds_capacity. A stop already requested only admits at once.
  acquire_result acquire(std::stop_token stop, std::size_t priority, std::int64_t n = 1) {
    return run(priority, n, std::nullopt, stop, true, std::nullopt);
  }

  // As acquire, at most until `deadline` on Clock (timeout). Fails at once with timeout when the rate alone cannot
  // provide its tokens and those of the requests ahead of it in its class by then. A deadline already passed only
  // admits at once.
  acquire_result try_acquire_until(time_point deadline, std::size_t priority, std::int64_t n = 1,
                                   std::stop_token stop = {}) {
    return run(priority, n, deadline, stop, true, std::nullopt);
  }

  // try_acquire_until(now + timeout); a zero or negative timeout does not wait. Saturates for huge timeouts.
  template <class Rep, class Period>
  acquire_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::size_t priority, std::int64_t n = 1,
                                 std::stop_token stop = {}) {
    return try_acquire_until(detail::deadline_after<Clock>(Clock::now(), timeout), priority, n, std::move(stop));
  }

  // --- Observers (snapshots, each exact at some instant during the call) ----------------------------------------

  std::size_t classes() const noexcept { return classes_.size(); }
  std::size_t waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_;
  }
  std::size_t waiting(std::size_t priority) const {
    check_priority(priority);
    std::lock_guard lock(mutex_);
    return classes_[priority]->waiting;
  }
  // Permits held (all classes, or one). Released permits count until their class's engine has handed them back.
  std::int64_t in_flight() const {
    std::lock_guard lock(mutex_);
    return held_;
  }
  std::int64_t in_flight(std::size_t priority) const {
    check_priority(priority);
    std::lock_guard lock(mutex_);
    return classes_[priority]->held;
  }
  // The class's guaranteed permits g_c (0 without a concurrency limit).
  std::int64_t guaranteed_permits(std::size_t priority) const {
    check_priority(priority);
    return classes_[priority]->plan.permits;
  }

 private:
  struct waiter {
    std::size_t cls = 0;
    std::int64_t n = 0;
    waiter* prev = nullptr;
    waiter* next = nullptr;
    bool granted = false;
    bool cancelled = false;
    time_point wake = time_point::max();    // when its head position's tokens will be there (max: not a time event)
    std::stop_source* interrupt = nullptr;  // the current sleep's; requested to end it (grant, new wake time)
    admission_event event;
  };

  // Queued on a class's permit engine so that every release of that class's permits reaches on_release.
  struct release_watch : detail::semaphore_waiter {
    basic_admission* owner = nullptr;
    std::size_t cls = 0;
    static void on_release(detail::semaphore_waiter* w) noexcept {
      auto* self = static_cast<release_watch*>(w);
      self->owner->released(self->cls);
    }
  };

  struct class_state {
    // The permits of this class's requests come from here (admit::permit releases into it). Its count is not the
    // limit: the admission counts permits itself (held); the engine only reports releases through `watch`, which is
    // always queued on it, so that every release takes its slow path.
    detail::semaphore_state permits{1, std::numeric_limits<std::size_t>::max()};
    release_watch watch;
    detail::admission_class_plan plan;
    std::int64_t assured_tat = detail::ns_min;
    std::int64_t held = 0;
    std::int64_t queued_n = 0;
    std::size_t waiting = 0;
    waiter* head = nullptr;
    waiter* tail = nullptr;
  };

  void check_priority(std::size_t priority) const {
    if (priority >= classes_.size()) {
      throw std::invalid_argument("admit::admission: priority " + std::to_string(priority) +
                                  " is out of range: " + std::to_string(classes_.size()) + " class(es), 0 to " +
                                  std::to_string(classes_.size() - 1));
    }
  }
  void check_request(std::size_t priority, std::int64_t n) const {
    check_priority(priority);
    if (n < 1) throw std::invalid_argument("admit::admission: n must be >= 1, got " + std::to_string(n));
  }

  bool limited() const noexcept { return plan_.max_in_flight > 0; }
  std::int64_t effective(std::int64_t now_ns) const noexcept { return std::max(now_ns, last_now_); }

  // Why n can never be admitted (errc{} if it can).
  errc never(std::int64_t n, std::int64_t t) const noexcept {
    if (limited() && n > plan_.max_in_flight) return errc::exceeds_capacity;
    if (global_.inf()) return errc{};
    if (detail::token_bucket_step(global_, oversize_policy::reject, tat_, t, n).never) return errc::exceeds_capacity;
    return errc{};
  }

  // Under the mutex: the global bucket cannot accrue `need` tokens by `deadline_ns` (from effective time t).
  bool impossible_by(std::int64_t need, std::int64_t t, std::int64_t deadline_ns) const noexcept {
    if (global_.inf()) return false;
    const std::int64_t at = global_.zero() ? global_.frozen : t;
    const std::int64_t base = std::max(tat_, detail::sat_sub(at, global_.tol));
    const std::int64_t ready = detail::sat_add(base, detail::token_bucket_cost(global_, need));
    if (ready <= at) return false;
    return global_.zero() || ready > deadline_ns;
  }

  // The standing of class k's head (n) at effective time t.
  detail::admission_head stand(const class_state& k, std::int64_t t) const noexcept {
    detail::admission_head h;
    h.present = k.head != nullptr;
    if (!h.present) return h;
    h.n = k.head->n;
    h.arrival = k.head->event.arrival;
    const detail::admission_free free = free_at(t);
    if (limited()) h.permit_entitled = k.held < k.plan.permits;
    if (h.permit_entitled) h.permit_claim = std::min(k.queued_n, k.plan.permits - k.held);
    if (!global_.inf()) h.token_entitled = detail::assured_wait(k.plan.assured, k.assured_tat, t) == 0;
    h.permits_free = free.has_permits(h.n);
    h.tokens_free = free.has_tokens(h.n);
    return h;
  }
  detail::admission_free free_at(std::int64_t t) const noexcept {
    return {limited(), plan_.max_in_flight - held_, &global_, tat_, t};
  }

  void admit(class_state& k, waiter& w, std::int64_t t, const detail::admission_head& st) noexcept {
    if (!global_.inf()) {
      tat_ = detail::token_bucket_step(global_, oversize_policy::reject, tat_, t, w.n).new_tat;
      if (st.token_entitled) k.assured_tat = detail::assured_charge(k.plan.assured, k.assured_tat, t, w.n);
    }
    last_now_ = std::max(last_now_, t);
    k.held += w.n;
    held_ += w.n;
    unlink(k, w);
    w.granted = true;
    w.event.priority = w.cls;
    w.event.n = w.n;
    w.event.at = std::chrono::nanoseconds{t};
    w.event.order = ++admitted_;
    w.event.within_guarantee = st.permit_entitled && st.token_entitled;
    if (w.interrupt != nullptr) w.interrupt->request_stop();
  }

  // Under the mutex: serves the heads by the share rule (top of the file) at effective time t, then gives each head
  // its token time so that it wakes when time alone could change the decision.
  void dispatch(std::int64_t t) noexcept {
    std::vector<detail::admission_head>& heads = heads_;
    for (;;) {
      for (std::size_t c = 0; c < classes_.size(); ++c) heads[c] = stand(*classes_[c], t);
      const std::size_t next = detail::admission_pick(heads, free_at(t));
      if (next == classes_.size()) break;
      admit(*classes_[next], *classes_[next]->head, t, heads[next]);
    }
    for (auto& k : classes_) {
      waiter* h = k->head;
      if (h == nullptr) continue;
      std::int64_t wait = detail::ns_max;
      if (!global_.inf()) {
        const auto g = detail::token_bucket_step(global_, oversize_policy::reject, tat_, t, h->n);
        if (!g.never && g.wait > 0) wait = g.wait;
        const std::int64_t a = detail::assured_wait(k->plan.assured, k->assured_tat, t);
        if (a > 0) wait = std::min(wait, a);
      }
      const time_point wake =
          wait == detail::ns_max ? time_point::max() : detail::ceil_time_point<time_point>(detail::sat_add(t, wait));
      if (wake != h->wake) {
        h->wake = wake;
        if (h->interrupt != nullptr) h->interrupt->request_stop();
      }
    }
  }

  void enqueue(class_state& k, waiter& w) noexcept {
    w.event.arrival = ++arrivals_;
    w.prev = k.tail;
    w.next = nullptr;
    (k.tail != nullptr ? k.tail->next : k.head) = &w;
    k.tail = &w;
    k.queued_n += w.n;
    ++k.waiting;
    ++waiting_;
  }
  void unlink(class_state& k, waiter& w) noexcept {
    (w.prev != nullptr ? w.prev->next : k.head) = w.next;
    (w.next != nullptr ? w.next->prev : k.tail) = w.prev;
    w.prev = w.next = nullptr;
    k.queued_n -= w.n;
    --k.waiting;
    --waiting_;
  }
  // Takes `w` out of its queue without admitting it, and lets the others have what it held back.
  errc give_up(class_state& k, waiter& w, std::int64_t t, errc why) noexcept {
    unlink(k, w);
    dispatch(t);
    return why;
  }

  // The blocking and non-blocking members in one: see their comments.
  acquire_result run(std::size_t priority, std::int64_t n, std::optional<time_point> deadline, std::stop_token stop,
                     bool may_wait, std::optional<time_point> at) {
    check_request(priority, n);
    class_state& k = *classes_[priority];
    waiter w;
    w.cls = priority;
    w.n = n;
    // Constructed and destroyed without the mutex held: it takes the mutex (and its destructor waits for it to end).
    auto on_stop = [this, &w]() noexcept {
      std::lock_guard lock(mutex_);
      w.cancelled = true;
      if (w.interrupt != nullptr) w.interrupt->request_stop();
    };
    std::optional<std::stop_callback<decltype(on_stop)>> stop_callback;
    if (may_wait && stop.stop_possible()) stop_callback.emplace(stop, on_stop);

    std::unique_lock lock(mutex_);
    const time_point now = at ? *at : Clock::now();
    std::int64_t t = effective(to_ns<Clock>(now));
    if (const errc e = never(n, t); e != errc{}) return e;
    dispatch(t);  // requests already due at t go first
    const std::int64_t ahead = k.queued_n;
    enqueue(k, w);
    dispatch(t);
    if (!w.granted) {
      if (!may_wait) return give_up(k, w, t, errc::would_block);
      if (w.cancelled || stop.stop_requested()) return give_up(k, w, t, errc::cancelled);
      if (deadline && now >= *deadline) return give_up(k, w, t, errc::timeout);
      if (waiting_ - 1 >= options_.max_waiters) return give_up(k, w, t, errc::queue_full);
      if (deadline && impossible_by(detail::sat_add(ahead, n), t, to_ns<Clock>(*deadline))) {
        return give_up(k, w, t, errc::timeout);
      }
      wait(k, w, deadline, lock);
      if (!w.granted) return w.cancelled ? errc::cancelled : errc::timeout;
    }
    lock.unlock();
    return finish(k, w);
  }

  // Sleeps (the mutex released) until `w` is granted, cancelled or past its deadline, serving the heads each time it
  // wakes. On return (mutex held) `w` is granted, or out of its queue (cancelled if w.cancelled, else timed out).
  void wait(class_state& k, waiter& w, std::optional<time_point> deadline, std::unique_lock<std::mutex>& lock) {
    for (;;) {
      std::stop_source interrupt;
      w.interrupt = &interrupt;
      const time_point until = deadline ? std::min(*deadline, w.wake) : w.wake;
      lock.unlock();
      (void)detail::sleep_until<Clock>(until, interrupt.get_token());
      lock.lock();
      w.interrupt = nullptr;
      if (w.granted) return;
      const time_point woke = Clock::now();
      const std::int64_t t = effective(to_ns<Clock>(woke));
      dispatch(t);
      if (w.granted) return;
      if (w.cancelled || (deadline && woke >= *deadline)) {
        (void)give_up(k, w, t, errc{});
        return;
      }
    }
  }

  acquire_result finish(class_state& k, waiter& w) {
    acquire_result r(permit(k.permits, w.n));
    if (options_.on_admitted) options_.on_admitted(w.event);
    return r;
  }

  // A permit of class `cls` was released (the engine handed one unit to the watch and calls this without its lock).
  void released(std::size_t cls) noexcept {
    std::lock_guard lock(mutex_);
    class_state& k = *classes_[cls];
    const std::int64_t back = 1 + rearm(k);
    k.held -= back;
    held_ -= back;
    if (limited()) dispatch(effective(to_ns<Clock>(Clock::now())));
  }

  // Takes back every permit released into the class's engine and queues the watch again; returns how many it took.
  // Releases that race with it either add to what it takes or find the watch queued (and call released()).
  static std::int64_t rearm(class_state& k) noexcept {
    std::int64_t got = 0;
    for (;;) {
      const std::int64_t free = k.permits.available();
      if (free > 0 && k.permits.try_acquire(free)) {
        got += free;
        continue;
      }
      k.watch.needed = 1;
      const auto begun = k.permits.begin_wait(k.watch);
      if (begun.queued) return got;
      if (begun.error != errc{}) return got;  // cannot happen: never closed, capacity 1, no waiter bound
      got += 1;
    }
  }

  admission_options options_;
  detail::admission_plan plan_;
  detail::token_bucket_config global_;
  std::vector<std::unique_ptr<class_state>> classes_;
  std::vector<detail::admission_head> heads_;  // dispatch's scratch space, one per class (guarded by mutex_)
  mutable std::mutex mutex_;
  // Guarded by mutex_.
  std::int64_t tat_ = detail::ns_min;       // the global bucket (token_bucket.hpp's representation)
  std::int64_t last_now_ = detail::ns_min;  // the latest effective time of an admission: time never goes back
  std::int64_t held_ = 0;
  std::size_t waiting_ = 0;
  std::uint64_t arrivals_ = 0;
  std::uint64_t admitted_ = 0;
};

using admission = basic_admission<std::chrono::steady_clock>;

}  // namespace admit
