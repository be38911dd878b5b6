// cli/common/decimal.hpp — the decimal numbers of `admit`'s options and traces, parsed exactly (no floating point):
// whole numbers ("0042" is 42) and seconds with up to 9 fraction digits ("1.5" is exactly 1500000000 ns).
//
//   parse_seconds("0.1")        -> 100000000
//   parse_whole_number("-3")    -> nullopt (no sign: the caller says what a negative value means)
//   format_seconds(1500000000)  -> "1.5"
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace admit::cli {

// The largest count any option or trace line takes (--burst, --limit, --concurrency, n of an arrival...): keeps every
// limiter's arithmetic far from overflow.
inline constexpr std::int64_t max_count = 1'000'000'000;

// Parses a decimal number of seconds with up to 9 fraction digits ("1", "1.5", "0.000000001") into exact
// nanoseconds. Returns nullopt for anything else (sign, exponent, empty, bare '.', > 9 fraction digits, overflow).
[[nodiscard]] std::optional<std::int64_t> parse_seconds(std::string_view text) noexcept;

// Parses a non-empty run of decimal digits ("0042" is 42). Returns nullopt for anything else or on int64 overflow.
[[nodiscard]] std::optional<std::int64_t> parse_whole_number(std::string_view text) noexcept;

// Formats nanoseconds as the shortest decimal seconds parse_seconds() reads back exactly: 1500000000 -> "1.5",
// 2000000000 -> "2", 1 -> "0.000000001". Negative values get a leading '-'.
[[nodiscard]] std::string format_seconds(std::int64_t ns);

}  // namespace admit::cli
