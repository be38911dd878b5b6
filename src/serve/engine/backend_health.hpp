// serve/engine/backend_health.hpp — whether the backend (Redis) counts the decisions, as the decisions see it, and
// what to say about it: one event when it starts failing (with the first error), one when it counts again, and while
// it fails, a summary every interval of the calls the failure policy decided. Never one per call: an outage of a
// million calls is two lines and one a minute. A backend that flaps (a rule whose hits fail while the others count)
// says so at most once an interval: a failure within an interval of the last event starts an outage silently, which
// the next summary reports (and only an outage that was reported ends with a `counting` event); silent outages that
// ended before a summary came are reported together, once the interval has passed, by a `failed_meanwhile` event.
//
//   backend_health health;                        // summaries every minute
//   if (auto e = health.failed("Redis at 127.0.0.1:6379 did not answer", true, now)) log(*e);   // the first: logged
//   if (auto e = health.summary_due(now + 61s)) log(*e);     // 1 call decided open in the last minute
//   if (auto e = health.answered(now + 62s)) log(*e);        // counting again, after 62 s
//
// Thread safety: every member may be called from any thread. answered() takes no lock while the backend is healthy
// (one relaxed atomic load), so the decisions' hot path pays nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::serve {

struct backend_event {
  enum class kind {
    failing,   // the first failure after the backend last counted one
    summary,   // still failing: what happened since the last event
    counting,  // counting again: the outage is over
    // counting, after outages that were not reported (they began within an interval of the last event, and ended
    // before a summary): what they decided, and how long they lasted together
    failed_meanwhile,
  };
  kind what = kind::failing;
  std::string error;  // failing: the first failure's message; summary: the latest one
  // summary, counting: hits the failure policy decided since the last event, by what it answered.
  std::int64_t decided_open = 0, decided_closed = 0;
  // summary, counting: since the first failure; failed_meanwhile: the outages' durations added up
  std::chrono::steady_clock::duration failing_for{};
};

class backend_health {
 public:
  using clock = std::chrono::steady_clock;

  // Throws std::invalid_argument when `summary_every` is not positive.
  explicit backend_health(clock::duration summary_every = std::chrono::minutes(1));

  // A hit the backend could not count, decided by the failure policy (`open`: answered OK). Returns the `failing`
  // event when the backend was counting until now and the last event is at least an interval old.
  std::optional<backend_event> failed(std::string_view error, bool open, clock::time_point now);
  // A hit the backend counted. Returns the `counting` event when it ends an outage that was reported.
  std::optional<backend_event> answered(clock::time_point now);
  // While failing: the `summary` event when `summary_every` has passed since the last event; while counting after
  // outages that were not reported, the `failed_meanwhile` event then (nothing otherwise).
  std::optional<backend_event> summary_due(clock::time_point now);

  [[nodiscard]] bool failing() const noexcept { return failing_.load(std::memory_order_relaxed); }

 private:
  backend_event take(backend_event::kind what, clock::time_point now) ADMIT_REQUIRES(mutex_);

  const clock::duration summary_every_;
  std::atomic<bool> failing_{false};
  admit::detail::mutex mutex_;
  // The current outage has been reported (a failing or summary event).
  bool reported_ ADMIT_GUARDED_BY(mutex_) = false;
  std::optional<clock::time_point> last_event_ ADMIT_GUARDED_BY(mutex_);
  clock::time_point since_ ADMIT_GUARDED_BY(mutex_){};
  std::string latest_error_ ADMIT_GUARDED_BY(mutex_);
  std::int64_t open_ ADMIT_GUARDED_BY(mutex_) = 0;
  std::int64_t closed_ ADMIT_GUARDED_BY(mutex_) = 0;
  // Outages that ended without being reported, not yet told (their decisions are in open_ and closed_), and how long
  // they lasted together.
  bool unreported_ ADMIT_GUARDED_BY(mutex_) = false;
  clock::duration unreported_for_ ADMIT_GUARDED_BY(mutex_){};
};

}  // namespace admit::serve
