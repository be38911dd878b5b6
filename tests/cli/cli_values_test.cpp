// Tests of the command line's values and messages (src/cli/common/values.hpp, src/cli/common/message.hpp): each option
// value is checked with a message naming the option, the whole value, and the real problem.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/common/message.hpp"
#include "cli/common/values.hpp"

namespace {

using namespace admit::cli;

template <class F>
std::string usage_message(F f) {
  try {
    f();
  } catch (const usage_error& e) {
    return e.what();
  }
  return "";
}

TEST(Quote, ShowsTheWholeTextHoweverLong) {
  // Strings built by appending: `"literal" + std::string` trips g++ 12's false -Warray-bounds/-Wrestrict at -O3.
  std::string path = "/home/someone/a checkout with spaces/";
  path.append(200, 'x').append("/no-such-trace.txt");
  std::string quoted = "\"";
  quoted.append(path).append("\"");
  EXPECT_EQ(quote(path), quoted);
}

TEST(Quote, KeepsValidUtf8AndEscapesTheRest) {
  EXPECT_EQ(quote("caf\xc3\xa9.txt"), "\"caf\xc3\xa9.txt\"");
  EXPECT_EQ(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote(std::string_view("a\0b\n", 4)), "\"a\\x00b\\x0a\"");
  EXPECT_EQ(quote("\xff\xc3"), "\"\\xff\\xc3\"");           // not UTF-8; a cut sequence
  EXPECT_EQ(quote("\xc0\xaf"), "\"\\xc0\\xaf\"");           // overlong '/'
  EXPECT_EQ(quote("\xed\xa0\x80"), "\"\\xed\\xa0\\x80\"");  // a surrogate
  EXPECT_EQ(quote("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");
}

// Valid UTF-8 that a terminal obeys instead of showing: C1 controls (U+009B CSI starts an escape sequence, "\xc2\x9b2J"
// clears the screen) and bidirectional overrides/isolates (which make "txt.exe" read as "exe.txt").
TEST(Quote, EscapesC1AndBidiControlsByCodePoint) {
  EXPECT_EQ(quote("a\xc2\x9b"
                  "2Jb"),
            "\"a\\u{9b}2Jb\"");
  EXPECT_EQ(quote("\xc2\x80\xc2\x9f"), "\"\\u{80}\\u{9f}\"");
  EXPECT_EQ(quote("x\xe2\x80\xaetxt.exe"), "\"x\\u{202e}txt.exe\"");  // U+202E RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(quote("\xe2\x80\xaa\xe2\x81\xa6\xe2\x81\xa9"), "\"\\u{202a}\\u{2066}\\u{2069}\"");
  // Their neighbours are ordinary text: U+00A0, U+2029 (paragraph separator), U+202F, U+2065 (unassigned), U+206A.
  EXPECT_EQ(quote("\xc2\xa0\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa"),
            "\"\xc2\xa0\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa\"");
  EXPECT_EQ(quote_excerpt("ab\xc2\x9b", 3), "\"ab\"...");  // counted as the two bytes it is
}

TEST(Quote, ExcerptIsBoundedAtACharacterBoundary) {
  std::string excerpt = "\"";
  excerpt.append(60, 'a').append("\"...");
  EXPECT_EQ(quote_excerpt(std::string(100, 'a')), excerpt);
  EXPECT_EQ(quote_excerpt("ab\xc3\xa9", 3), "\"ab\"...");
  EXPECT_EQ(quote_excerpt("short"), "\"short\"");
}

TEST(ShellWords, QuotesOnlyWhatAShellWouldSplitOrExpand) {
  EXPECT_EQ(shell_words({"make", "-j2", "CC=gcc-12", "out/a.o"}), "make -j2 CC=gcc-12 out/a.o");
  EXPECT_EQ(shell_words({"echo", "a b"}), "echo 'a b'");
  EXPECT_EQ(shell_words({"echo", ""}), "echo ''");
  EXPECT_EQ(shell_words({"A=b", "A=b"}), "'A=b' A=b");  // a first word with '=' is a command, not an assignment
  EXPECT_EQ(shell_words({"echo", "it's", "$HOME", "*"}), "echo 'it'\\''s' '$HOME' '*'");
}

// A shell line is shown as it is (its backslashes not doubled), unless a terminal would act on some of it.
TEST(AsShown, KeepsWhatATerminalShowsAndQuotesTheRest) {
  EXPECT_EQ(as_shown(shell_words({"sh", "-c", "echo it's \"x\""})), "sh -c 'echo it'\\''s \"x\"'");
  EXPECT_EQ(as_shown("caf\xc3\xa9 \\ \""), "caf\xc3\xa9 \\ \"");
  EXPECT_EQ(as_shown("echo 'a\nb'"), "\"echo 'a\\x0ab'\"");        // a newline would break the line
  EXPECT_EQ(as_shown("echo \x1b[2J\\"), "\"echo \\x1b[2J\\\\\"");  // an escape sequence, quoted whole
  EXPECT_EQ(as_shown("bad \xff"), "\"bad \\xff\"");
  EXPECT_EQ(as_shown(""), "");
}

// What shell_words writes, a real shell splits back into the same words (each printed on a line of its own).
TEST(ShellWords, ARealShellReadsBackTheSameWords) {
  const std::vector<std::string> words{"printf", "%s\\n", "a b", "",     "it's",      "$HOME",       "`x`",
                                       "a\\b",   "!x",    "~",   "*?[]", "tab\there", "caf\xc3\xa9", "--opt=v w"};
  const std::string line = shell_words(words);
  FILE* sh = ::popen(("/bin/sh -c " + shell_words({line})).c_str(), "r");
  ASSERT_NE(sh, nullptr);
  std::string out;
  char buf[256];
  while (const std::size_t got = std::fread(buf, 1, sizeof buf, sh)) out.append(buf, got);
  ASSERT_EQ(::pclose(sh), 0) << line;
  std::string expected;
  for (std::size_t i = 2; i < words.size(); ++i) expected += words[i] + "\n";
  EXPECT_EQ(out, expected) << line;
}

TEST(WrapText, BreaksAtSpacesWithinTheWidth) {
  EXPECT_EQ(wrap_text("one two three four", 9, 0, 2), "one two\n  three\n  four");
  EXPECT_EQ(wrap_text("one two", 20, 15, 15), "one\n               two");
  EXPECT_EQ(wrap_text("para one\npara two", 80, 0, 0), "para one\npara two");
  EXPECT_EQ(wrap_text("a|bb|ccc|dddd", 7, 0, 0), "a|bb|\nccc|\ndddd");
  EXPECT_EQ(wrap_text("x averyveryverylongword", 10, 0, 0), "x\naveryveryverylongword");
  EXPECT_EQ(wrap_text("caf\xc3\xa9 caf\xc3\xa9", 9, 0, 0), "caf\xc3\xa9 caf\xc3\xa9");  // 9 characters, 11 bytes
}

TEST(CountOption, NamesTheRange) {
  EXPECT_EQ(parse_count_option("--burst", "20", 1, 100), 20);
  EXPECT_EQ(usage_message([] { (void)parse_count_option("--burst", "0", 1, 100); }),
            "invalid --burst \"0\": must be a whole number from 1 to 100");
  EXPECT_EQ(usage_message([] { (void)parse_count_option("--burst", "-3", 1, 100); }),
            "invalid --burst \"-3\": must be a whole number from 1 to 100");  // as 0 is (it said "at least 1")
  EXPECT_EQ(usage_message([] { (void)parse_count_option("--slack", "-3", 0, 100); }),
            "invalid --slack \"-3\": must be a whole number from 0 to 100");
  EXPECT_EQ(usage_message([] { (void)parse_count_option("--limit", "many", 1, 100); }),
            "invalid --limit \"many\": expected a whole number from 1 to 100");
  EXPECT_EQ(usage_message([] { (void)parse_count_option("--limit", "99999999999999999999999", 1, 100); }),
            "invalid --limit \"99999999999999999999999\": must be a whole number from 1 to 100");
}

TEST(DurationOption, NamesTheRealProblem) {
  using namespace std::chrono_literals;
  EXPECT_EQ(parse_duration_option("--window", "1000d"), std::chrono::hours(24 * 1000));
  EXPECT_EQ(parse_duration_option("--window", "1.5s"), 1500ms);
  EXPECT_EQ(usage_message([] { (void)parse_duration_option("--window", "1000000d"); }),
            "invalid --window \"1000000d\": too large (max 1000000000s, about 31 years)");
  EXPECT_EQ(usage_message([] { (void)parse_duration_option("--window", "99999999999999999999s"); }),
            "invalid --window \"99999999999999999999s\": too large (max 1000000000s, about 31 years)");
  EXPECT_EQ(usage_message([] { (void)parse_duration_option("--timeout", "-1s"); }),
            "invalid --timeout \"-1s\": must not be negative");
  EXPECT_EQ(usage_message([] { (void)parse_duration_option("--timeout", "1sec"); }),
            "invalid --timeout \"1sec\": unknown unit \"sec\" (units ns, us, ms, s, min, h, d)");
  EXPECT_EQ(usage_message([] { (void)parse_duration_option("--timeout", "soon"); }),
            "invalid --timeout \"soon\": expected a duration such as 500ms, 1s, 10s, 2min (units ns, us, ms, s, min, "
            "h, d)");
  EXPECT_EQ(usage_message([] { (void)parse_duration_option("--timeout", "0.0000000001s"); }),
            "invalid --timeout \"0.0000000001s\": not a whole number of nanoseconds (at most 9 fraction digits of a "
            "second)");
}

TEST(RateOption, AcceptsDaysAndSpelledOutUnits) {
  EXPECT_EQ(parse_rate_option("--rate", "100/day"), admit::rate::per(100, std::chrono::hours(24)));
  EXPECT_EQ(parse_rate_option("--rate", "5/hour"), admit::rate::per(5, std::chrono::hours(1)));
  EXPECT_EQ(parse_rate_option("--rate", "100/second"), admit::rate::per_second(100));
  EXPECT_EQ(parse_rate_option("--rate", "100/minute"), admit::rate::parse("100/min"));
  EXPECT_EQ(usage_message([] { (void)parse_rate_option("--rate", "100/fortnight"); }),
            "invalid --rate \"100/fortnight\": unknown time unit; expected " + std::string(rate_syntax()));
}

}  // namespace
