// cli/common/suggest.hpp — the nearest of some names to what the user typed, for "did you mean --burst?".
//
//   nearest_name("brust", {"burst", "rate", "window"})   -> "burst"
//   nearest_name("frobnicate", {"burst", "rate"})        -> nullopt (nothing is close)
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace admit::cli {

// The optimal string alignment distance: insertions, deletions, substitutions and transpositions of two adjacent
// characters ("brust" -> "burst" is 1), each counting 1. Bytes are compared, so a UTF-8 character may count as more.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest `typed` by edit_distance, when it is close: at most a third of `typed`'s length away (at
// least 1), and nearer than the length of either, so that a short or unrelated word gets no suggestion. Ties go to
// the first candidate.
[[nodiscard]] std::optional<std::string> nearest_name(std::string_view typed, std::span<const std::string> candidates);

}  // namespace admit::cli
