// What `admit inspect` says of an `admit run` beside its entry (see run_condition.hpp).
#include "cli/inspect/run_condition.hpp"

#include <ostream>

namespace admit::cli {

run_condition condition_of(const run_entry& e, std::optional<std::chrono::microseconds> lease_left,
                           std::string_view dead_suffix) {
  run_condition c;
  c.dead_because = run_entry_death(e, lease_left);
  if (c.dead_because) {
    c.dead_because->append(dead_suffix);
  } else {
    c.stopped_because = run_entry_stopped(e);
  }
  return c;
}

void add_condition(nlohmann::ordered_json& j, const run_condition& c) {
  j["dead"] = c.dead_because.has_value();
  if (c.dead_because) j["dead_because"] = *c.dead_because;
  j["stopped"] = c.stopped_because.has_value();
  if (c.stopped_because) j["stopped_because"] = *c.stopped_because;
}

void print_condition(std::ostream& out, const run_condition& c) {
  if (c.dead_because) {
    out << "  DEAD: " << *c.dead_because;
  } else if (c.stopped_because) {
    out << "  STOPPED: " << *c.stopped_because;
  }
}

std::string list_cut(std::size_t shown, std::size_t all) {
  return shown < all ? "the first " + std::to_string(shown) + " of " + std::to_string(all) : std::string();
}

}  // namespace admit::cli
