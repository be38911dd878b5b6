// `admit inspect`'s options (see inspect_command.hpp).
#include "cli/inspect/inspect_command.hpp"

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/common/message.hpp"
#include "cli/inspect/inspect_options.hpp"
#include "cli/inspect/local_inspect.hpp"
#ifdef ADMIT_CLI_WITH_REDIS
#include "cli/inspect/redis_inspect.hpp"
#endif

namespace admit::cli {

namespace {

struct inspect_state {
  inspect_options options;
  std::optional<std::string> lock_dir;
  const CLI::Option* redis = nullptr;  // given, even empty: the distributed form (which refuses an empty URL)
  const CLI::Option* timeout = nullptr;
  // The name, as a positional argument or as --name (as `admit run` names it): one of them.
  std::optional<std::string> positional_name;
  std::optional<std::string> option_name;
};

int inspect(inspect_state& s) {
  if (s.positional_name && s.option_name) {
    std::cerr << "admit inspect: the name is given twice, as NAME (\"" << *s.positional_name << "\") and as --name (\""
              << *s.option_name << "\"): give it once\n";
    return exit_bad_input;
  }
  if (!s.positional_name && !s.option_name) {
    std::cerr << "admit inspect: name is required: admit inspect NAME, or --name NAME" << last_word_note()
              << " (`admit inspect --help` says what is accepted)\n";
    return exit_bad_input;
  }
  s.options.name = s.positional_name ? *s.positional_name : *s.option_name;
  if (s.redis->count() > 0) {
    if (s.lock_dir) {
      std::cerr << "admit inspect: --lock-dir applies only without --redis\n";
      return exit_bad_input;
    }
#ifdef ADMIT_CLI_WITH_REDIS
    return run_inspect(s.options, std::cout, std::cerr);
#else
    std::cerr << "admit inspect: --redis: this admit was built without Redis support\n";
    return exit_bad_input;
#endif
  }
  if (s.timeout->count() > 0) {
    std::cerr << "admit inspect: --timeout applies only with --redis (this host's limits are read at once)\n";
    return exit_bad_input;
  }
  return run::inspect_local(s.options.name, s.lock_dir.value_or(std::string()), s.options.most, s.options.json,
                            std::cout, std::cerr);
}

}  // namespace

subcommand add_inspect_command(CLI::App& app) {
  auto s = std::make_shared<inspect_state>();
  CLI::App* cmd = app.add_subcommand("inspect", inspect_description);
  s->redis = cmd->add_option("--redis", s->options.redis,
                             "a distributed semaphore: redis://[:password@]host:port[/db], rediss://..., unix:///path, "
                             "redis+sentinel://...")
                 ->type_name("URL");
  cmd->add_option("--lock-dir", s->lock_dir,
                  "without --redis: the directory of `admit run`'s local limits (default as admit run's)")
      ->type_name("DIR");
  cmd->add_option("--most", s->options.most, "holders and waiters listed at most (default 100)")->type_name("N");
  s->timeout = cmd->add_option("--timeout", s->options.timeout, "with --redis: deadline of the call (default 1s)")
                   ->type_name("DURATION");
  cmd->add_flag("--json", s->options.json, "print the state as JSON");
  cmd->add_option("name", s->positional_name, "the semaphore's (or local limit's) name")->type_name("NAME");
  cmd->add_option("--name", s->option_name, "the name, as admit run's --name gives it (instead of NAME)")
      ->type_name("NAME");
  return {cmd, [s] { return inspect(*s); }};
}

}  // namespace admit::cli
