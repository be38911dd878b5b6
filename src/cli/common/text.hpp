// cli/common/text.hpp — small pieces of the human reports: a count with its noun in the right number, a column padded
// on the left, a share as a percentage.
//
//   plural(1, "arrival", "arrivals")   -> "1 arrival"
//   pad_left("42", 5)                  -> "   42"
//   share(1, 8)                        -> "12.5%"   (share(x, 0) -> "-")
//   ascii_lower("SVG")                 -> "svg"
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace admit::cli {

// "<n> <one>" when n is 1, else "<n> <many>".
[[nodiscard]] std::string plural(std::int64_t n, std::string_view one, std::string_view many);

// `s` with spaces in front up to `width` bytes (unchanged when already as wide).
[[nodiscard]] std::string pad_left(const std::string& s, std::size_t width);

// part / whole as a percentage with one decimal ("42.6%"), "-" when whole is 0.
[[nodiscard]] std::string share(std::int64_t part, std::int64_t whole);

// `s` with A-Z as a-z, every other byte unchanged (whatever the locale): for names matched in any case.
[[nodiscard]] std::string ascii_lower(std::string_view s);

}  // namespace admit::cli
