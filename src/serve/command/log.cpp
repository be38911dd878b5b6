#include "serve/command/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "cli/common/text.hpp"

namespace admit::serve::log {
namespace {

std::atomic<int> minimum_level{static_cast<int>(level::info)};
admit::detail::mutex write_mutex;
std::ostream* sink ADMIT_GUARDED_BY(write_mutex) ADMIT_PT_GUARDED_BY(write_mutex) = nullptr;  // null: std::cerr

std::string_view name(level l) noexcept {
  switch (l) {
    case level::debug:
      return "debug";
    case level::info:
      return "info";
    case level::warn:
      return "warn";
    case level::error:
      return "error";
  }
  return "info";
}

// RFC 3339 UTC with milliseconds.
std::string now_text() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace

std::optional<level> parse_level(std::string_view text) {
  const std::string lower = cli::ascii_lower(text);
  if (lower == "debug" || lower == "trace") return level::debug;
  if (lower == "info") return level::info;
  if (lower == "warn" || lower == "warning") return level::warn;
  if (lower == "error" || lower == "fatal" || lower == "panic") return level::error;
  return std::nullopt;
}

void configure(level minimum, std::ostream* out) {
  minimum_level.store(static_cast<int>(minimum), std::memory_order_relaxed);
  const admit::detail::lock_guard lock(write_mutex);
  sink = out;
}

bool enabled(level l) noexcept { return static_cast<int>(l) >= minimum_level.load(std::memory_order_relaxed); }

void write(level l, std::string_view msg, const nlohmann::json& fields) {
  if (enabled(l)) write_always(l, msg, fields);
}

void write_always(level l, std::string_view msg, const nlohmann::json& fields) {
  nlohmann::ordered_json line;
  line["time"] = now_text();
  line["level"] = name(l);
  line["msg"] = msg;
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items()) line[key] = value;
  } else if (!fields.is_null()) {
    line["detail"] = fields;
  }
  // Invalid UTF-8 (a client's bytes quoted in a message) is replaced, never a reason to lose the line.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  const admit::detail::lock_guard lock(write_mutex);
  std::ostream& out = sink != nullptr ? *sink : std::cerr;
  out << text;
  out.flush();
}

}  // namespace admit::serve::log
