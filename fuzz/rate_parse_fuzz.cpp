// libFuzzer target: admit::rate::parse and the command line's duration parser on arbitrary text.
//
// Invariants: parsing never crashes and fails only with std::invalid_argument naming the input; a parsed rate is
// non-negative and round-trips through to_string() and parse() (to within floating-point rounding of the count);
// a parsed duration round-trips exactly through format_duration().
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "admit/rate.hpp"
#include "cli/common/duration.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  (void)what;  // read it in the debugger; the trap is what libFuzzer reports
  __builtin_trap();
}

void check_rate(std::string_view text) {
  admit::rate r;
  try {
    r = admit::rate::parse(text);
  } catch (const std::invalid_argument& e) {
    // The message quotes the input with control and non-ASCII bytes escaped (\xNN), cut after 80 characters: it must
    // contain the input's printable prefix verbatim.
    std::size_t printable = 0;
    while (printable < text.size() && printable < 80 && text[printable] >= 0x20 && text[printable] < 0x7f) {
      ++printable;
    }
    if (std::string_view(e.what()).find(text.substr(0, printable)) == std::string_view::npos) {
      fail("message does not name the input");
    }
    return;
  }
  if (!(r.interval_ns() >= 0)) fail("negative or NaN interval");
  const std::string shown = r.to_string();
  admit::rate back;
  try {
    back = admit::rate::parse(shown);
  } catch (const std::invalid_argument&) {
    fail("to_string() output does not parse");
  }
  if (r.is_inf() != back.is_inf() || r.is_zero() != back.is_zero()) fail("inf/zero lost in the round trip");
  if (!r.is_inf() && !r.is_zero()) {
    const double a = r.interval_ns();
    const double b = back.interval_ns();
    if (std::abs(a - b) > 1e-8 * std::max(a, b)) fail("interval changed in the round trip");
    // Not every interval has a decimal form that parses back to it exactly, but one round trip reaches a fixed point.
    const std::string again = back.to_string();
    const admit::rate back2 = admit::rate::parse(again);
    if (!(back2 == back) || back2.to_string() != again) fail("to_string() does not reach a fixed point");
  }
}

void check_duration(std::string_view text) {
  const auto d = admit::cli::parse_duration(text);
  if (!d) return;
  if (d->count() < 0) fail("negative duration");
  if (admit::cli::parse_duration(admit::cli::format_duration(*d)) != d) fail("duration does not round-trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_rate(text);
  check_duration(text);
  return 0;
}
