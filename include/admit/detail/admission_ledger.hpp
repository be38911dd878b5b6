// admit/detail/admission_ledger.hpp — the classes of admit::admission and the permits they hold: each class's plan,
// assured bucket, queue and permit engine (detail/admission_permits.hpp), the permits held per class and in all, and
// whether releases call back (armed: requests wait) or are collected at the next decision (disarmed).
// Not thread-safe: every member under the admission's mutex (the engines' releases come from any thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "admit/detail/admission_classes.hpp"
#include "admit/detail/admission_permits.hpp"
#include "admit/detail/admission_queue.hpp"
#include "admit/detail/saturating.hpp"

namespace admit::detail {

struct admission_class {
  admission_class(void* owner, std::size_t c, const admission_class_plan& p,
                  admission_permits::on_release_fn on_release) noexcept
      : permits(owner, c, on_release), plan(p) {}
  admission_permits permits;  // its requests' permits come from and go back to its engine
  admission_class_plan plan;
  std::int64_t assured_tat = ns_min;
  std::int64_t held = 0;  // permits held (while disarmed, including those released and not yet collected)
  admission_queue queue;
};

struct admission_ledger {
  std::vector<std::unique_ptr<admission_class>> classes;
  std::int64_t held = 0;  // all classes
  bool armed = false;     // the engines call back on release

  void take(admission_class& k, std::int64_t n) noexcept {
    k.held += n;
    held += n;
  }
  void give_back(admission_class& k, std::int64_t n) noexcept {
    k.held -= n;
    held -= n;
  }
  // Disarmed: collects the permits released since the last decision.
  void collect() noexcept {
    for (auto& k : classes) give_back(*k, k->permits.reclaim());
  }
  // Arms (every release calls back: requests may wait) or disarms (releases are collected: nobody waits) the
  // classes' engines, collecting what was released before.
  void switch_releases(bool arm) noexcept {
    armed = arm;
    for (auto& k : classes) give_back(*k, arm ? k->permits.arm() : k->permits.disarm());
  }
  // Permits held now, without those released and not yet collected.
  std::int64_t held_now(const admission_class& k) const noexcept {
    return k.held - (armed ? 0 : k.permits.engine().available());
  }
  std::int64_t held_now() const noexcept {
    std::int64_t h = held;
    if (!armed) {
      for (const auto& k : classes) h -= k->permits.engine().available();
    }
    return h;
  }
};

}  // namespace admit::detail
