// What `admit` says to bad input, end to end: the built tool (ADMIT_CLI, its path, given by tools/admit/CMakeLists.txt)
// run as a child process, one row a command line: its exit status and a text its standard error must contain. Every
// subcommand's options are here: an unknown option is named as such with the nearest known one, and never blames a
// valid argument; a bad value is named with the option, the value as typed and what is accepted. No message shows a
// C++ name (admit::...). The rows that need a running Redis are in tests/redis/cli/redis_cli_failures_test.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../redis/support/child_process.hpp"

namespace {

namespace fs = std::filesystem;
using admit::redis::testing::run_program;
using admit::redis::testing::run_result;

// "@trace" in a row's arguments is a small trace file, "@dir" a directory (both exist), "@locks" a lock directory.
struct row {
  std::vector<std::string> args;
  int status;
  std::string err_contains;
  std::string err_lacks = {};  // a text standard error must not contain ("@trace": the trace's path)
};

class AdmitMessages : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef ADMIT_CLI
    GTEST_SKIP() << "the admit command line tool is not built (ADMIT_BUILD_TOOLS=OFF)";
#endif
    dir_ = fs::temp_directory_path() / ("admit messages " + std::to_string(::getpid()));
    fs::create_directories(dir_ / "config dir");
    std::ofstream(dir_ / "trace.txt") << "0\n0.5 2\n1\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string expand(const std::string& word) const {
    if (word == "@trace") return (dir_ / "trace.txt").string();
    if (word == "@dir") return (dir_ / "config dir").string();
    if (word == "@locks") return (dir_ / "locks").string();
    return word;
  }

  run_result admit(const std::vector<std::string>& args) const {
    std::vector<std::string> argv;
#ifdef ADMIT_CLI
    argv.push_back(ADMIT_CLI);
#endif
    for (const auto& a : args) argv.push_back(expand(a));
    return run_program(std::move(argv));
  }

  // Whether this build has the subcommand (decide needs admit::redis, serve ADMIT_SERVE).
  bool has(const std::string& command) {
    const auto [at, added] = built_.try_emplace(command, false);
    if (added) at->second = admit({command, "--help"}).status == 0;
    return at->second;
  }

  void check(const std::vector<row>& rows) {
    for (const row& r : rows) {
      if (!has(r.args.front())) continue;
      const run_result got = admit(r.args);
      std::string line = "admit";
      for (const auto& a : r.args) line += " " + a;
      SCOPED_TRACE(line);
      EXPECT_EQ(got.status, r.status) << got.err;
      EXPECT_NE(got.err.find(r.err_contains), std::string::npos) << "stderr: " << got.err;
      EXPECT_EQ(got.err.find("admit::"), std::string::npos) << "a C++ name: " << got.err;
      EXPECT_EQ(got.err.find("not expected"), std::string::npos) << "blames an argument: " << got.err;
      if (!r.err_lacks.empty()) {
        EXPECT_EQ(got.err.find(expand(r.err_lacks)), std::string::npos) << got.err;
      }
    }
  }

  fs::path dir_;
  std::map<std::string, bool> built_;
};

TEST_F(AdmitMessages, UnknownOptionsAreNamedWithTheNearestKnownOne) {
  check({
      // replay: the mistyped option is named, the valid trace file after its value is not.
      {{"replay", "-a", "token-bucket", "-r", "1/s", "--brust", "5", "@trace"},
       2,
       "admit replay: unknown option --brust; did you mean --burst?\n",
       "@trace"},
      {{"replay", "-a", "token-bucket", "-r", "1/s", "--frobnicate", "@trace"},
       2,
       "admit replay: unknown option --frobnicate (`admit replay --help` lists the options)\n"},
      {{"replay", "-a", "gcra", "-r", "1/s", "--widnow=2s", "@trace"},
       2,
       "unknown option --widnow; did you mean --window?"},
      {{"replay", "-x", "-a", "gcra", "-r", "1/s", "@trace"}, 2, "admit replay: unknown option -x ("},
      // decide
      {{"decide", "--redis", "redis://127.0.0.1:1", "--rtae", "1/s", "k"},
       2,
       "unknown option --rtae; did you mean --rate?"},
      {{"decide", "--redis", "redis://127.0.0.1:1", "-r", "1/s", "--fail-opne", "k"},
       2,
       "unknown option --fail-opne; did you mean --fail-open?"},
      // inspect
      {{"inspect", "--mots", "5", "db"}, 2, "admit inspect: unknown option --mots; did you mean --most?"},
      // run: a mistyped option before the command is an error, not the command (it ran "--tiemout": exit 127).
      {{"run", "--concurrency", "1", "--name", "n", "--tiemout", "5s", "--", "echo", "hi"},
       2,
       "admit run: unknown option --tiemout; did you mean --timeout?"},
      {{"run", "-c", "1", "--name", "n", "--lock-dri", "@locks", "--", "true"}, 2, "did you mean --lock-dir?"},
      // A letter of a cluster of short options that is no option (it ran "-Z" as the command: exit 127).
      {{"run", "-c", "2", "--name", "u", "-qZ", "--", "echo", "RAN"}, 2, "admit run: unknown option -Z ("},
      {{"run", "-c", "2", "--name", "u", "-qx", "--", "echo", "RAN"}, 2, "admit run: unknown option -x ("},
      {{"run", "--name", "u", "-q5", "--", "echo", "RAN"}, 2, "admit run: unknown option -5 ("},
      // serve
      {{"serve", "--confgi", "@dir"}, 2, "admit serve: unknown option --confgi; did you mean --config?"},
  });
}

TEST_F(AdmitMessages, WhatTheParserRefusesIsSaidAsTheSubcommands) {
  check({
      // An argument too many is named (the valid trace before it is not).
      {{"replay", "-a", "gcra", "-r", "1/s", "@trace", "extra.txt"},
       2,
       "admit replay: unexpected argument \"extra.txt\" ("},
      {{"replay", "-a", "gcra", "-r"}, 2, "admit replay: --rate needs a value (RATE)"},
      {{"decide", "k"}, 2, "admit decide: --redis is required"},
      {{"run", "--concurrency"}, 2, "admit run: --concurrency needs a value (N)"},
      {{"inspect"}, 2, "admit inspect: name is required"},
      // The positional argument taken as the value of an option left without one (it said only "key is required").
      {{"decide", "--redis", "redis://127.0.0.1:1", "-r", "1/s", "--timeout", "k"},
       2,
       "admit decide: key is required; the last word, \"k\", was taken as the value of --timeout ("},
      // The same for inspect's name, which inspect checks itself (a positional argument or --name).
      {{"inspect", "--redis", "redis://127.0.0.1:1", "--timeout", "db"},
       2,
       "admit inspect: name is required: admit inspect NAME, or --name NAME; the last word, \"db\", was taken as the "
       "value of --timeout ("},
      // The name as admit run gives it (it was "unknown option --name"), or as NAME: once.
      {{"inspect", "--name", "nosuch", "--lock-dir", "@locks"}, 1, "admit inspect: no local limit named \"nosuch\""},
      {{"inspect", "db", "--name", "dc"}, 2, "admit inspect: the name is given twice, as NAME (\"db\") and as --name"},
      // Rates this host's limit cannot count: an internal message before ("rate interval -9223372036854775808ns is
      // not positive").
      {{"run", "--rate", "0.000000001/year", "--name", "n", "--", "true"}, 2, "takes more than 2^62 ns (146 years)"},
      {{"run", "--rate", "1000000000000/s", "--name", "n", "--", "true"}, 2, "more than one start a nanosecond"},
      // This host's limits are read at once: a --timeout there was accepted and ignored, whatever its value.
      {{"inspect", "--timeout", "abc", "kk"}, 2, "admit inspect: --timeout applies only with --redis"},
      {{"serve", "--fail-open", "--fail-closed"}, 2, "admit serve: --fail-open excludes --fail-closed"},
      // One port for both (it was "cannot listen for HTTP ...: Address already in use", exit 1).
      {{"serve", "--config", "@dir", "--grpc-port", "7777", "--http-port", "7777"},
       2,
       "admit serve: --grpc-port and --http-port are both 7777: gRPC and HTTP need a port each"},
      // A name left out takes the next option as its value: it made a limit named "--no-wait" and ran the command.
      {{"run", "-c", "1", "--name", "--no-wait", "echo", "hi"},
       2,
       "admit run: invalid --name \"--no-wait\": a name does not begin with '-' (was the name left out before that "
       "option?)"},
      // A value left out takes the next option as the value: said so (it said "--name is required").
      {{"run", "--concurrency", "--name", "x", "--", "echo", "hi"},
       2,
       "admit run: --concurrency needs a value: it took the option \"--name\" as its value (was the value left out "
       "before that option?)"},
      {{"run", "--name", "x", "--rate", "--concurrency", "2", "--", "true"}, 2, "admit run: --rate needs a value"},
      // A port not given is named as the default's (it said "--grpc-port and --http-port are both 8081").
      {{"serve", "--config", "@dir", "--http-port", "8081"},
       2,
       "admit serve: the default gRPC port and --http-port are both 8081: gRPC and HTTP need a port each"},
      // An option given twice (CLI11 said "--config: At Most 1 required but received 2").
      {{"serve", "--config", "@a", "--config", "@b"}, 2, "admit serve: --config is given 2 times; give it once"},
      {{"run", "-c", "1", "-c", "2", "--name", "n", "--", "true"}, 2, "admit run: --concurrency is given 2 times"},
  });
}

TEST_F(AdmitMessages, WordsAfterTheOptionsAreTheCommandsOwn) {
  check({
      // After "--", and from the first word that is not an option, what follows is the command's.
      {{"run", "-c", "1", "--name", "n", "--lock-dir", "@locks", "--", "sh", "-c", "exit 3", "--tiemout"}, 3, ""},
      {{"run", "-c", "1", "--name", "n", "--lock-dir", "@locks", "sh", "-c", "exit 4", "--tiemout"}, 4, ""},
  });
}

TEST_F(AdmitMessages, BadValuesNameTheOptionTheValueAndWhatIsAccepted) {
  check({
      // --rate, as replay, decide and run read it.
      {{"replay", "-a", "gcra", "-r", "-5/s", "@trace"},
       2,
       "invalid --rate \"-5/s\": the count must not be negative; expected N/s"},
      {{"replay", "-a", "gcra", "--rate", "1e10/s", "@trace"},
       2,
       "invalid --rate \"1e10/s\": the count \"1e10\" has an exponent; write its digits out"},
      {{"replay", "-a", "gcra", "-r", "5/-1s", "@trace"},
       2,
       "invalid --rate \"5/-1s\": the period \"-1s\" must be a unit with no sign"},
      {{"replay", "-a", "gcra", "-r", "5/", "@trace"}, 2, "invalid --rate \"5/\": missing the unit after '/'"},
      {{"run", "-c", "1", "--rate", "-5/s", "--name", "n", "--", "true"}, 2, "invalid --rate \"-5/s\": the count must"},
      {{"decide", "--redis", "redis://127.0.0.1:1", "--rate", "1e10/s", "k"},
       2,
       "invalid --rate \"1e10/s\": the count"},
      // replay's other options.
      {{"replay", "-a", "token-bucket", "-r", "1/s", "-b", "ten", "@trace"},
       2,
       "invalid --burst \"ten\": expected a whole number"},
      {{"replay", "-a", "fixed-window", "-r", "1/s", "-w", "1 sec", "@trace"}, 2, "invalid --window \"1 sec\""},
      {{"replay", "-a", "pacer", "-r", "1/s", "--slack", "-1", "@trace"},
       2,
       "invalid --slack \"-1\": must be a whole number from 0 to 1000000000"},
      {{"replay", "-a", "warmup", "-r", "1/s", "--warmup", "ten", "@trace"}, 2, "invalid --warmup \"ten\""},
      {{"replay", "-a", "gcra", "-r", "1/s", "-m", "later", "@trace"},
       2,
       "invalid --mode \"later\": expected allow or reserve"},
      {{"replay", "-a", "leaky", "-r", "1/s", "@trace"},
       2,
       "unknown --algorithm \"leaky\": expected one of token-bucket|"},
      {{"replay", "-a", "concurrency", "-l", "many", "@trace"}, 2, "invalid --limit \"many\": expected a whole number"},
      {{"replay", "-a", "concurrency", "-l", "2", "--max-waiters", "few", "@trace"},
       2,
       "invalid --max-waiters \"few\""},
      {{"replay", "-a", "concurrency", "-l", "2", "--timeout", "soon", "@trace"}, 2, "invalid --timeout \"soon\""},
      // --plot names a directory: said so, not "only SVG is written".
      {{"replay", "-a", "gcra", "-r", "1/s", "--plot", "@dir", "@trace"},
       2,
       "\": it is a directory; give a file name ending in .svg"},
      // decide: its own algorithms only, a rate Redis takes, its numbers.
      {{"decide", "--redis", "redis://127.0.0.1:1", "-a", "concurrency", "-r", "1/s", "k"},
       2,
       "unknown --algorithm \"concurrency\": expected one of "
       "token-bucket|gcra|fixed-window|sliding-window|sliding-log\n"},
      {{"decide", "--redis", "redis://127.0.0.1:1", "-a", "pacer", "-r", "1/s", "k"},
       2,
       "invalid --algorithm \"pacer\": it has no distributed form; use gcra, token-bucket, fixed-window, "
       "sliding-window or sliding-log\n"},
      {{"decide", "--redis", "redis://127.0.0.1:1", "--rate", "0/s", "k"},
       2,
       "invalid --rate \"0/s\": must be above zero"},
      {{"decide", "--redis", "redis://127.0.0.1:1", "-r", "1/s", "--cost", "many", "k"}, 2, "invalid --cost \"many\""},
      {{"decide", "--redis", "redis://127.0.0.1:1", "-r", "1/s", "--timeout", "0s", "k"},
       2,
       "invalid --timeout \"0s\": must be positive"},
      {{"decide", "--redis", "redis://127.0.0.1:1", "-r", "1/s", "-b", "0", "k"}, 2, "invalid --burst \"0\""},
      // inspect: the name and the numbers, before any connection.
      {{"inspect", "--redis", "redis://127.0.0.1:1", "{admit}"},
       2,
       "invalid NAME \"{admit}\": name must not contain '{' or '}'"},
      {{"inspect", "--most", "zero", "db"}, 2, "invalid --most \"zero\": expected a whole number"},
      {{"inspect", "--redis", "redis://127.0.0.1:1", "--timeout", "soon", "db"}, 2, "invalid --timeout \"soon\""},
      // run
      {{"run", "--concurrency", "many", "--name", "n", "--", "true"},
       2,
       "invalid --concurrency \"many\": expected a whole number"},
      {{"run", "-c", "2", "--weight", "0", "--name", "n", "--", "true"}, 2, "invalid --weight \"0\""},
      {{"run", "-c", "1", "--max-waiters", "some", "--name", "n", "--", "true"}, 2, "invalid --max-waiters \"some\""},
      {{"run", "-c", "1", "--timeout", "soon", "--name", "n", "--", "true"},
       2,
       "invalid --timeout \"soon\": expected a duration"},
      {{"run", "-c", "1", "--redis", "redis://127.0.0.1:1", "--on-lease-lost", "pause", "--name", "n", "--", "true"},
       2,
       "invalid --on-lease-lost \"pause\": use term, kill or ignore"},
      {{"run", "-c", "2", "--redis", "redis://127.0.0.1:1", "--classes", "a=0.5,b=x", "--name", "n", "--", "true"},
       2,
       "invalid --classes \"a=0.5,b=x\": the share of \"b\" must be a number from 0 to 1, got \"x\""},
      {{"run", "-c", "2", "--redis", "redis://127.0.0.1:1", "--classes", "a=0.75,b=0.5", "--name", "n", "--", "true"},
       2,
       "the shares sum to 1.25, more than 1"},
      {{"run", "-c", "2", "--redis", "redis://127.0.0.1:1", "--classes", "a=0.5", "--name", "n", "--", "true"},
       2,
       "give two classes or more"},
      {{"run", "-c", "2", "--redis", "redis://127.0.0.1:1", "--classes", "a=0.5,b=0.5", "--class", "c", "--name", "n",
        "--", "true"},
       2,
       "invalid --class \"c\": not one of --classes's (a, b)"},
      {{"run", "-c", "2", "--classes", "a=0.5,b=0.5", "--class", "c", "--name", "n", "--", "true"},
       2,
       "invalid --class \"c\": not one of --classes's (a, b)"},
      {{"run", "-c", "2", "--class", "a", "--name", "n", "--", "true"}, 2, "--class applies only with --classes"},
      // the sum of the shares as written, not its binary approximation (1.2999999999999998)
      {{"run", "-c", "2", "--classes", "a=0.7,b=0.6", "--name", "n", "--", "true"}, 2, "the shares sum to 1.3, more"},
      {{"run", "--rate", "1/day", "--classes", "a=0.0000000001,b=0.5", "--name", "n", "--", "true"},
       2,
       "invalid --classes \"a=0.0000000001,b=0.5\": the share of \"a\" (0.0000000001) of --rate 1/d would refill"},
      // serve
      {{"serve", "--config", "@dir", "--redis-timeout", "soon"},
       2,
       "invalid --redis-timeout \"soon\": expected a whole number of milliseconds"},
      {{"serve", "--config", "@dir", "--grpc-port", "http"}, 2, "--grpc-port"},
  });
}

TEST_F(AdmitMessages, RecommendNamesTheOptionTheValueAndWhatIsAccepted) {
  check({
      {{"recommend", "-a", "token-bucket", "--max-rejectd", "1%", "@trace"},
       2,
       "admit recommend: unknown option --max-rejectd; did you mean --max-rejected?"},
      {{"recommend", "-a", "pacer", "--max-rejected", "1%", "@trace"},
       2,
       "invalid --algorithm \"pacer\": admit recommend takes "
       "token-bucket|gcra|fixed-window|sliding-window|concurrency"},
      {{"recommend", "-a", "token-bucket", "@trace"}, 2, "a target is needed: --max-rejected P%"},
      {{"recommend", "-a", "token-bucket", "--max-rejected", "1", "@trace"},
       2,
       "invalid --max-rejected \"1\": expected a percentage from 0% to 100%"},
      {{"recommend", "-a", "token-bucket", "--max-rejected", "101%", "@trace"}, 2, "invalid --max-rejected \"101%\""},
      {{"recommend", "-a", "token-bucket", "--max-rejected", "1%", "--max-delay-p99", "1s", "@trace"},
       2,
       "--max-delay-p99 \"1s\" applies to --mode reserve"},
      {{"recommend", "-a", "gcra", "--mode", "reserve", "@trace"}, 2, "--mode reserve needs --max-delay-p99"},
      {{"recommend", "-a", "fixed-window", "--mode", "reserve", "--max-delay-p99", "1s", "@trace"},
       2,
       "--mode reserve does not apply to fixed-window"},
      {{"recommend", "-a", "fixed-window", "--burst", "5", "--max-rejected", "1%", "@trace"},
       2,
       "--burst \"5\" does not apply to fixed-window"},
      {{"recommend", "-a", "token-bucket", "--burst", "0", "--max-rejected", "1%", "@trace"}, 2, "--burst"},
      {{"recommend", "-a", "concurrency", "@trace"}, 2, "--algorithm concurrency needs a target: --max-wait-p99"},
      {{"recommend", "-a", "concurrency", "--max-timed-out", "1%", "@trace"},
       2,
       "--max-timed-out \"1%\" needs a bounded queue"},
      {{"recommend", "-a", "concurrency", "--max-wait-p99", "1s", "--burst", "3", "@trace"},
       2,
       "--burst \"3\" does not apply to concurrency"},
      {{"recommend", "-a", "token-bucket", "--max-rejected", "1%", "--per-key", "client", "@trace"},
       2,
       "--per-key \"client\" needs a key on each line"},
      {{"recommend", "-a", "token-bucket", "--max-rejected", "1%", "--plot", "@dir", "@trace"}, 2, "it is a directory"},
      {{"recommend", "-a", "token-bucket", "--max-rejected", "1%", "@dir"}, 2, "cannot read trace"},
      {{"recommend", "-a", "fixed-window", "--window", "1ns", "--max-rejected", "1%", "@trace"},
       2,
       "invalid --window \"1ns\": too short for fixed-window to count even one request a window"},
  });
}

// `admit serve` is the program admit-serve, run in admit's place with the same command line (serve's options are
// admit-serve's: admit itself does not know them) and found beside admit; an admit without it says where it looked
// (exit 69, EX_UNAVAILABLE), never that `serve` is not a command.
TEST_F(AdmitMessages, ServeIsTheServiceProgramRunInAdmitsPlace) {
  if (!has("serve")) GTEST_SKIP() << "built without admit serve";
  const run_result typo = admit({"serve", "--config", "@dir", "--grcp-port", "0"});
  EXPECT_EQ(typo.status, 2) << typo.err;
  EXPECT_EQ(typo.err, "admit serve: unknown option --grcp-port; did you mean --grpc-port?\n");
  const run_result version = admit({"serve", "--version"});
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_EQ(version.out.rfind("admit ", 0), 0U) << version.out;
  const run_result help = admit({"help", "serve"});
  EXPECT_EQ(help.status, 0) << help.err;
  EXPECT_NE(help.out.find("--grpc-port"), std::string::npos) << help.out;

  const fs::path alone = dir_ / "an admit alone";
  fs::create_directories(alone);
#ifdef ADMIT_CLI
  fs::copy_file(ADMIT_CLI, alone / "admit");
#endif
  const run_result missing = run_program({(alone / "admit").string(), "serve", "--config", expand("@dir")});
  EXPECT_EQ(missing.status, 69) << missing.err;
  EXPECT_NE(missing.err.find("admit serve: admit-serve, the service's program, is not installed: none of \"" +
                             (alone / "admit-serve").string() + "\", \""),
            std::string::npos)
      << missing.err;
  EXPECT_NE(missing.err.find("libexec/admit/admit-serve\" can be run"), std::string::npos) << missing.err;
}

}  // namespace
