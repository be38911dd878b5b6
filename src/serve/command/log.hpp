// serve/command/log.hpp — `admit serve`'s structured log: one JSON object per line on stderr, e.g.
//   {"time":"2026-11-25T16:00:00.123Z","level":"info","msg":"listening","grpc_port":8081,"http_port":8080}
// with a minimum level below which lines are dropped. Process-wide: the command configures it once at start, the
// transports write to it.
//
// Thread safety: every function may be called from any thread; lines are never interleaved.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string_view>

namespace admit::serve::log {

enum class level { debug = 0, info = 1, warn = 2, error = 3 };

// "debug", "info", "warn" (or "warning"), "error", in any case, and the other names of logrus's levels, which
// envoyproxy/ratelimit's LOG_LEVEL takes: "trace" (as debug), "fatal" and "panic" (as error); empty when none of those.
[[nodiscard]] std::optional<level> parse_level(std::string_view text);

// Sets the minimum level written (default info) and the stream (default std::cerr, which must outlive every write).
void configure(level minimum, std::ostream* out = nullptr);
[[nodiscard]] bool enabled(level l) noexcept;

// Writes one line: time, level, msg, then `fields` (a JSON object; other values are written under "detail").
void write(level l, std::string_view msg, const nlohmann::json& fields = nlohmann::json::object());
// The same, whatever the minimum level: for the line an operator needs at every level (where the service listens,
// which a port of 0 leaves to the system).
void write_always(level l, std::string_view msg, const nlohmann::json& fields = nlohmann::json::object());

inline void debug(std::string_view msg, const nlohmann::json& fields = nlohmann::json::object()) {
  if (enabled(level::debug)) write(level::debug, msg, fields);
}
inline void info(std::string_view msg, const nlohmann::json& fields = nlohmann::json::object()) {
  write(level::info, msg, fields);
}
inline void warn(std::string_view msg, const nlohmann::json& fields = nlohmann::json::object()) {
  write(level::warn, msg, fields);
}
inline void error(std::string_view msg, const nlohmann::json& fields = nlohmann::json::object()) {
  write(level::error, msg, fields);
}

}  // namespace admit::serve::log
