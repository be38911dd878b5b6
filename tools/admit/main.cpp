// admit — the command line face of the admit library.
//
//   admit replay --algorithm token-bucket --rate 100/s --burst 20 data/sample_trace.txt
//   admit replay --algorithm concurrency --limit 8 --max-waiters 20 --timeout 500ms data/sample_concurrency_trace.txt
//   admit recommend --algorithm token-bucket --burst 20 --max-rejected 1% data/sample_trace.txt
//   admit decide --redis redis://127.0.0.1:6379 --rate 10/s --burst 5 nightly-export   (built with admit::redis)
//   admit inspect --redis redis://127.0.0.1:6379 db-queries                              (built with admit::redis)
//   admit run --concurrency 3 --name db -- ./query.sh                                    (--redis URL: across hosts)
//   admit serve --config examples/serve/config              (built with ADMIT_SERVE: runs admit-serve, serve_main.cpp)
//
// Exit status: 0 success (decide: admitted), 2 bad input (an option, the trace, an unreadable file), 1 anything else;
// decide and inspect also 75 (refused, or a Redis failure that may pass) and 69 (one that will not): see their --help;
// run passes its command's status through (cli/run/run.hpp).
//
// This file only assembles the tool: each subcommand declares its options in src/cli/<subcommand>/, and
// cli/common/command.hpp parses the command line and runs the one it names.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli/common/command.hpp"
#include "cli/inspect/inspect_command.hpp"
#include "cli/recommend/recommend_command.hpp"
#include "cli/replay/replay_command.hpp"
#include "cli/run/run_command.hpp"
#include "help_formatter.hpp"
#ifdef ADMIT_CLI_WITH_REDIS
#include "cli/decide/decide_command.hpp"
#endif
#ifdef ADMIT_CLI_WITH_SERVE
#include "serve/command/serve_command.hpp"
#include "serve_program.hpp"
#endif

int main(int argc, char** argv) {
  namespace cli = admit::cli;
  std::ios::sync_with_stdio(false);
#ifdef ADMIT_CLI_WITH_SERVE
  // The service is its own program (serve_program.hpp): admit does not load it for its other commands.
  if (argc > 1 && std::string_view(argv[1]) == "serve") return cli::run_serve_program(argv, std::cerr);
  if (argc == 3 && std::string_view(argv[1]) == "help" && std::string_view(argv[2]) == "serve") {
    static char serve[] = "serve", help[] = "--help";
    char* serve_help[] = {argv[0], serve, help, nullptr};
    return cli::run_serve_program(serve_help, std::cerr);
  }
#endif

  CLI::App app{cli::admit_description, "admit"};
  cli::set_up_admit_app(app);

  // In the order `admit --help` lists them.
  std::vector<cli::subcommand> commands;
  commands.push_back(cli::add_replay_command(app));
  commands.push_back(cli::add_recommend_command(app));
#ifdef ADMIT_CLI_WITH_REDIS
  commands.push_back(cli::add_decide_command(app));
#endif
  commands.push_back(cli::add_inspect_command(app));
  commands.push_back(cli::add_run_command(app));
#ifdef ADMIT_CLI_WITH_SERVE
  // Listed by `admit --help`; never parsed here (run above).
  app.add_subcommand("serve", admit::serve::serve_description);
#endif
  return cli::dispatch(app, commands, argc, argv, std::cerr);
}
