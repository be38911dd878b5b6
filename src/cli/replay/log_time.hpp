// cli/replay/log_time.hpp — the timestamps of access logs, read exactly into nanoseconds since the Unix epoch (UTC).
//
//   parse_nginx_time("10/Oct/2000:13:55:36 -0700")    // nginx $time_local (the common and combined formats)
//   parse_rfc3339_time("2016-04-15T20:17:00.310Z")    // Envoy's %START_TIME%, RFC 3339 / ISO 8601
//
// The zone is applied: "13:55:36 -0700" is 20:55:36 UTC. Both forms take an optional fraction of up to 9 digits after
// the seconds ("13:55:36.250"). RFC 3339 takes 'T', 't' or a space between date and time, and 'Z', 'z', "+hh:mm",
// "+hhmm" or no zone at all (read as UTC) after it. Times from 1970 to 2262-04-11T23:47:16.854775807Z (the largest
// nanosecond count an int64 holds); a leap second (":60") is refused.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace admit::cli {

// `dd/Mon/yyyy:hh:mm:ss[.fraction] ±hhmm` (month in English, three letters, any case). nullopt when it is not one.
[[nodiscard]] std::optional<std::int64_t> parse_nginx_time(std::string_view text) noexcept;

// `yyyy-mm-ddThh:mm:ss[.fraction][Z|±hh:mm|±hhmm]`. nullopt when it is not one.
[[nodiscard]] std::optional<std::int64_t> parse_rfc3339_time(std::string_view text) noexcept;

}  // namespace admit::cli
