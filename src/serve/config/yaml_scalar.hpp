// serve/config/yaml_scalar.hpp — what a YAML scalar *is* (null, boolean, integer, float or string) under the rules of
// the YAML 1.1 decoder envoyproxy/ratelimit uses (go-yaml v2), so that admit accepts and refuses the same values:
// `yes`/`on`/`y` are booleans there, `0x10` and `1_000` are integers, `1e3` is a float, and a quoted scalar is always a
// string. yaml-cpp gives the text and whether it was quoted (tag "!"); this file does the resolution. Internal.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace admit::serve::yaml {

// Whether `s` is one of `words`.
template <std::size_t N>
[[nodiscard]] bool one_of(const std::array<std::string_view, N>& words, std::string_view s) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

enum class scalar_kind : std::uint8_t { null, boolean, integer, floating, string };

// An integer as the decoder reads it: sign and magnitude; `overflow` when it is outside 64 bits (the decoder then
// treats the text as a float or a string, which this reports as scalar_kind::floating or ::string).
struct integer_value {
  bool negative = false;
  std::uint64_t magnitude = 0;
};

// The kind of a scalar or null node (maps and sequences are not scalars: do not ask).
[[nodiscard]] scalar_kind kind_of(const YAML::Node& node);
// The boolean a node holds when kind_of is boolean.
[[nodiscard]] std::optional<bool> boolean_of(const YAML::Node& node);
// The integer a node holds when kind_of is integer.
[[nodiscard]] std::optional<integer_value> integer_of(const YAML::Node& node);

// The node's kind in words for messages: "a map", "a list", "null", "the boolean yes", "the number 0.25", "the
// string \"x\"".
[[nodiscard]] std::string describe(const YAML::Node& node);

}  // namespace admit::serve::yaml
