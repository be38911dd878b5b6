// admit/acquire_result.hpp — the outcome of a wait for permits: the permit, or why there is none.
//
//   if (auto r = sem.try_acquire_for(10ms)) use(r.value());
//   else if (r.error() == admit::errc::queue_full) shed();
//
// An admit::expected<admit::permit, admit::errc> (see admit/expected.hpp): has_value() / operator bool, value()
// (throws std::system_error carrying the error when there is none), *r and r-> (unchecked), error() (errc{} when
// the permits were acquired).
#pragma once

#include "admit/errc.hpp"
#include "admit/expected.hpp"
#include "admit/permit.hpp"

namespace admit {

using acquire_result = expected<permit, errc>;

}  // namespace admit
