// src/redis/hash_tag.hpp — the name every distributed limiter and semaphore is known by becomes the hash tag of its
// keys, "{name}:...", so a Redis Cluster keeps them in one slot (private to the admit_redis library).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace admit::redis::detail {

// Throws std::invalid_argument "admit::redis::<what>: ..." for an empty name or one with '{' or '}'.
inline void check_tag_name(std::string_view what, const std::string& name) {
  const auto invalid = [&](const std::string& message) {
    throw std::invalid_argument("admit::redis::" + std::string(what) + ": " + message);
  };
  if (name.empty()) invalid("name must not be empty");
  if (name.find_first_of("{}") != std::string::npos) {
    invalid("name must not contain '{' or '}' (it becomes the hash tag), got \"" + name + "\"");
  }
}

// "{name}" (built piecewise: GCC 12 at -O3 warns, a -Wrestrict false positive, on "{" + name + "}").
inline std::string hash_tag(const std::string& name) {
  std::string t;
  t.reserve(name.size() + 2);
  t.push_back('{');
  t.append(name);
  t.push_back('}');
  return t;
}

}  // namespace admit::redis::detail
