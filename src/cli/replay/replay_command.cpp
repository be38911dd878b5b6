// `admit replay`'s options (see replay_command.hpp).
#include "cli/replay/replay_command.hpp"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/replay/options.hpp"

namespace admit::cli {

subcommand add_replay_command(CLI::App& app) {
  auto o = std::make_shared<replay_options>();
  CLI::App* replay = app.add_subcommand(
      "replay",
      "Replay a trace through a limiter in virtual time and report what it would have done.\n"
      "Rate algorithms (--rate): admitted, rejected, delayed (and by how much), and the admitted rate over time. "
      "Trace: one arrival a line, `<seconds since start> [n]` (seconds a decimal with up to 9 fraction digits, n "
      "tokens, default 1).\n"
      "--algorithm concurrency (--limit): a concurrency limiter (admit::concurrency_limiter's engine) with a bounded "
      "queue and a wait timeout: admitted (at once or after waiting), rejected because the queue was full, timed "
      "out, wait-time percentiles, peak in flight and waiting. Trace: one request a line, `<arrival seconds> "
      "<duration seconds> [n]` (n permits, default 1); a request holds its permits for its duration once admitted.\n"
      "In both, '#' comments and blank lines are ignored and arrival times never go back.");
  replay->add_option("--algorithm,-a", o->algorithm, all_algorithm_names())->required()->type_name("NAME");
  replay
      ->add_option("--rate,-r", o->rate,
                   "rate algorithms (required): N/s, N/ms, N/min, N/h, N/day, N/500ms or inf; also N/second, N/minute, "
                   "N/hour, N/week, N/month (30 days), N/year (365 days)")
      ->type_name("RATE");
  replay->add_option("--burst,-b", o->burst, "token-bucket, gcra: tokens the limiter holds (default 1)")
      ->type_name("N");
  replay
      ->add_option("--window,-w", o->window,
                   "fixed-window, sliding-window, sliding-log: window length, e.g. 1s, 500ms (default 1s); the "
                   "per-window limit is rate * window, which must be a whole number")
      ->type_name("DURATION");
  replay->add_option("--slack", o->slack, "pacer: requests that idle time may bank (default 10; 0 = no slack)")
      ->type_name("N");
  replay->add_option("--warmup", o->warmup, "warmup: warm-up period, e.g. 10s (default 10s)")->type_name("DURATION");
  replay
      ->add_option("--mode,-m", o->mode,
                   "allow: admit now or reject; reserve: book the request and admit it after the limiter's delay "
                   "(default: reserve for pacer, allow for the others; windows cannot reserve)")
      ->type_name("allow|reserve");
  replay->add_option("--limit,-l", o->limit, "concurrency (required): permits in flight at most, e.g. 8")
      ->type_name("N");
  replay
      ->add_option("--max-waiters", o->max_waiters,
                   "concurrency: requests that may wait at once; the next is rejected (queue full) at once (default: "
                   "unbounded; 0 = never wait)")
      ->type_name("M");
  replay
      ->add_option("--timeout", o->timeout,
                   "concurrency: how long a request waits for a permit before it gives up, e.g. 500ms (default: no "
                   "timeout; 0s = never wait)")
      ->type_name("DURATION");
  replay->add_flag("--events", o->events,
                   "print one line per arrival: <seconds> <n> admit|reject [<delay seconds>]; concurrency: "
                   "<arrival> <duration> <n> admit|queue-full|timeout|exceeds-capacity [<wait seconds>]");
  replay->add_flag("--json", o->json, "print the report as JSON");
  replay
      ->add_option("--plot", o->plot,
                   "write an SVG chart to FILE: arrivals vs admissions; concurrency: in flight and waiting over time")
      ->type_name("FILE.svg");
  replay->add_option("trace", o->trace, "trace file; '-' or absent: standard input")->type_name("TRACE");
  return {replay, [o] {
            o->stdin_is_terminal = isatty(STDIN_FILENO) == 1;
            return run_replay(*o, std::cin, std::cout, std::cerr);
          }};
}

}  // namespace admit::cli
