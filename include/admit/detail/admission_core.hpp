// admit/detail/admission_core.hpp — the state of admit::admission and its decisions: the classes, their queues and
// permits, the global bucket, the share rule's dispatch (detail/admission_rule.hpp computes the rule), the mutex and
// the fast path it hands the state to while nobody waits (detail/admission_fast_path.hpp). admission.hpp states the
// rules and the guarantees, and holds the public members and the blocking wait; every member here is for it.
// Thread safety: members run under the mutex (a `locked`) unless they say otherwise.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
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
#include "admit/detail/futex_mutex.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/errc.hpp"
#include "admit/permit.hpp"

namespace admit::detail {

template <steady_clock_like Clock>
class admission_core {
 public:
  using time_point = typename Clock::time_point;
  using waiter = admission_waiter;
  struct begin_result {
    bool queued = false;  // w waits: a grant calls w.notify (after the mutex is released)
    errc error{};         // when not queued: errc{} admitted now, or the refusal (would_block when !may_wait)
  };

  using class_state = admission_class;

  // The mutex, held. Taking it takes the state over from the fast path; releasing it hands the state back (when the
  // fast path would decide as the mutex does: see detail/admission_fast_path.hpp) and then notifies the asynchronous
  // waiters granted meanwhile, in grant order, without the mutex held.
  class locked {
   public:
    explicit locked(admission_core& owner) : owner_(owner) { lock(); }
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
      admission_waiter* ready = owner_.ready_.take();
      owns_ = false;
      owner_.mutex_.unlock();
      admission_ready_list::notify_all(ready);
    }

   private:
    admission_core& owner_;
    bool owns_ = false;
  };

  explicit admission_core(admission_options options)
      : options_(std::move(options)), plan_(plan_admission_classes(options_, to_ns<Clock>(Clock::now()))) {
    global_ = plan_.global;
    ledger_.classes.reserve(plan_.classes.size());
    for (std::size_t c = 0; c < plan_.classes.size(); ++c) {
      ledger_.classes.push_back(std::make_unique<class_state>(this, c, plan_.classes[c], &admission_core::released));
    }
    heads_.resize(ledger_.classes.size());
    hand_back();
  }
  admission_core(const admission_core&) = delete;
  admission_core& operator=(const admission_core&) = delete;

  // Throws std::invalid_argument for n < 1 or a priority out of range (as every acquiring member does).
  void check_request(std::size_t priority, std::int64_t n) const {
    // (n at most max_permits, as every count of permits: the ledger's sums of them must not overflow.)
    if (priority >= ledger_.classes.size() || n < 1 || n > semaphore_state::max_permits) bad_request(priority, n);
  }

  // Under the mutex: the state the fast path admitted on, if it was open.
  void take_over() noexcept {
    if (const std::optional<admission_fast_path::state> s = fast_.close()) {
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
    return *fast_.held() - released;                                                 // one class, disarmed
  }
  std::int64_t held_now(std::size_t priority) const noexcept {
    return fast_.held() ? held_now() : ledger_.held_now(*ledger_.classes[priority]);
  }
  // The fast path's admission of n at `now` (detail/admission_fast_path.hpp); false: decide under the mutex.
  bool admit_fast(time_point now, std::int64_t n) noexcept {
    return fast_.try_admit(global_, limited() ? plan_.max_in_flight : collect_bound, to_ns<Clock>(now), n);
  }
  // An admission's permit, recorded in the metrics (the on_admitted hook not called). The permit exists before the
  // metrics' event hook runs: if the hook throws, the permit is released.
  acquire_result admitted_now(std::size_t cls, std::int64_t n, std::chrono::nanoseconds waited = {}) {
    permit p(ledger_.classes[cls]->permits.engine(), n);
    metrics_.record(cls, errc{}, n, waited);
    return p;
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
    throw std::invalid_argument("admit::admission: n must be in [1, " + std::to_string(semaphore_state::max_permits) +
                                "], got " + std::to_string(n));
  }

  template <class F>
  auto read(F f) const {
    std::lock_guard lock(mutex_);
    return f();
  }
  bool limited() const noexcept { return plan_.max_in_flight > 0; }
  // Without a concurrency limit, the most permits that may be released and not yet collected (an engine counts up to
  // 2^59).
  static constexpr std::int64_t collect_bound = admission_fast_path::max_held;
  std::int64_t effective(std::int64_t now_ns) const noexcept { return std::max(now_ns, last_now_); }

  // Class k as the share rule weighs it.
  admission_class_state weigh(const class_state& k) const noexcept {
    return {k.plan.permits, ledger_.held_now(k), sole_ ? nullptr : &k.plan.assured, k.assured_tat};
  }
  // The standing of class k's head at effective time t.
  admission_head stand(const class_state& k, std::int64_t t) const noexcept {
    if (k.queue.head == nullptr) return {.present = false};
    return admission_stand(weigh(k), k.queue.head->n, k.queue.head->arrival, k.queue.queued_n, free_at(t));
  }
  static_assert(admission_free::unlimited_held == semaphore_state::max_permits);
  admission_free free_at(std::int64_t t) const noexcept {
    return {limited(), plan_.max_in_flight - ledger_.held,
            &global_,  tat_,
            t,         limited() ? INT64_MAX : admission_free::unlimited_held - ledger_.held};
  }

  // Admits w, queued or (when nobody waits) not yet: takes its tokens and permits and records its admission.
  void admit(class_state& k, waiter& w, std::int64_t t, const admission_head& st) noexcept {
    commit(k, w, t, st,
           global_.inf() ? tat_ : token_bucket_step(global_, oversize_policy::reject, tat_, t, w.n).new_tat);
  }
  // admit, the global bucket's state after w's tokens already computed (new_tat).
  void commit(class_state& k, waiter& w, std::int64_t t, const admission_head& st, std::int64_t new_tat) noexcept {
    if (w.queued) unlink(k, w);
    if (!global_.inf()) {
      tat_ = new_tat;
      k.assured_tat = admission_assured_after(sole_ ? nullptr : &k.plan.assured, k.assured_tat, st, t, w.n);
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
      wake_blocking(w, true);  // last: w may be gone once it returns
    }
  }

  // Under the mutex: serves the heads by the share rule (top of the file) at effective time t, then gives each head
  // its token time so that it wakes when time alone could change the decision.
  void dispatch(std::int64_t t) noexcept {
    std::vector<admission_head>& heads = heads_;
    for (;;) {
      for (std::size_t c = 0; c < ledger_.classes.size(); ++c) heads[c] = stand(*ledger_.classes[c], t);
      const std::size_t next = admission_pick(heads, free_at(t));
      if (next == ledger_.classes.size()) break;
      admit(*ledger_.classes[next], *ledger_.classes[next]->queue.head, t, heads[next]);
    }
    for (auto& k : ledger_.classes) {
      waiter* h = k->queue.head;
      if (h == nullptr) continue;
      const std::int64_t wait = admission_head_wait(global_, tat_, k->plan.assured, k->assured_tat, t, h->n);
      const std::int64_t wake = wait == ns_max ? ns_max : sat_add(t, wait);
      if (wake != h->wake_ns) {
        h->wake_ns = wake;
        if (h->rearm != nullptr) {
          h->rearm(*h);
        } else {
          wake_blocking(*h, false);
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
    const token_bucket_step_result step =
        global_.inf() ? token_bucket_step_result{} : token_bucket_step(global_, oversize_policy::reject, tat_, t, w.n);
    if (step.never) return {false, errc::exceeds_capacity};
    // An asynchronous waiter admitted within this call is not notified: begin's result reports it.
    auto* const rearm_w = std::exchange(w.rearm, nullptr);
    auto* const notify_w = std::exchange(w.notify, nullptr);
    // Releases reach the admission at once while requests wait (armed). Otherwise they are collected only when the
    // count that still includes them says w does not fit: one compare-and-swap per engine then, none per decision
    // (at most max_in_flight, or collect_bound without a concurrency limit, released permits wait uncollected).
    if (!ledger_.armed) {
      if (sat_add(ledger_.held, w.n) > (limited() ? plan_.max_in_flight : collect_bound)) ledger_.collect();
    } else if (waiting_ == 0) {
      ledger_.switch_releases(false);
    }
    if (waiting_ == 0) {
      // Nobody waits: w would be the only head, admitted by the share rule exactly when both resources are free.
      if (free_at(t).has_permits(w.n) && step.wait == 0) {
        w.arrival = ++arrivals_;
        admission_head st;
        admission_entitle(weigh(k), free_at(t), st);
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
    } else if (deadline && admission_impossible_by(global_, tat_, sat_add(ahead, w.n), t, to_ns<Clock>(*deadline))) {
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

  // A permit of class `cls` was released while armed (its engine calls this without its lock).
  static void released(void* owner, std::size_t cls) noexcept {
    auto& self = *static_cast<admission_core*>(owner);
    locked lock(self);
    class_state& k = *self.ledger_.classes[cls];
    self.ledger_.give_back(k, 1 + k.permits.called_back());
    // (Without a concurrency limit too: a request may wait under the ceiling of permits held in all.)
    if (self.waiting_ != 0) self.dispatch(self.effective(to_ns<Clock>(Clock::now())));
  }

  admission_options options_;
  admission_plan plan_;
  token_bucket_config global_;
  admission_ledger ledger_;            // the classes and their permits (guarded by mutex_)
  std::vector<admission_head> heads_;  // dispatch's scratch space, one per class (guarded by mutex_)
  admission_metrics metrics_;
  // One class with the whole share: its assured bucket is the global bucket, so it is entitled to every token the
  // global bucket has, and its assured state is not kept (its requests admitted, served and woken as with it).
  const bool sole_ = admission_sole(plan_);
  // One class with the whole share, no on_admitted hook and a nonzero rate: decisions while nobody waits may take the
  // fast path (the hook's arrival and admission orders are counted under the mutex).
  const bool fast_eligible_ = sole_ && !options_.on_admitted && !global_.zero();
  admission_fast_path fast_;
  mutable futex_mutex mutex_;
  // Guarded by mutex_.
  std::int64_t tat_ = ns_min;       // the global bucket (token_bucket.hpp's representation)
  std::int64_t last_now_ = ns_min;  // the latest effective time of an admission: time never goes back
  std::size_t waiting_ = 0;
  std::uint64_t arrivals_ = 0;
  std::uint64_t admitted_ = 0;
  admission_ready_list ready_;  // granted asynchronous waiters to notify once the mutex is released
};

}  // namespace admit::detail
