// cli/common/duration.hpp — durations on the command line: "1s", "500ms", "10s", "2min", "1.5s", "250us", "1h", "7d".
//
// A duration is a non-negative decimal (up to 9 fraction digits, no sign or exponent) followed at once by a unit —
// ns, us, ms, s, min, h or d (a day, 24 h) — and is parsed exactly into integer nanoseconds (no floating point). The
// result must be a whole number of nanoseconds ("1.5ns" is refused) and at most max_duration_seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace admit::cli {

inline constexpr std::int64_t ns_per_ms = 1'000'000;
inline constexpr std::int64_t ns_per_second = 1'000'000'000;

// The longest duration accepted (~31.7 years).
inline constexpr std::int64_t max_duration_seconds = 1'000'000'000;

// Why a text is not a duration.
enum class duration_problem {
  none,
  malformed,     // not <decimal><unit> (empty, a sign, an exponent, a stray '.', no digits)
  missing_unit,  // a number without a unit
  unknown_unit,  // a number followed by something that is not a unit
  too_precise,   // more than 9 fraction digits, or not a whole number of nanoseconds
  too_large,     // above max_duration_seconds
};

struct duration_parse {
  std::optional<std::chrono::nanoseconds> value;  // set when problem == none
  duration_problem problem = duration_problem::none;
};

// Parses `text` as described above and says what is wrong when it cannot.
[[nodiscard]] duration_parse parse_duration_diagnosed(std::string_view text) noexcept;

// Returns nullopt when `text` is not a duration as described above.
[[nodiscard]] std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) noexcept;

// "ns, us, ms, s, min, h, d": the units parse_duration accepts, for messages.
[[nodiscard]] std::string_view duration_units() noexcept;

// The shortest form parse_duration() reads back exactly, in the largest unit that keeps it whole when one does:
// 1s -> "1s", 500ms -> "500ms", 2min -> "2min", 1500ms -> "1500ms", 0 -> "0s". This is the one format of durations
// in admit's human output (reports, messages); JSON carries seconds as numbers.
[[nodiscard]] std::string format_duration(std::chrono::nanoseconds d);

// A short human form of a duration in ns, three significant digits at most, in the units durations are written in
// everywhere in admit (as format_duration): "0s", "850ns", "12.5us", "3.25ms", "1.5s", "2.08min", "2.02h", "1.5d".
[[nodiscard]] std::string human_duration(std::int64_t ns);

}  // namespace admit::cli
