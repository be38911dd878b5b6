// cli/common/command.hpp — what every subcommand of `admit` gives the tool, and how the tool parses a command line and
// hands it to one of them (tools/admit/main.cpp assembles the app and calls dispatch()).
//
//   CLI::App app{"admit: ...", "admit"};
//   std::vector<subcommand> commands{add_replay_command(app), add_run_command(app)};
//   return dispatch(app, commands, argc, argv, std::cerr);
//
// Each src/cli/<subcommand>/ declares its options on its own CLI::App in add_<subcommand>_command(CLI::App&), which
// returns a subcommand: the App, and what runs it once the command line is parsed. The options' values live as long
// as `run` (it owns them).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace admit::cli {

struct subcommand {
  subcommand(CLI::App* command, std::function<int()> runs) : app(command), run(std::move(runs)) {}

  CLI::App* app = nullptr;
  // Runs the command once its options are parsed; returns the exit status.
  std::function<int()> run;
  // Set by a command whose arguments after the first "--" are its own, untouched by the parser (`admit run`): they are
  // handed here before run() — nullopt when there is no "--". Unset: "--" is the parser's.
  std::function<void(std::optional<std::vector<std::string>>)> take_rest;
  // With take_rest: the first word that is not an option ends the options (CLI11's prefix_command).
  bool options_end_at_first_word = false;
};

// Reads the words after a subcommand's name in `args` (up to a "--"). `unknown`: the message for the first option
// that `app` does not know — `unknown option --brust; did you mean --burst?`, the suggestion the nearest of app's long
// options when one is close (cli/common/suggest.hpp) — empty when every option is known, or when help is asked for.
// The value of an option that takes one is skipped, so a value that starts with '-' is never taken for an option; a
// word that is not an option is a positional argument (or, with `stop_at_first_word`, the end of the options).
// `last_word_taken_by`: the option that took the last word as its value ("--timeout" for "--timeout k"; empty when
// the last word is not an option's value), to explain a positional argument said missing.
struct option_scan {
  std::string unknown;
  std::string last_word_taken_by;  // the option as written ("--timeout", "-r")
};
[[nodiscard]] option_scan scan_options(const CLI::App& app, std::span<const std::string> args, bool stop_at_first_word);

// What a command adds to its own "NAME is required" message (a positional argument it checks after parsing) when the
// parser took the command line's last word as an option's value — `; the last word, "db", was taken as the value of
// --timeout` — or "": set by dispatch() for the command it runs (the program runs one command, on one thread).
[[nodiscard]] const std::string& last_word_note() noexcept;

// Parses argv for `app` (whose subcommands are `commands`) and runs the one chosen; returns the exit status. Bad
// input — no command or an unknown one (the list of commands follows), an unknown option (named, with the nearest),
// a CLI11 error — is exit_bad_input with the message on `err`; --help and --version print and return 0. What run()
// throws is "admit <command>: <what>" on `err` and exit_failure ("out of memory" for std::bad_alloc).
int dispatch(CLI::App& app, std::span<const subcommand> commands, int argc, char** argv, std::ostream& err);

}  // namespace admit::cli
