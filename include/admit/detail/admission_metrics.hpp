// admit/detail/admission_metrics.hpp — admit::admission's opt-in counters (<admit/limiter_metrics.hpp>): one
// limiter_metrics for all classes, which calls the event hook, and, when asked for, one per class, which does not.
// Disabled until enable(): a decision then costs one null-pointer test; enabled, one relaxed add per decision for all
// classes, and one more with the counters per class.
//
// Thread safety: enable() before the admission is shared (not against record or snapshot); record() and the
// snapshots from any threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/wait_histogram.hpp"

namespace admit::detail {

class admission_metrics {
 public:
  // Starts counting (from zero if called again).
  void enable(std::size_t classes, limiter_metrics::event_handler on_event, bool per_class) {
    all_ = std::make_unique<limiter_metrics>(std::move(on_event));
    by_class_.clear();
    if (!per_class) return;
    for (std::size_t c = 0; c < classes; ++c) by_class_.push_back(std::make_unique<limiter_metrics>());
  }

  // Counts one decision of class `cls`, then calls the event hook (what it throws propagates).
  void record(std::size_t cls, errc outcome, std::int64_t n, std::chrono::nanoseconds waited) {
    if (!all_) return;
    if (!by_class_.empty()) by_class_[cls]->record(outcome, n, waited);
    all_->record(outcome, n, waited);
  }

  // The counters of all classes, or of one (all 0 when not enabled, or not per class); the gauges are left to the
  // admission.
  limiter_snapshot snapshot() const noexcept { return all_ ? all_->snapshot() : limiter_snapshot{}; }
  limiter_snapshot snapshot(std::size_t cls) const noexcept {
    return by_class_.empty() ? limiter_snapshot{} : by_class_[cls]->snapshot();
  }

  // The waits of all admissions (empty when not enabled).
  const wait_histogram& wait_times() const noexcept {
    static const wait_histogram none;
    return all_ ? all_->wait_times() : none;
  }

 private:
  std::unique_ptr<limiter_metrics> all_;  // null: not enabled
  std::vector<std::unique_ptr<limiter_metrics>> by_class_;
};

}  // namespace admit::detail
