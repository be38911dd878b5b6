// Tests of what `admit replay` refuses and says (cli/replay/options.hpp, cli/common/window_limit.hpp): window limits
// that are not whole, an empty trace, a plot format it does not write, a terminal on standard input.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "cli/common/duration.hpp"
#include "cli/common/window_limit.hpp"
#include "cli/replay/options.hpp"
#include "cli/replay/replay.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace cli_replay_command_test {

namespace {

using namespace admit::cli;

replay_config config_for(algorithm a, const char* r, const std::function<void(replay_config&)>& edit = {}) {
  replay_config c;
  c.algo = a;
  c.limit = admit::rate::parse(r);
  if (edit) edit(c);
  return c;
}

replay_settings settings_for(algorithm a, const char* r, const std::function<void(replay_config&)>& edit = {}) {
  return resolve(config_for(a, r, edit));
}

replay_options options_for(const char* algo, const char* r) {
  replay_options o;
  o.algorithm = algo;
  o.rate = r;
  return o;
}

std::string resolve_error(const replay_config& c) {
  try {
    (void)resolve(c);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A window counts whole requests: rate × window that is not whole is refused (exit 2 on the command line), naming the
// rates and the window that would fit; it was rounded down without a word (199/s in 10ms windows enforced 100/s).
TEST(ReplayResolve, WindowLimitIsNeverRounded) {
  const auto with_window = [](std::chrono::nanoseconds w) { return [w](replay_config& c) { c.window = w; }; };
  auto c = config_for(algorithm::fixed_window, "199/s", with_window(std::chrono::milliseconds(10)));
  c.rate_text = "199/s";
  EXPECT_EQ(resolve_error(c),
            "--rate 199/s with --window 10ms gives 1.99 requests per window, and a window counts whole requests; use "
            "--rate 100/s or 200/s (1 or 2 per 10ms window), or --window 1s (199 per window)");
  c = config_for(algorithm::sliding_window, "100/min");
  c.rate_text = "100/min";
  EXPECT_EQ(resolve_error(c),
            "--rate 100/min with --window 1s gives 1.667 requests per window, and a window counts whole requests; use "
            "--rate 60/min or 120/min (1 or 2 per 1s window), or --window 600ms (1 per window)");
  c = config_for(algorithm::sliding_log, "1/70ms");
  c.rate_text = "1/70ms";
  EXPECT_EQ(resolve_error(c),
            "--rate 1/70ms with --window 1s gives 14.286 requests per window, and a window counts whole requests; use "
            "--rate 14/s or 15/s (14 or 15 per 1s window), or --window 980ms (14 per window)");
  // Every suggestion is accepted, and gives the count it names.
  for (const char* r : {"199/s", "100/min", "1/70ms", "7/3s", "2.5/s", "1/min", "123.456/h"}) {
    for (auto w :
         {std::chrono::nanoseconds(std::chrono::milliseconds(10)), std::chrono::nanoseconds(std::chrono::seconds(1)),
          std::chrono::nanoseconds(std::chrono::seconds(45))}) {
      auto cfg = config_for(algorithm::fixed_window, r, with_window(w));
      cfg.rate_text = r;
      const std::string message = resolve_error(cfg);
      if (message.empty()) continue;
      const auto use = message.find("; use --rate ");
      ASSERT_NE(use, std::string::npos) << message;
      const auto rate_end = message.find(' ', use + 13);
      const std::string suggested = message.substr(use + 13, rate_end - use - 13);
      auto fixed = cfg;
      fixed.limit = admit::rate::parse(suggested);
      fixed.rate_text = suggested;
      EXPECT_EQ(resolve_error(fixed), "") << message;
      const auto window_at = message.find(", or --window ");
      if (window_at != std::string::npos) {
        const auto start = window_at + 14;
        const std::string window_text = message.substr(start, message.find(' ', start) - start);
        auto other = cfg;
        other.window = parse_duration(window_text);
        ASSERT_TRUE(other.window.has_value()) << message;
        EXPECT_EQ(resolve_error(other), "") << message;
      }
    }
  }
  // The library's window limiters take the limit as a whole number: nothing to round there.
  EXPECT_EQ(settings_for(algorithm::fixed_window, "200/s", with_window(std::chrono::milliseconds(10))).window_limit, 2);
}

TEST(ReplayCommand, SaysItReadsATerminal) {
  auto o = options_for("token-bucket", "1/s");
  o.stdin_is_terminal = true;
  std::istringstream in("0\n");
  std::ostringstream out, err;
  EXPECT_EQ(run_replay(o, in, out, err), exit_ok);
  EXPECT_EQ(err.str(),
            "admit replay: reading the trace from standard input (end with Ctrl-D; --help for the options)\n");
  o.stdin_is_terminal = false;
  std::istringstream again("0\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(run_replay(o, again, out2, err2), exit_ok);
  EXPECT_EQ(err2.str(), "");
}

TEST(ReplayCommand, RefusesAnEmptyTraceAndAPlotThatIsNotSvg) {
  for (const char* algo : {"token-bucket", "concurrency"}) {
    auto o = options_for(algo, "1/s");
    if (std::string(algo) == "concurrency") {
      o.rate.reset();
      o.limit = "2";
    }
    std::istringstream in("# nothing\n\n");
    std::ostringstream out, err;
    EXPECT_EQ(run_replay(o, in, out, err), exit_bad_input) << algo;
    EXPECT_NE(err.str().find("admit replay: stdin: the trace is empty"), std::string::npos) << err.str();
    EXPECT_EQ(out.str(), "");
    o.plot = "chart.png";
    std::istringstream one("0 1 1\n");
    std::ostringstream out2, err2;
    EXPECT_EQ(run_replay(o, one, out2, err2), exit_bad_input) << algo;
    EXPECT_EQ(err2.str(),
              "admit replay: cannot write --plot \"chart.png\": only SVG is written; use a file name ending in .svg\n");
  }
}

// For `admit decide`: Redis counts windows in whole microseconds, and a window that is not would be rounded up.
TEST(WindowLimit, WholeWindowsOfTheDistributedLimiters) {
  using std::chrono::microseconds;
  using std::chrono::nanoseconds;
  EXPECT_NO_THROW(require_whole_window(std::chrono::seconds(1), microseconds(1), "microseconds", "Redis"));
  EXPECT_NO_THROW(require_whole_window(nanoseconds(1500), nanoseconds(1), "nanoseconds", "admit"));
  try {
    require_whole_window(nanoseconds(1500), microseconds(1), "microseconds", "Redis");
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "--window 1500ns is not a whole number of microseconds, which Redis counts windows in; use --window "
                 "1us or 2us");
  }
  try {
    require_whole_window(nanoseconds(500), microseconds(1), "microseconds", "Redis");
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "--window 500ns is not a whole number of microseconds, which Redis counts windows in; use --window "
                 "1us");
  }
}

// For `admit decide`: Redis's gcra and token bucket space requests 1/rate apart rounded up to whole microseconds; a
// rate that rounding would slow by more than 0.1% is refused, naming what it would become and the rates that fit.
TEST(WindowLimit, RatesTheDistributedLimitersSpaceInWholeMicroseconds) {
  using std::chrono::microseconds;
  const auto refusal = [](const char* text) -> std::string {
    try {
      require_close_rate(admit::rate::parse(text), text, microseconds(1), "microseconds", "Redis");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  // Up to 1,000/s every rate passes (an interval of at least 1000us is slowed by less than 1us in 1000).
  for (const char* ok : {"1/s", "3/s", "7/s", "100/min", "999/s", "1000/s", "1/333us", "1000000/s", "0.5/day"}) {
    EXPECT_EQ(refusal(ok), "accepted") << ok;
  }
  EXPECT_EQ(refusal("1001/s"), "accepted");  // 999.000999us -> 1000us: 0.0999% slower
  EXPECT_EQ(refusal("inf"), "accepted");     // left to the limiter (it admits everything)
  EXPECT_EQ(refusal("3000/s"),
            "--rate 3000/s would be slowed to 2994.012/s: Redis spaces requests a whole number of microseconds apart "
            "(334, not 333.333); use --rate 1/333us or 1/334us (3003.003/s or 2994.012/s)");
  EXPECT_EQ(refusal("180000/min"),
            "--rate 180000/min would be slowed to 179640.719/min: Redis spaces requests a whole number of "
            "microseconds apart (334, not 333.333); use --rate 1/333us or 1/334us (180180.18/min or 179640.719/min)");
  EXPECT_EQ(refusal("2000000/s"),
            "--rate 2000000/s would be slowed to 1000000/s: Redis spaces requests a whole number of microseconds "
            "apart (1, not 0.5); use --rate 1/us (1000000/s), the fastest it spaces");
  // The boundary: slowed by exactly 0.1% passes (499.5us -> 500us), by more is refused (499.499us -> 500us).
  EXPECT_EQ(refusal("1/499500ns"), "accepted");
  EXPECT_EQ(refusal("1/499499ns"),
            "--rate 1/499499ns would be slowed to 2000/s: Redis spaces requests a whole number of microseconds "
            "apart (500, not 499.499); use --rate 1/499us or 1/500us (2004.008/s or 2000/s)");
  // Nanosecond rounding of the local limiters has no granularity to refuse.
  EXPECT_NO_THROW(
      require_close_rate(admit::rate::parse("3/s"), "3/s", std::chrono::nanoseconds(1), "nanoseconds", "admit"));
}

}  // namespace

}  // namespace cli_replay_command_test
