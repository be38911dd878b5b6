// cli/duration.hpp — durations on the command line: "1s", "500ms", "10s", "2min", "1.5s", "250us", "1h".
//
// A duration is a non-negative decimal (up to 9 fraction digits, no sign or exponent) followed at once by a unit —
// ns, us, ms, s, min or h — and is parsed exactly into integer nanoseconds (no floating point). The result must be a
// whole number of nanoseconds ("1.5ns" is refused) and at most max_duration_seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace admit::cli {

// The longest duration accepted (~31.7 years).
inline constexpr std::int64_t max_duration_seconds = 1'000'000'000;

// Returns nullopt when `text` is not a duration as described above.
[[nodiscard]] std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) noexcept;

// The shortest form parse_duration() reads back exactly, in the largest unit that keeps it whole when one does:
// 1s -> "1s", 500ms -> "500ms", 2min -> "2min", 1500ms -> "1500ms", 0 -> "0s".
[[nodiscard]] std::string format_duration(std::chrono::nanoseconds d);

}  // namespace admit::cli
