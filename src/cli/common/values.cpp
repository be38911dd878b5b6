#include "cli/common/values.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/detail/format_double.hpp"
#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"

namespace admit::cli {

namespace {

std::string head(std::string_view option, std::string_view text) {
  return "invalid " + std::string(option) + " " + quote(text) + ": ";
}

}  // namespace

std::int64_t parse_count_option(std::string_view option, std::string_view text, std::int64_t min, std::int64_t max) {
  const std::string range = "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  // A negative number is out of the range like any other (0 and -1 said two different things).
  if (!text.empty() && text.front() == '-' && text.size() > 1 &&
      text.find_first_not_of("0123456789", 1) == std::string_view::npos) {
    throw usage_error(head(option, text) + range);
  }
  bool digits = !text.empty();
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  if (!digits)
    throw usage_error(head(option, text) + "expected a whole number from " + std::to_string(min) + " to " +
                      std::to_string(max));
  const auto v = parse_whole_number(text);
  if (!v || *v < min || *v > max) throw usage_error(head(option, text) + range);
  return *v;
}

std::chrono::nanoseconds parse_duration_option(std::string_view option, std::string_view text) {
  const duration_parse d = parse_duration_diagnosed(text);
  if (d.value) return *d.value;
  const std::string units = "units " + std::string(duration_units());
  std::string why;
  if (!text.empty() && text.front() == '-') {
    why = "must not be negative";
  } else {
    switch (d.problem) {
      case duration_problem::missing_unit:
        why = "missing a unit after the number (" + units + "), e.g. " + std::string(text) + "s";
        break;
      case duration_problem::unknown_unit: {
        if (text.find_first_of(" \t") != std::string_view::npos) {
          why = "expected a duration such as 500ms, 1s, 10s, 2min, without spaces (" + units + ")";
          break;
        }
        std::size_t k = 0;
        while (k < text.size() && ((text[k] >= '0' && text[k] <= '9') || text[k] == '.')) ++k;
        why = "unknown unit " + quote(text.substr(k)) + " (" + units + ")";
        break;
      }
      case duration_problem::too_precise:
        why = "not a whole number of nanoseconds (at most 9 fraction digits of a second)";
        break;
      case duration_problem::too_large:
        why = "too large (max " + std::to_string(max_duration_seconds) + "s, about 31 years)";
        break;
      case duration_problem::malformed:
      case duration_problem::none:
        why = "expected a duration such as 500ms, 1s, 10s, 2min (" + units + ")";
        break;
    }
  }
  throw usage_error(head(option, text) + why);
}

std::string classes_option(const std::vector<admit::priority_class>& classes) {
  std::string s;
  for (const auto& c : classes) s += (s.empty() ? "" : ",") + c.name + "=" + admit::detail::format_double(c.share);
  return s;
}

std::string_view rate_syntax() noexcept {
  return "N/s, N/ms, N/min, N/h, N/day, N/500ms (N a non-negative decimal) or inf; units ns, us, ms, s, min, h, d, "
         "and second, minute, hour, day, week, month, year";
}

namespace {

bool all_digits(std::string_view text) noexcept {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Why `text` is not a rate, in the words of what the user typed: admit::rate says what it could not read ("the count
// is not a number"), which for a sign or an exponent is not the mistake the user made.
std::string rate_problem(std::string_view text, const std::string& library_message) {
  const auto slash = text.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view count = text.substr(0, slash), period = text.substr(slash + 1);
    if (!count.empty() && count.front() == '-') return "the count must not be negative";
    if (const auto e = count.find_first_of("eE"); e != std::string_view::npos && e > 0) {
      return "the count " + quote(count) + " has an exponent; write its digits out (as 10000000000, not 1e10)";
    }
    if (!period.empty() && (period.front() == '-' || period.front() == '+')) {
      return "the period " + quote(period) + " must be a unit with no sign (s, 500ms, min, ...)";
    }
    if (period.empty()) return "missing the unit after '/'";
    if (!count.empty() && !all_digits(count) && count.find_first_not_of("0123456789.") != std::string_view::npos) {
      return "the count " + quote(count) + " is not a number";
    }
  }
  // admit::rate says why ("...: unknown time unit (expected ...)"); keep its reason, word the rest as an option.
  const auto from = library_message.find("\": ");
  const auto to = library_message.rfind(" (expected");
  if (from != std::string::npos && to != std::string::npos && to > from + 3) {
    return library_message.substr(from + 3, to - from - 3);
  }
  return "not a rate";
}

}  // namespace

void refuse_if_given(std::string_view option, const std::optional<std::string>& value, std::string_view what,
                     std::string_view why) {
  if (value) {
    throw usage_error(std::string(option) + " " + quote(*value) + " does not apply to " + std::string(what) + " (" +
                      std::string(why) + ")");
  }
}

admit::rate parse_rate_option(std::string_view option, std::string_view text) {
  try {
    return admit::rate::parse(text);
  } catch (const std::invalid_argument& e) {
    throw usage_error(head(option, text) + rate_problem(text, e.what()) + "; expected " + std::string(rate_syntax()));
  }
}

std::vector<admit::priority_class> parse_classes(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return usage_error("invalid --classes " + quote(text) + ": " + why +
                       " (e.g. --classes interactive=0.75,batch=0.25: each class's guaranteed share)");
  };
  std::vector<admit::priority_class> out;
  double sum = 0;
  std::size_t at = 0;
  for (;;) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, end - at);
    const std::size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) throw bad(quote(part) + " is not NAME=SHARE");
    admit::priority_class c{part.substr(0, eq), 0.0};
    // A name is shown by inspect and in every event, and given again by --class: no spaces or control characters,
    // which would not survive those (a leading space made --class NAME match no class).
    for (const char ch : c.name) {
      if (static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f) {
        throw bad("the class name " + quote(c.name) +
                  " has a space or a control character; names are words such as "
                  "interactive or batch-2");
      }
    }
    const std::string share = part.substr(eq + 1);
    const char* first = share.data();
    const char* last = first + share.size();
    const auto [ptr, ec] = std::from_chars(first, last, c.share, std::chars_format::fixed);
    if (share.empty() || ec != std::errc() || ptr != last || !(c.share >= 0 && c.share <= 1)) {
      throw bad("the share of " + quote(c.name) + " must be a number from 0 to 1, got " + quote(share));
    }
    for (const auto& o : out) {
      if (o.name == c.name) throw bad(quote(c.name) + " is given twice");
    }
    sum += c.share;
    out.push_back(std::move(c));
    if (end == text.size()) break;
    at = end + 1;
  }
  if (out.size() < 2) throw bad("give two classes or more (one class is the limit itself)");
  if (sum > 1 + 1e-9) {
    // Nine significant digits: the sum of decimal shares as written (0.7 + 0.6 is 1.2999999999999998 in binary).
    char total[32];
    std::snprintf(total, sizeof total, "%.9g", sum);
    throw bad("the shares sum to " + std::string(total) + ", more than 1");
  }
  return out;
}

}  // namespace admit::cli
