// cli/inspect/class_guarantees.hpp — the permits each priority class of a limit is guaranteed, as `admit inspect` shows
// them beside the class's share: the split admit::admission makes of the concurrency limit (largest remainder), so
// that a tie the split broke is visible.
#pragma once

#include <cstdint>
#include <vector>

#include "admit/priority_class.hpp"

namespace admit::cli {

// The guaranteed permits of each of `classes` (in their order) under a concurrency limit of `capacity`; empty when
// there is no concurrency limit (capacity <= 0) or no classes, or when the shares are not a valid set (a limit whose
// definition was damaged: nothing is guaranteed that admit would not compute).
[[nodiscard]] std::vector<std::int64_t> guaranteed_permits(std::int64_t capacity,
                                                           const std::vector<admit::priority_class>& classes);

}  // namespace admit::cli
