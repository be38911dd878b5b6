// `admit recommend` end to end: the built tool (ADMIT_CLI) run as a child process on files, its recommendation then
// replayed by `admit replay` (another process, reading the file again) — which must meet the target, while the limit
// 1% tighter (one less) must not. Also: standard input, an nginx log with a limit per client, --plot, and the exit
// status when no limit meets the target.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../redis/support/child_process.hpp"
#include "../redis/support/pty_process.hpp"

namespace recommend_command_test {
namespace {

namespace fs = std::filesystem;
using admit::redis::testing::run_program;
using admit::redis::testing::run_result;
using json = nlohmann::json;

class AdmitRecommend : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef ADMIT_CLI
    GTEST_SKIP() << "the admit command line tool is not built (ADMIT_BUILD_TOOLS=OFF)";
#endif
    dir_ = fs::temp_directory_path() / ("admit recommend " + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // Bursty: a request every 20 ms, and every 2 s a burst of 30 within 15 ms; one in seven asks for 2 tokens.
    std::ofstream rate(dir_ / "rate trace.txt");
    std::ofstream concurrency(dir_ / "concurrency.txt");
    int i = 0;
    for (int ms = 0; ms < 20'000; ms += 20) {
      const auto line = [&](int at_us) {
        ++i;
        rate << at_us / 1'000'000 << "." << std::setw(6) << std::setfill('0') << at_us % 1'000'000
             << (i % 7 == 0 ? " 2" : "") << "\n";
        concurrency << at_us / 1'000'000 << "." << std::setw(6) << std::setfill('0') << at_us % 1'000'000 << " 0."
                    << std::setw(3) << std::setfill('0') << 5 + (i * 37) % 300 << "\n";
      };
      line(ms * 1000);
      if (ms % 2000 == 1000) {
        for (int b = 1; b <= 30; ++b) line(ms * 1000 + b * 500);
      }
    }
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static run_result admit(std::vector<std::string> args) {
#ifdef ADMIT_CLI
    args.insert(args.begin(), ADMIT_CLI);
#endif
    return run_program(std::move(args));
  }
  std::string file(const char* name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// On a terminal the replays show their progress on standard error, erased before the report; elsewhere nothing of it.
// (The search printed nothing while it ran: seven seconds in silence on a trace of 5 million lines.)
TEST_F(AdmitRecommend, ReplaysShowTheirProgressOnATerminalOnly) {
#ifdef ADMIT_CLI
  admit::redis::testing::pty_process t(
      {ADMIT_CLI, "recommend", "-a", "token-bucket", "--max-rejected", "1%", file("rate trace.txt")});
  ASSERT_EQ(t.wait(std::chrono::seconds(60)), 0) << testing::PrintToString(t.out());
  const std::string& shown = t.out();
  const auto report = shown.find("admit recommend: token-bucket");
  ASSERT_NE(report, std::string::npos) << testing::PrintToString(shown);
  const std::string before = shown.substr(0, report);
  EXPECT_NE(before.find("\radmit recommend: 1 replay, "), std::string::npos) << testing::PrintToString(shown);
  EXPECT_TRUE(before.ends_with("\r\x1b[K")) << "not erased before the report: " << testing::PrintToString(shown);
#endif
  const run_result piped = admit({"recommend", "-a", "token-bucket", "--max-rejected", "1%", file("rate trace.txt")});
  EXPECT_EQ(piped.status, 0) << piped.err;
  EXPECT_EQ(piped.err, "");
}

TEST_F(AdmitRecommend, TheRecommendedRateMeetsTheTargetInAdmitReplayAndOnePercentLessDoesNot) {
  for (const char* algorithm : {"token-bucket", "gcra"}) {
    SCOPED_TRACE(algorithm);
    const run_result r =
        admit({"recommend", "-a", algorithm, "--burst", "5", "--max-rejected", "2%", "--json", file("rate trace.txt")});
    ASSERT_EQ(r.status, 0) << r.err;
    const json rec = json::parse(r.out);
    const double rate = rec.at("rate_per_second").get<double>();
    EXPECT_EQ(rec.at("burst"), 5);
    const auto replayed = [&](double per_second) {
      std::ostringstream text;
      text.precision(12);
      text << per_second << "/s";
      const run_result got =
          admit({"replay", "-a", algorithm, "--rate", text.str(), "--burst", "5", "--json", file("rate trace.txt")});
      EXPECT_EQ(got.status, 0) << got.err;
      const json j = json::parse(got.out);
      return std::pair{j.at("rejected").at("arrivals").get<std::int64_t>(),
                       j.at("trace").at("arrivals").get<std::int64_t>()};
    };
    const auto [rejected, arrivals] = replayed(rate);
    EXPECT_LE(rejected * 100, 2 * arrivals) << rate;
    EXPECT_EQ(rejected, rec.at("achieved").at("rejected_arrivals"));
    const auto [tighter_rejected, tighter_arrivals] = replayed(rate * 0.99);
    EXPECT_GT(tighter_rejected * 100, 2 * tighter_arrivals) << rate * 0.99;
  }
}

TEST_F(AdmitRecommend, TheRecommendedConcurrencyLimitMeetsTheTargetAndOneLessDoesNot) {
  const run_result r =
      admit({"recommend", "-a", "concurrency", "--max-wait-p99", "100ms", "--json", file("concurrency.txt")});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::int64_t limit = json::parse(r.out).at("limit").get<std::int64_t>();
  ASSERT_GT(limit, 1);
  const auto p99 = [&](std::int64_t l) {
    const run_result got =
        admit({"replay", "-a", "concurrency", "--limit", std::to_string(l), "--json", file("concurrency.txt")});
    EXPECT_EQ(got.status, 0) << got.err;
    return json::parse(got.out).at("wait_seconds").at("p99").get<double>();
  };
  EXPECT_LE(p99(limit), 0.1);
  EXPECT_GT(p99(limit - 1), 0.1);
}

TEST_F(AdmitRecommend, ReadsStandardInputAndPrintsTheCheckingCommand) {
  const run_result r = admit({"recommend", "-a", "fixed-window", "--window", "500ms", "--max-rejected", "1%", "-"});
  // run_program gives the child an empty standard input: the trace is empty, and the message says so.
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("admit recommend: stdin: the trace is empty"), std::string::npos) << r.err;

  const run_result f =
      admit({"recommend", "-a", "fixed-window", "--window", "500ms", "--max-rejected", "1%", file("rate trace.txt")});
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_NE(f.out.find("check:      admit replay --algorithm fixed-window --rate "), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("--window 500ms '" + file("rate trace.txt") + "'"), std::string::npos) << f.out;

#ifdef ADMIT_CLI
  // Read from standard input, the trace is gone once read: the check command says to give it there again.
  const run_result piped =
      run_program({"/bin/sh", "-c", "\"$1\" recommend -a fixed-window --window 500ms --max-rejected 1% - < \"$2\"",
                   "sh", ADMIT_CLI, file("rate trace.txt")});
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_NE(piped.out.find("--window 500ms -  # the same trace on standard input again\n"), std::string::npos)
      << piped.out;
#endif
}

TEST_F(AdmitRecommend, APerClientLimitFromAnNginxLog) {
  // Two clients: 10.0.0.1 sends 5 requests each second, 2001:db8::7 sends 1; 20 s. At most 0% rejected per client:
  // the least per-client rate with burst 5 is what the busier one needs.
  std::ofstream log(dir_ / "access.log");
  for (int s = 0; s < 20; ++s) {
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "[10/Oct/2026:13:55:%02d +0200]", 10 + s);
    for (int k = 0; k < 5; ++k) {
      log << "10.0.0.1 - - " << stamp << " \"GET /api HTTP/1.1\" 200 12 \"-\" \"curl/8.0\"\n";
    }
    log << "2001:db8::7 - alice " << stamp << " \"GET /a b HTTP/1.1\" 200 - \"-\" \"-\"\n";
  }
  log.close();
  const run_result r = admit({"recommend", "-a", "token-bucket", "--burst", "5", "--max-rejected", "0%", "--format",
                              "nginx", "--per-key", "client", "--json", file("access.log")});
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("trace").at("keys"), 2);
  // Five requests in the same second, every second, with a burst of 5: a refill of 5 tokens a second is needed, and
  // 1% less (4.95/s) leaves the bucket short before the next second's five.
  EXPECT_EQ(j.at("rate"), "5/s");
  EXPECT_EQ(j.at("tighter").at("meets"), false);
  EXPECT_NE(j.at("command").get<std::string>().find("--format nginx --per-key client"), std::string::npos);
}

TEST_F(AdmitRecommend, NoLimitMeetsTheTargetExitsThreeAndSaysWhy) {
  const run_result r =
      admit({"recommend", "-a", "token-bucket", "--burst", "1", "--max-rejected", "1%", file("rate trace.txt")});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.out.find("no rate meets the target"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("raise --burst"), std::string::npos) << r.out;
  // --json: the recommendation's fields are there, null (burst was left out).
  const run_result j = admit(
      {"recommend", "-a", "token-bucket", "--burst", "1", "--max-rejected", "1%", "--json", file("rate trace.txt")});
  EXPECT_EQ(j.status, 3) << j.err;
  const json doc = json::parse(j.out);
  for (const char* field : {"rate", "rate_per_second", "burst"}) {
    ASSERT_TRUE(doc.contains(field)) << field << ": " << j.out;
    EXPECT_TRUE(doc.at(field).is_null()) << field << ": " << j.out;
  }
  EXPECT_TRUE(doc.at("highest_tried").is_object()) << j.out;
}

TEST_F(AdmitRecommend, AConcurrencyPlotReplaysASpreadOfLimitsAroundTheAnswer) {
  const run_result plain =
      admit({"recommend", "-a", "concurrency", "--max-wait-p99", "100ms", "--json", file("concurrency.txt")});
  const run_result plotted = admit({"recommend", "-a", "concurrency", "--max-wait-p99", "100ms", "--json", "--plot",
                                    file("concurrency.svg"), file("concurrency.txt")});
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(plotted.status, 0) << plotted.err;
  const json a = json::parse(plain.out), b = json::parse(plotted.out);
  EXPECT_EQ(a.at("limit"), b.at("limit"));
  EXPECT_GT(b.at("replays").get<int>(), a.at("replays").get<int>());  // the curve has points beyond the search's
}

TEST_F(AdmitRecommend, PlotsTheTradeOffAndTheFrontier) {
  const run_result r = admit(
      {"recommend", "-a", "token-bucket", "--max-rejected", "1%", "--plot", file("chart.svg"), file("rate trace.txt")});
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream svg(file("chart.svg"));
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("recommended: "), std::string::npos);
  EXPECT_NE(text.find("least rate that meets the target, for each burst"), std::string::npos);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace recommend_command_test
