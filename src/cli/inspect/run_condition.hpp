// cli/inspect/run_condition.hpp — what both forms of `admit inspect` (a local limit's, a Redis one's) say of an
// `admit run` beside its entry, and of a list that --most cut: one wording and one set of JSON keys for both.
#pragma once

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "cli/common/json.hpp"
#include "cli/common/run_holder.hpp"

namespace admit::cli {

// A run's condition: dead (why), or else stopped (why), or neither while it runs. Never both: a dead run is not also
// said to be stopped.
struct run_condition {
  std::optional<std::string> dead_because, stopped_because;
};

// `e`'s condition (run_entry_death, run_entry_stopped); `lease_left` as run_entry_death takes it. `dead_suffix` is
// appended to why it is dead (a local entry outlives its run while a process it started holds its lock).
[[nodiscard]] run_condition condition_of(const run_entry& e, std::optional<std::chrono::microseconds> lease_left,
                                         std::string_view dead_suffix = {});

// Into an entry's JSON: "dead" and "stopped" (booleans), and "dead_because" or "stopped_because" when either is true.
void add_condition(nlohmann::ordered_json& j, const run_condition& c);

// After an entry's line: "  DEAD: why" or "  STOPPED: why", or nothing.
void print_condition(std::ostream& out, const run_condition& c);

// "the first SHOWN of ALL" when a list was cut (shown < all), else empty.
[[nodiscard]] std::string list_cut(std::size_t shown, std::size_t all);

}  // namespace admit::cli
