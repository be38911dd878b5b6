// The permits each class is guaranteed (see class_guarantees.hpp).
#include "cli/inspect/class_guarantees.hpp"

#include <stdexcept>

#include "admit/admission_options.hpp"
#include "admit/detail/admission_classes.hpp"

namespace admit::cli {

std::vector<std::int64_t> guaranteed_permits(std::int64_t capacity, const std::vector<admit::priority_class>& classes) {
  if (capacity <= 0 || classes.empty()) return {};
  admit::admission_options o;
  o.max_in_flight = capacity;
  o.classes = classes;
  std::vector<std::int64_t> permits;
  try {
    for (const auto& c : admit::detail::plan_admission_classes(o, 0).classes) permits.push_back(c.permits);
  } catch (const std::invalid_argument&) {
    return {};
  }
  return permits;
}

}  // namespace admit::cli
