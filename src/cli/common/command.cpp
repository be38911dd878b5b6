// Parsing a command line and running the subcommand it names (see command.hpp).
#include "cli/common/command.hpp"

#include <exception>
#include <iostream>
#include <new>
#include <string_view>
#include <vector>

#include "cli/common/message.hpp"
#include "cli/common/suggest.hpp"

namespace admit::cli {

namespace {

std::string last_word_note_text;  // see last_word_note()

// "  replay    Replay a trace through a limiter in virtual time and report what it would have done." for each
// command: its name and the first sentence of its description.
std::string command_list(const CLI::App& app) {
  std::string out = "The commands are:\n";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string& d = sub->get_description();
    const auto end = d.find_first_of(".\n(:");
    std::string line = "  " + sub->get_name();
    line.append(line.size() < 12 ? 12 - line.size() : 1, ' ');
    out += line + wrap_text(d.substr(0, end), 80, line.size(), 12) + "\n";
  }
  return out +
         "Run `admit <command> --help` (or `admit help <command>`) for its options, `admit --version` for the "
         "version.\n";
}

// A word that is an option ("--rate", "-r", "--rate=5/s", "-r5/s"), not a value or a positional argument: "-" (standard
// input) and a negative number ("-3", "-.5") are not.
bool looks_like_option(std::string_view word) noexcept {
  if (word.size() < 2 || word.front() != '-') return false;
  const char c = word[1];
  return !((c >= '0' && c <= '9') || c == '.');
}

}  // namespace

option_scan scan_options(const CLI::App& app, std::span<const std::string> args, bool stop_at_first_word) {
  option_scan scan;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return scan;  // help is shown whatever else is there
    if (a == "--") break;
  }
  // The option `name` takes the next word as its value: noted when that word is the last one.
  const auto takes_next = [&](std::size_t& i, std::string_view name) {
    ++i;
    if (i + 1 == args.size() && args[i] != "--") scan.last_word_taken_by = std::string(name);
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view word = args[i];
    if (word == "--") break;
    if (!looks_like_option(word)) {
      if (stop_at_first_word) break;
      continue;
    }
    const bool long_form = word.starts_with("--");
    if (!long_form) {
      // A cluster of short options ("-q", "-qv", "-qc3", "-c3"): each letter an option, up to one that takes a value,
      // whose value is the rest of the word, or the next word when nothing is left.
      for (std::size_t k = 1; k < word.size(); ++k) {
        const std::string name{'-', word[k]};
        const CLI::Option* opt = app.get_option_no_throw(name);
        if (opt == nullptr) {
          scan.unknown = "unknown option " + name + " (`admit " + app.get_name() + " --help` lists the options)";
          return scan;
        }
        if (opt->get_expected_max() != 0) {
          if (k + 1 == word.size()) takes_next(i, name);
          break;
        }
      }
      continue;
    }
    const std::string_view name = word.substr(0, word.find('='));
    const CLI::Option* opt = app.get_option_no_throw(std::string(name));
    if (opt == nullptr) {
      scan.unknown = "unknown option " + std::string(name);
      std::vector<std::string> known;
      for (const CLI::Option* o : app.get_options()) {
        for (const std::string& n : o->get_lnames()) known.push_back(n);
      }
      if (const auto near = nearest_name(name.substr(2), known)) {
        scan.unknown += "; did you mean --" + *near + "?";
      } else {
        scan.unknown += " (`admit " + app.get_name() + " --help` lists the options)";
      }
      return scan;
    }
    // The value of an option that takes one is the next word unless it is attached ("--rate=5/s").
    if (opt->get_expected_max() != 0 && word.find('=') == std::string_view::npos) takes_next(i, name);
  }
  return scan;
}

const std::string& last_word_note() noexcept { return last_word_note_text; }

int dispatch(CLI::App& app, std::span<const subcommand> commands, int argc, char** argv, std::ostream& err) {
  // "admit help [COMMAND]", as git's and go's: the same as "admit [COMMAND] --help".
  if (argc > 1 && std::string_view(argv[1]) == "help") {
    if (argc == 2) {
      std::cout << app.help();
      return 0;
    }
    for (const subcommand& c : commands) {
      if (argc == 3 && c.app->get_name() == argv[2]) {
        std::cout << c.app->help(app.get_name());  // "Usage: admit run ...", as `admit run --help` says
        return 0;
      }
    }
    err << "admit help: " << (argc == 3 ? "unknown command " + quote(argv[2]) : std::string("give one command at most"))
        << "\n"
        << command_list(app);
    return exit_bad_input;
  }
  const subcommand* chosen = nullptr;
  for (const subcommand& c : commands) {
    if (argc > 1 && c.app->get_name() == argv[1]) chosen = &c;
  }
  // A command's words after its first "--" are its own: the parser sees only those before.
  int parsed_argc = argc;
  std::optional<std::vector<std::string>> rest;
  if (chosen != nullptr && chosen->take_rest) {
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--") {
        parsed_argc = i;
        rest.emplace(argv + i + 1, argv + argc);
        break;
      }
    }
  }
  const std::string prefix = chosen != nullptr ? "admit " + chosen->app->get_name() + ": " : "admit: ";
  option_scan scan;
  if (chosen != nullptr) {
    const std::vector<std::string> words(argv + 2, argv + parsed_argc);
    scan = scan_options(*chosen->app, words, chosen->options_end_at_first_word);
    if (!scan.unknown.empty()) {
      err << prefix << scan.unknown << "\n";
      return exit_bad_input;
    }
  }
  if (!scan.last_word_taken_by.empty()) {
    last_word_note_text =
        "; the last word, " + quote(argv[parsed_argc - 1]) + ", was taken as the value of " + scan.last_word_taken_by;
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty()) {
      // No command, or one that does not exist: say which, and list them.
      if (argc < 2) {
        err << "admit: a command is required\n";
      } else if (argv[1][0] != '-') {
        err << "admit: unknown command " << quote(argv[1]);
        std::vector<std::string> names;
        for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) {
          names.push_back(c->get_name());
        }
        if (const auto near = nearest_name(argv[1], names)) err << "; did you mean " << quote(*near) << "?";
        err << "\n";
      } else {
        err << "admit: " << e.what() << "\n";
      }
      err << command_list(app);
      return exit_bad_input;
    }
    // CLI11's words, as the subcommand's ("admit replay: --rate: 1 required RATE missing"); extra arguments named
    // each as given.
    std::string what = e.what();
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && chosen != nullptr) {
      what.clear();
      for (const std::string& extra : chosen->app->remaining()) what += (what.empty() ? "" : " ") + quote(extra);
      what = "unexpected argument " + what;
    } else if (const auto at = what.find(": 1 required "); at != std::string::npos && what.ends_with(" missing")) {
      // "--rate: 1 required RATE missing"
      const std::size_t from = at + 13;
      what = what.substr(0, at) + " needs a value (" + what.substr(from, what.size() - 8 - from) + ")";
    } else if (constexpr std::string_view most = ": At Most 1 required but received ";
               what.find(most) != std::string::npos) {
      // "--config: At Most 1 required but received 2"
      const std::size_t at_most = what.find(most);
      what = what.substr(0, at_most) + " is given " + what.substr(at_most + most.size()) + " times; give it once";
    }
    // "key is required" after "--timeout k": the positional argument was taken as the option's value.
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !what.starts_with("-")) what += last_word_note_text;
    err << prefix << what << " (`admit " << (chosen != nullptr ? chosen->app->get_name() + " " : std::string())
        << "--help` says what is accepted)\n";
    return exit_bad_input;
  }
  for (const subcommand& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      if (c.take_rest) c.take_rest(std::move(rest));
      return c.run();
    } catch (const std::bad_alloc&) {
      err << prefix << "out of memory\n";
    } catch (const std::exception& e) {
      err << prefix << e.what() << "\n";
    }
    return exit_failure;
  }
  return exit_bad_input;  // not reached: the app requires one subcommand
}

}  // namespace admit::cli
