// admit/priority_class.hpp — a priority class of admit::admission: a name and its guaranteed share.
//
//   admit::admission_options o{.max_in_flight = 10, .classes = {{"interactive", 0.6}, {"batch", 0.2}}};
//
// `share` is the fraction (0 to 1) of max_in_flight and of the rate that the class is guaranteed (admission.hpp says
// exactly how); the shares of all classes sum to at most 1. A value type.
#pragma once

#include <string>

namespace admit {

struct priority_class {
  std::string name = {};  // for messages and metrics; not interpreted
  double share = 0;       // in [0, 1]
};

}  // namespace admit
