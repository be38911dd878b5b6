// The decision of one look at a local limit's queue (see local_rule.hpp).
#include "cli/common/local_rule.hpp"

#include <algorithm>

#include "admit/admission_options.hpp"
#include "admit/detail/admission_rule.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/rate.hpp"

namespace admit::cli::run::local {

using std::chrono::nanoseconds;

detail::admission_plan plan_of(const limit_definition& d) {
  admit::admission_options o;
  if (d.interval_ns > 0) {
    o.rate = admit::rate::every(nanoseconds(d.interval_ns));
    o.burst = d.burst;
  }
  o.max_in_flight = d.capacity;
  o.classes = d.classes;
  return detail::plan_admission_classes(o, 0);
}

bucket_state read_buckets(const queue_dir& q, const detail::admission_plan& plan, const clock_reading& clock) {
  bucket_state b;
  b.assured.assign(plan.classes.size(), detail::ns_min);
  if (plan.global.inf()) return b;
  const auto stored = read_rate(q, clock.boot_id);
  if (!stored) return b;
  b.tat = detail::sat_sub(stored->tat_ns, plan.global.tol);
  b.clamped = b.tat > clock.now_ns;
  b.tat = std::min(b.tat, clock.now_ns);
  if (stored->assured_tat_ns.size() == plan.classes.size()) {
    for (std::size_t k = 0; k < b.assured.size(); ++k) {
      const auto& assured = plan.classes[k].assured;
      const std::int64_t most = detail::sat_add(clock.now_ns, detail::token_bucket_cost(assured, plan.global.burst));
      b.clamped = b.clamped || stored->assured_tat_ns[k] > most;
      b.assured[k] = std::min(stored->assured_tat_ns[k], most);
    }
  }
  return b;
}

void write_buckets(const queue_dir& q, const detail::admission_plan& plan, const clock_reading& clock,
                   const bucket_state& b) {
  stored_rate r{detail::sat_add(b.tat, plan.global.tol), {}};
  if (plan.classes.size() > 1) r.assured_tat_ns = b.assured;
  write_rate(q, clock.boot_id, r);
}

evaluation evaluate(const queue_dir& q, const local_limit_config& c, const detail::admission_plan& plan,
                    const std::vector<entry_record>& live, std::uint64_t self) {
  evaluation e;
  e.progress.capacity = c.capacity;
  const std::size_t classes = plan.classes.size();
  std::vector<detail::admission_class_state> standing(classes);
  std::vector<std::int64_t> queued(classes, 0);
  std::vector<const entry_record*> heads(classes, nullptr);
  for (const auto& r : live) {
    const std::size_t k = r.priority < classes ? r.priority : 0;
    if (r.holder) {
      e.progress.held += r.weight;
      standing[k].held += r.weight;
      continue;
    }
    ++e.progress.waiting;
    queued[k] += r.weight;
    if (heads[k] == nullptr) heads[k] = &r;
    if (k == c.priority && r.ticket < self) e.ahead += r.weight;
    if (k == c.priority && r.ticket <= self) ++e.progress.position;
  }
  e.clock = read_clock();
  e.after = read_buckets(q, plan, e.clock);
  if (e.after.clamped) write_buckets(q, plan, e.clock, e.after);
  if (e.progress.position != 1) return e;
  const std::int64_t t = e.clock.now_ns;
  const bool sole = detail::admission_sole(plan);
  const detail::admission_free free{c.capacity > 0, c.capacity - e.progress.held, &plan.global, e.after.tat, t};
  std::vector<detail::admission_head> stands(classes);
  for (std::size_t k = 0; k < classes; ++k) {
    standing[k].guaranteed = plan.classes[k].permits;
    standing[k].assured = sole ? nullptr : &plan.classes[k].assured;
    standing[k].assured_tat = e.after.assured[k];
    if (heads[k] != nullptr) {
      stands[k] = detail::admission_stand(standing[k], heads[k]->weight, heads[k]->ticket, queued[k], free);
    }
  }
  if (detail::admission_pick(stands, free) != c.priority) {
    const std::int64_t wait = detail::admission_head_wait(plan.global, e.after.tat, plan.classes[c.priority].assured,
                                                          e.after.assured[c.priority], t, c.weight);
    if (wait != detail::ns_max) e.rate_wait = nanoseconds(wait);
    // Reported as waiting for the rate only when, tokens aside, the rule would pick it now: with the infinite rate
    // (every head's tokens there), the heads' claims on permits still count.
    if (e.rate_wait && !plan.global.inf()) {
      const detail::token_bucket_config tokens_aside;  // cost1 0: the infinite rate
      detail::admission_free permits_only = free;
      permits_only.global = &tokens_aside;
      for (auto& h : stands) h.tokens_free = h.token_entitled = true;
      if (detail::admission_pick(stands, permits_only) == c.priority) e.progress.rate_wait = e.rate_wait;
    }
    return e;
  }
  if (!plan.global.inf()) {
    e.after.tat =
        detail::token_bucket_step(plan.global, admit::oversize_policy::reject, e.after.tat, t, c.weight).new_tat;
  }
  const auto& k = standing[c.priority];
  e.after.assured[c.priority] =
      detail::admission_assured_after(k.assured, k.assured_tat, stands[c.priority], t, c.weight);
  e.admit = true;
  return e;
}

}  // namespace admit::cli::run::local
