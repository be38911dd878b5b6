// cli/common/values.hpp — the values of `admit`'s options, checked: counts, durations and rates.
//
//   const std::int64_t burst = parse_count_option("--burst", "20", 1, max_count);
//   const auto window = parse_duration_option("--window", "500ms");
//   const admit::rate r = parse_rate_option("--rate", "100/day");
//
// Each throws usage_error with a message that names the option, quotes the value whole, and says what is wrong and
// what would be accepted: `invalid --window "1000000d": too large (max 1000000000s, about 31 years)`.
// Every subcommand (replay, decide, inspect) parses its options through these, so the words are the same everywhere.
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admit/priority_class.hpp"
#include "admit/rate.hpp"
#include "cli/common/message.hpp"

namespace admit::cli {

// A whole number from `min` to `max` (decimal digits only).
[[nodiscard]] std::int64_t parse_count_option(std::string_view option, std::string_view text, std::int64_t min,
                                              std::int64_t max);

// A duration as cli/common/duration.hpp reads it (0 allowed; the caller refuses it where it means nothing).
[[nodiscard]] std::chrono::nanoseconds parse_duration_option(std::string_view option, std::string_view text);

// A rate as admit::rate::parse reads it ("100/s", "5/hour", "1/week", "inf").
[[nodiscard]] admit::rate parse_rate_option(std::string_view option, std::string_view text);

// Refuses `option` when it was given (`value` set): it does not apply to `what` (an algorithm); `why` says what does.
// Throws usage_error: `--burst "5" does not apply to fixed-window (a window counts requests per --window)`.
void refuse_if_given(std::string_view option, const std::optional<std::string>& value, std::string_view what,
                     std::string_view why);

// Priority classes as --classes gives them: "interactive=0.75,batch=0.25" (each share the shortest decimal that reads
// back as it).
[[nodiscard]] std::string classes_option(const std::vector<admit::priority_class>& classes);
// Its inverse, --classes NAME=SHARE[,NAME=SHARE...]: two classes or more, names distinct, shares from 0 to 1 summing
// to at most 1. Throws usage_error naming the value and what is wrong.
[[nodiscard]] std::vector<admit::priority_class> parse_classes(const std::string& text);

// What --rate accepts, for messages and help: "N/s, N/ms, N/min, N/h, N/day, N/500ms (N a non-negative decimal) or
// inf; units ns, us, ms, s, min, h, d, and second, minute, hour, day, week, month, year".
[[nodiscard]] std::string_view rate_syntax() noexcept;

}  // namespace admit::cli
