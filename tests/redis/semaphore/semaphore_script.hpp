// Calls of semaphore.lua straight from a test, as another process's semaphore would make them: its source, and the
// arguments of an EVAL of it for the semaphore named `name`.
#pragma once

#include <string>
#include <vector>

#include "core.hpp"

namespace admit::redis::testing {

// The script's source, as EVAL takes it (the semaphore calls it as a library's function where the server has them).
inline std::string semaphore_source() { return detail::semaphore_script().source(); }

// EVAL `source` with the keys of semaphore `name`, then `argv` (the operation, the initial capacity, its arguments).
inline std::vector<std::string> eval_args(const std::string& source, const std::string& name,
                                          const std::vector<std::string>& argv) {
  const auto keys = detail::semaphore_keys(detail::key_prefix(name));
  std::vector<std::string> a{"EVAL", source, std::to_string(keys.size())};
  a.insert(a.end(), keys.begin(), keys.end());
  a.insert(a.end(), argv.begin(), argv.end());
  return a;
}

}  // namespace admit::redis::testing
