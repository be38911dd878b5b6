#include "cli/replay/log_time.hpp"

#include "cli/common/duration.hpp"

#include <array>
#include <cctype>
#include <chrono>

namespace admit::cli {

namespace {

// Reads exactly `digits` decimal digits at `pos`, advancing it.
std::optional<int> digits_at(std::string_view text, std::size_t& pos, std::size_t digits) noexcept {
  if (pos + digits > text.size()) return std::nullopt;
  int v = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  pos += digits;
  return v;
}

bool expect(std::string_view text, std::size_t& pos, char c) noexcept {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

// An optional ".ddd" (1 to 9 digits) at `pos`, as nanoseconds.
std::optional<std::int64_t> fraction_at(std::string_view text, std::size_t& pos) noexcept {
  if (pos >= text.size() || text[pos] != '.') return 0;
  ++pos;
  std::int64_t ns = 0;
  std::size_t count = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    if (++count > 9) return std::nullopt;
    ns = ns * 10 + (text[pos++] - '0');
  }
  if (count == 0) return std::nullopt;
  for (std::size_t i = count; i < 9; ++i) ns *= 10;
  return ns;
}

struct time_of_day {
  int h = 0, mi = 0, s = 0;
  std::int64_t fraction_ns = 0;
};

// Nanoseconds since the epoch of a civil date and time in UTC, less `offset_s` seconds (its zone's offset east of
// UTC), or nullopt for a date that does not exist, a time before the epoch, or one past 2^63 - 1 ns
// (2262-04-11T23:47:16.854775807Z).
std::optional<std::int64_t> to_epoch_ns(int y, int mo, int d, const time_of_day& c, std::int64_t offset_s) noexcept {
  using namespace std::chrono;
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (y < 1970 || y > 9999 || !ymd.ok() || c.h > 23 || c.mi > 59 || c.s > 59) return std::nullopt;
  // (Seconds fit easily; only their nanoseconds can overflow.)
  const std::int64_t seconds =
      ((sys_days{ymd}.time_since_epoch().count() * 24 + c.h) * 60 + c.mi) * 60 + c.s - offset_s;
  std::int64_t ns = 0;
  if (seconds < 0 || __builtin_mul_overflow(seconds, ns_per_second, &ns) ||
      __builtin_add_overflow(ns, c.fraction_ns, &ns)) {
    return std::nullopt;  // (before 1970 in UTC, a zone east of it at its first hour: as out of range as after 2262)
  }
  return ns;
}

// "+hhmm", "+hh:mm" (or '-') at `pos`, as seconds east of UTC.
std::optional<std::int64_t> offset_at(std::string_view text, std::size_t& pos, bool colon_optional) noexcept {
  if (pos >= text.size() || (text[pos] != '+' && text[pos] != '-')) return std::nullopt;
  const int sign = text[pos++] == '-' ? -1 : 1;
  const auto hh = digits_at(text, pos, 2);
  if (!hh) return std::nullopt;
  if (colon_optional && pos < text.size() && text[pos] == ':') ++pos;
  const auto mm = digits_at(text, pos, 2);
  if (!mm || *hh > 23 || *mm > 59) return std::nullopt;
  return sign * (*hh * 3600 + *mm * 60);
}

// "hh:mm:ss[.fraction]" at `pos`, advancing it.
std::optional<time_of_day> time_of_day_at(std::string_view text, std::size_t& pos) noexcept {
  const auto h = digits_at(text, pos, 2);
  if (!h || !expect(text, pos, ':')) return std::nullopt;
  const auto mi = digits_at(text, pos, 2);
  if (!mi || !expect(text, pos, ':')) return std::nullopt;
  const auto s = digits_at(text, pos, 2);
  if (!s) return std::nullopt;
  const auto fraction = fraction_at(text, pos);
  if (!fraction) return std::nullopt;
  return time_of_day{*h, *mi, *s, *fraction};
}

}  // namespace

std::optional<std::int64_t> parse_nginx_time(std::string_view text) noexcept {
  static constexpr std::array<std::string_view, 12> months = {"jan", "feb", "mar", "apr", "may", "jun",
                                                              "jul", "aug", "sep", "oct", "nov", "dec"};
  std::size_t pos = 0;
  const auto d = digits_at(text, pos, 2);
  if (!d || !expect(text, pos, '/') || pos + 3 > text.size()) return std::nullopt;
  int mo = 0;
  for (std::size_t i = 0; i < months.size(); ++i) {
    bool same = true;
    for (std::size_t k = 0; k < 3; ++k) {
      same = same && std::tolower(static_cast<unsigned char>(text[pos + k])) == months[i][k];
    }
    if (same) mo = static_cast<int>(i) + 1;
  }
  if (mo == 0) return std::nullopt;
  pos += 3;
  if (!expect(text, pos, '/')) return std::nullopt;
  const auto y = digits_at(text, pos, 4);
  if (!y || !expect(text, pos, ':')) return std::nullopt;
  const auto c = time_of_day_at(text, pos);
  if (!c || !expect(text, pos, ' ')) return std::nullopt;
  const auto offset = offset_at(text, pos, /*colon_optional=*/false);
  if (!offset || pos != text.size()) return std::nullopt;
  return to_epoch_ns(*y, mo, *d, *c, *offset);
}

std::optional<std::int64_t> parse_rfc3339_time(std::string_view text) noexcept {
  std::size_t pos = 0;
  const auto y = digits_at(text, pos, 4);
  if (!y || !expect(text, pos, '-')) return std::nullopt;
  const auto mo = digits_at(text, pos, 2);
  if (!mo || !expect(text, pos, '-')) return std::nullopt;
  const auto d = digits_at(text, pos, 2);
  if (!d || pos >= text.size() || (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' ')) return std::nullopt;
  ++pos;
  const auto c = time_of_day_at(text, pos);
  if (!c) return std::nullopt;
  std::int64_t offset = 0;
  if (pos < text.size()) {
    if (text[pos] == 'Z' || text[pos] == 'z') {
      ++pos;
    } else {
      const auto o = offset_at(text, pos, /*colon_optional=*/true);
      if (!o) return std::nullopt;
      offset = *o;
    }
  }
  if (pos != text.size()) return std::nullopt;
  return to_epoch_ns(*y, *mo, *d, *c, offset);
}

}  // namespace admit::cli
