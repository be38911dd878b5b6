// Tests of the SVG chart of `admit replay --plot` (src/cli/replay/plot.hpp) and of the JSON report
// (cli/replay/report.hpp).
#include "cli/replay/plot.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/text.hpp"
#include "cli/recommend/report.hpp"
#include "cli/replay/svg.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

#include "cli/replay/replay.hpp"
#include "cli/replay/report.hpp"
#include "cli/replay/trace.hpp"

namespace {

using namespace admit::cli;

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

report_context context(const char* source = "trace.txt") {
  replay_config c;
  c.algo = algorithm::token_bucket;
  c.limit = admit::rate::parse("10/s");
  c.burst = 3;
  return {resolve(c), source};
}

replay_result sample_result(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += format_seconds(std::int64_t{i} * 7'000'000) + "\n";
  return replay(context().settings, read_trace(text));
}

TEST(Plot, WritesAWellFormedSvgWithBothPanels) {
  std::ostringstream out;
  write_svg(out, context(), sample_result(1000));
  const std::string svg = out.str();
  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u);
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_EQ(count_of(svg, "<svg"), 1u);
  EXPECT_EQ(count_of(svg, "<g"), count_of(svg, "</g>"));
  EXPECT_EQ(count_of(svg, "<text"), count_of(svg, "</text>"));
  EXPECT_NE(svg.find("admit replay: token-bucket rate=10/s burst=3 mode=allow"), std::string::npos);
  EXPECT_NE(svg.find("cumulative tokens"), std::string::npos);
  EXPECT_NE(svg.find("configured rate"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<polyline"), 3u);  // offered and admitted cumulative, admitted rate
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(Plot, SizeIsBoundedWhateverTheTraceLength) {
  std::ostringstream small, large;
  write_svg(small, context(), sample_result(100));
  write_svg(large, context(), sample_result(50'000));
  EXPECT_LT(large.str().size(), 200'000u);
}

TEST(Plot, EmptyTraceStillGivesAChart) {
  std::ostringstream out;
  write_svg(out, context(), replay(context().settings, {}));
  EXPECT_TRUE(out.str().ends_with("</svg>\n"));
  EXPECT_EQ(out.str().find("nan"), std::string::npos);
}

TEST(Plot, EscapesTextForXml) {
  EXPECT_EQ(xml_escape("a<b>&\"c\x01"), "a&lt;b&gt;&amp;&quot;c?");
  std::ostringstream out;
  write_svg(out, context("<evil & co>.txt"), sample_result(10));
  EXPECT_NE(out.str().find("&lt;evil &amp; co&gt;.txt"), std::string::npos);
  EXPECT_EQ(out.str().find("<evil"), std::string::npos);
}

TEST(Report, JsonHasTheCountsAndEscapes) {
  std::ostringstream out;
  const auto r = replay(context().settings, read_trace("0\n0\n0\n0\n0.5 2\n"));
  write_json(out, context("dir/\"quoted\"\n.txt"), r, true);
  const std::string json = out.str();
  EXPECT_NE(json.find("\"algorithm\": \"token-bucket\""), std::string::npos);
  EXPECT_NE(json.find("\"burst\": 3"), std::string::npos);
  EXPECT_NE(json.find("\"admitted\": {\n    \"arrivals\": 4,\n    \"tokens\": 5\n  }"), std::string::npos) << json;
  EXPECT_NE(json.find("\"rejected\": {\n    \"arrivals\": 1,\n    \"tokens\": 1\n  }"), std::string::npos) << json;
  EXPECT_NE(json.find("\"source\": \"dir/\\\"quoted\\\"\\n.txt\""), std::string::npos) << json;
  EXPECT_NE(json.find("{\n      \"t\": 0.5,\n      \"n\": 2,\n      \"admitted\": true\n    }"), std::string::npos)
      << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
}

// A share short of all never shows as all, nor one above none as none (6658 rejected of 6659 said "100.0%").
TEST(Report, SharesNeverRoundToAllOrNone) {
  EXPECT_EQ(share(6658, 6659), "99.98%");
  EXPECT_EQ(share(6659, 6659), "100.0%");
  EXPECT_EQ(share(1, 20000), "0.01%");
  EXPECT_EQ(share(0, 20000), "0.0%");
  EXPECT_EQ(share(426, 1000), "42.6%");
  EXPECT_EQ(share(1, 0), "-");
  EXPECT_EQ(percent(6658.0 / 6659), "99.98%");
  EXPECT_EQ(percent(1.0), "100%");
  EXPECT_EQ(percent(0.0098), "0.98%");
  EXPECT_EQ(percent(0.0), "0%");
}

TEST(Report, HumanDurations) {
  EXPECT_EQ(human_duration(0), "0s");
  EXPECT_EQ(human_duration(850), "850ns");
  EXPECT_EQ(human_duration(12'500), "12.5us");
  EXPECT_EQ(human_duration(3'250'000), "3.25ms");
  EXPECT_EQ(human_duration(1'500'000'000), "1.5s");
  // The units of every other duration admit prints or reads (it printed "2m05s" here and "2min" elsewhere).
  EXPECT_EQ(human_duration(125'000'000'000), "2.08min");
  EXPECT_EQ(human_duration(7'260'000'000'000), "2.02h");
  EXPECT_EQ(human_duration(129'600'000'000'000), "1.5d");
  // Where the rounded figure reaches the next unit, the next unit (admit decide printed reset_after=60s for 59.96 s
  // and 1min for 60 s).
  EXPECT_EQ(human_duration(59'960'000'000), "1min");
  EXPECT_EQ(human_duration(59'940'000'000), "59.9s");
  EXPECT_EQ(human_duration(999'600), "1ms");
  EXPECT_EQ(human_duration(999'600'000), "1s");
  EXPECT_EQ(human_duration(3'598'000'000'000), "1h");
  EXPECT_EQ(human_duration(86'300'000'000'000), "1d");
  for (std::int64_t ns : {850LL, 12'500LL, 3'250'000LL, 1'500'000'000LL, 125'000'000'000LL, 129'600'000'000'000LL}) {
    EXPECT_TRUE(parse_duration(human_duration(ns)).has_value()) << human_duration(ns);
  }
}

// JSON is written by nlohmann::json: UTF-8 stays UTF-8 (a file name "café.txt" came out as "caf\u00c3\u00a9.txt"),
// control characters are escaped, and bytes that are not UTF-8 become U+FFFD, so the output is always valid JSON.
TEST(Report, JsonStringsAreUtf8) {
  EXPECT_EQ(json_string("caf\xc3\xa9.txt"), "\"caf\xc3\xa9.txt\"");
  EXPECT_EQ(json_string("a\x01\xc3"), "\"a\\u0001\xef\xbf\xbd\"");
  std::ostringstream out;
  write_json(out, context("caf\xc3\xa9.txt"), replay(context().settings, read_trace("0\n")), false);
  EXPECT_NE(out.str().find("\"source\": \"caf\xc3\xa9.txt\""), std::string::npos) << out.str();
  EXPECT_TRUE(nlohmann::json::accept(out.str())) << out.str();
}

}  // namespace
