// admit-serve — `admit serve`, the rate-limit service, as its own program (see serve_program.hpp for why): `admit
// serve ARGS` runs it as `admit serve ARGS`; run by itself, `admit-serve ARGS` is the same as `admit serve ARGS`.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common/command.hpp"
#include "cli/serve/serve_command.hpp"
#include "help_formatter.hpp"

int main(int argc, char** argv) {
  namespace cli = admit::cli;
  std::ios::sync_with_stdio(false);

  CLI::App app{cli::admit_description, "admit"};
  cli::set_up_admit_app(app);
  const std::vector<cli::subcommand> commands{cli::add_serve_command(app)};
  // `admit serve --version` too: an operator asks the service's own program which version it runs.
  commands.front().app->set_version_flag("--version", std::string("admit ") + ADMIT_VERSION,
                                         "print the version and exit");

  // Run by itself: the command's name goes in front of its arguments.
  std::vector<char*> args(argv, argv + argc);
  static char serve[] = "serve";
  if (argc < 2 || (std::string_view(argv[1]) != "serve" && std::string_view(argv[1]) != "--version")) {
    args.insert(args.begin() + 1, serve);
  }
  args.push_back(nullptr);
  return cli::dispatch(app, commands, static_cast<int>(args.size()) - 1, args.data(), std::cerr);
}
