// `admit run`'s options (see run_command.hpp).
#include "cli/run/run_command.hpp"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/run/run.hpp"
#ifdef ADMIT_CLI_WITH_REDIS
#include "cli/run/redis_source.hpp"
#endif

namespace admit::cli {

namespace {

struct run_state {
  run::run_options options;
  CLI::App* app = nullptr;
  bool dashes = false;  // the command line had a "--" (what followed it is in options.command)
};

int run_it(run_state& s) {
  // Words before the first "--" that are not admit run's options started the command: that "--" was the command's
  // own argument, and what followed it too.
  if (auto rest = s.app->remaining(); !rest.empty()) {
    if (s.dashes) rest.push_back("--");
    rest.insert(rest.end(), s.options.command.begin(), s.options.command.end());
    s.options.command = std::move(rest);
  }
  run::redis_source_factory make_redis;
#ifdef ADMIT_CLI_WITH_REDIS
  make_redis = make_redis_run_source;
#endif
  return run::run_command(s.options, std::cerr, isatty(STDERR_FILENO) == 1, make_redis);
}

}  // namespace

subcommand add_run_command(CLI::App& app) {
  auto s = std::make_shared<run_state>();
  run::run_options& ro = s->options;
  CLI::App* cmd = app.add_subcommand("run", run::description);
  s->app = cmd;
  cmd->add_option("--name", ro.name, "the limit's name, shared by every admit run that uses it (required)")
      ->type_name("NAME");
  cmd->add_option("--concurrency,-c", ro.concurrency, "at most N permits held at once")->type_name("N");
  cmd->add_option("--weight", ro.weight, "permits (and rate tokens) this command takes (default 1)")->type_name("K");
  cmd->add_option("--rate,-r", ro.rate, "start no more often than this: N/s, N/min, N/h, N/day, N/500ms, ...")
      ->type_name("RATE");
  cmd->add_option("--burst,-b", ro.burst, "with --rate: starts that idle time may bank (default 1)")->type_name("B");
  cmd->add_option("--redis", ro.redis,
                  "share the limit across hosts through Redis: redis://[user:password@]host:port[/db], rediss://..., "
                  "unix:///path, redis+sentinel://... (default: this host only)")
      ->type_name("URL");
  cmd->add_option("--lock-dir", ro.lock_dir,
                  "without --redis: the directory of local limits (default $ADMIT_LOCK_DIR, else "
                  "$XDG_RUNTIME_DIR/admit, else /tmp/admit-<uid>)")
      ->type_name("DIR");
  cmd->add_option("--timeout", ro.timeout,
                  "give up waiting after this (exit 75; the command does not run); 0s is --no-wait")
      ->type_name("DURATION");
  cmd->add_flag("--no-wait", ro.no_wait, "do not wait: exit 75 unless admitted at once");
  cmd->add_option("--max-waiters", ro.max_waiters, "at most M waiting (this one included); one more exits 75 at once")
      ->type_name("M");
  cmd->add_option("--lease-ttl", ro.lease_ttl,
                  "with --redis: the lease's lifetime, renewed every third of it while the command runs (default 10s)")
      ->type_name("DURATION");
  cmd->add_option("--on-lease-lost", ro.on_lease_lost,
                  "with --redis, when the lease is lost: term (SIGTERM, then SIGKILL after --kill-after; the "
                  "default), kill, ignore")
      ->type_name("term|kill|ignore");
  cmd->add_option("--kill-after", ro.kill_after, "after --on-lease-lost=term's SIGTERM, SIGKILL (default 10s)")
      ->type_name("DURATION");
  cmd->add_flag("--set-capacity", ro.set_capacity,
                "with --redis: if the limit NAME exists with another --concurrency, --rate, --burst or --classes, make "
                "this run's the definition for every host (without it, that is refused: one name, one definition; "
                "another number of classes only while no run of NAME holds or waits)");
  cmd->add_option("--classes", ro.classes,
                  "the limit's priority classes and the share of --concurrency and --rate each is guaranteed (part "
                  "of the limit's definition), e.g. interactive=0.75,batch=0.25")
      ->type_name("NAME=SHARE,...");
  cmd->add_option("--class", ro.class_name, "this run's class, one of --classes (default: the first)")
      ->type_name("NAME");
  cmd->add_flag("--quiet,-q", ro.quiet,
                "no status line, no notices, and no message when the limit says no (busy, --timeout, queue full); "
                "errors are still said");
  cmd->add_flag("--json", ro.json, "one JSON object per line on stderr per event (waiting, started, exited, ...)");
  // The first word that is not one of admit run's options starts the command: what follows is the command's own.
  cmd->prefix_command();
  cmd->footer("COMMAND [ARGS...] follows the options, after -- or at the first word that is not an option.\n");
  subcommand c{cmd, [s] { return run_it(*s); }};
  // What follows "--" is the command's, untouched by the option parser (prefix_command covers the form without it).
  c.take_rest = [s](std::optional<std::vector<std::string>> rest) {
    s->dashes = rest.has_value();
    if (rest) s->options.command = std::move(*rest);
  };
  c.options_end_at_first_word = true;
  return c;
}

}  // namespace admit::cli
