// admit/admission_options.hpp — the configuration of admit::admission (<admit/admission.hpp>) and the event its
// on_admitted hook receives. Value types.
//
//   admit::admission_options o{.rate = admit::rate::per_second(100), .burst = 10, .max_in_flight = 8,
//                              .classes = {{"interactive", 0.7}, {"batch", 0.3}}};
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

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
  // Permits in flight at most, in [0, 2^59]; 0: no concurrency limit (permits are still handed out and counted, at
  // most 2^59 in all, so that the counts cannot overflow). A request asks for n in [1, 2^59] permits.
  std::int64_t max_in_flight = 0;
  // Requests that may wait at once (all classes together); the next one that would wait fails with queue_full.
  std::size_t max_waiters = std::numeric_limits<std::size_t>::max();
  // The priority classes; a request's `priority` is an index into them. Empty: one class, index 0, with share 1.
  std::vector<priority_class> classes = {};
  // Called once per admission, on the admitted request's thread (an asynchronous one's: on its handler's executor,
  // just before the handler), after the admission's mutex is released (it may call into the admission). Must be
  // safe to call from many threads at once. May be empty.
  std::function<void(const admission_event&)> on_admitted = {};
};

}  // namespace admit
