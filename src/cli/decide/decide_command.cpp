// `admit decide`'s options (see decide_command.hpp).
#include "cli/decide/decide_command.hpp"

#include <iostream>
#include <memory>

#include "cli/decide/decide.hpp"

namespace admit::cli {

subcommand add_decide_command(CLI::App& app) {
  auto d = std::make_shared<decide_options>();
  CLI::App* decide = app.add_subcommand("decide", decide_description);
  decide->add_option("--redis", d->redis, "redis://[:password@]host:port[/db] or unix:///path")
      ->required()
      ->type_name("URL");
  decide
      ->add_option("--algorithm,-a", d->algorithm,
                   "gcra (default), token-bucket, fixed-window, sliding-window, sliding-log")
      ->type_name("NAME");
  decide
      ->add_option("--rate,-r", d->rate,
                   "N/s, N/ms, N/min, N/h, N/day or N/500ms; also N/second, N/minute, N/hour, N/week, N/month (30 "
                   "days), N/year (365 days)")
      ->required()
      ->type_name("RATE");
  decide->add_option("--burst,-b", d->burst, "gcra, token-bucket: tokens the limiter holds (default 1)")
      ->type_name("N");
  decide->add_option("--window,-w", d->window, "window algorithms: window length (default 1s); limit = rate * window")
      ->type_name("DURATION");
  decide->add_option("--name", d->name, "the limiter's name, shared by every process using this limit (default admit)")
      ->type_name("NAME");
  decide->add_option("--cost,-n", d->cost, "tokens this request takes (default 1)")->type_name("N");
  decide->add_option("--timeout", d->timeout, "deadline of connecting, and of each decision (default 1s)")
      ->type_name("DURATION");
  decide->add_flag("--wait", d->wait, "on refusal, sleep for its retry-after and ask again, until admitted");
  decide->add_option("--max-wait", d->max_wait, "with --wait: give up (exit 75) rather than wait longer")
      ->type_name("DURATION");
  decide->add_flag("--fail-open", d->fail_open, "admit when Redis cannot decide (default: refuse)");
  decide->add_flag("--json", d->json, "print the decision as JSON");
  decide->add_option("key", d->key, "the key to decide for, e.g. a job or user name")->required()->type_name("KEY");
  return {decide, [d] { return run_decide(*d, std::cout, std::cerr); }};
}

}  // namespace admit::cli
