// `admit recommend`'s options (see recommend_command.hpp).
#include "cli/recommend/recommend_command.hpp"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/recommend/options.hpp"

namespace admit::cli {

subcommand add_recommend_command(CLI::App& app) {
  auto o = std::make_shared<recommend_options>();
  CLI::App* cmd = app.add_subcommand(
      "recommend",
      "Find the least limit that meets a target on a trace: replays the trace (as admit replay does) once per "
      "candidate limit and searches, so that the answer meets the target and a limit 1% tighter (one less per "
      "window, one permit less) does not.\n"
      "Rate algorithms: --max-rejected P% (the least rate rejecting at most P% of the requests), or --mode reserve "
      "--max-delay-p99 D (the least rate whose 99th percentile of delays is at most D). Without --burst, token-bucket "
      "and gcra print the frontier: the least rate for each burst, and the burst past which more burst saves little.\n"
      "--algorithm concurrency: --max-wait-p99 D (the least limit for which at most 1% of the requests wait longer "
      "than D in a FIFO queue), and with --max-waiters or --timeout, --max-timed-out P%.\n"
      "The trace is read once (any --format of admit replay; standard input too) into a temporary file.\n"
      "Exit status: 0 a recommendation, 3 no limit meets the target, 2 bad input (also a --plot file that cannot be "
      "made: checked before the search), 1 a failure (a write error once the search is done).");
  cmd->add_option("--algorithm,-a", o->algorithm, recommend_algorithm_names())->required()->type_name("NAME");
  cmd->add_option("--burst,-b", o->burst, "token-bucket, gcra: tokens the limiter holds (default: the frontier)")
      ->type_name("N");
  cmd->add_option("--window,-w", o->window,
                  "fixed-window, sliding-window: window length, e.g. 1s, 1min (default 1s); the answer is a whole "
                  "number of requests per window")
      ->type_name("DURATION");
  cmd->add_option("--mode,-m", o->mode,
                  "allow (default): admit now or reject; reserve (token-bucket, gcra): delay each request until the "
                  "limiter admits it")
      ->type_name("allow|reserve");
  cmd->add_option("--max-rejected", o->max_rejected,
                  "the share of requests that may be rejected, e.g. 1% or 0.1% (allow: required; reserve: default 0%)")
      ->type_name("P%");
  cmd->add_option("--max-delay-p99", o->max_delay_p99, "--mode reserve: the 99th percentile of delays, e.g. 200ms")
      ->type_name("DURATION");
  cmd->add_option("--max-wait-p99", o->max_wait_p99,
                  "concurrency: at most 1% of the requests may wait longer than this, e.g. 50ms")
      ->type_name("DURATION");
  cmd->add_option("--max-waiters", o->max_waiters,
                  "concurrency: requests that may wait at once; the next is turned away (default: unbounded)")
      ->type_name("M");
  cmd->add_option("--timeout", o->timeout,
                  "concurrency: how long a request waits before it gives up, e.g. 500ms (default: no timeout)")
      ->type_name("DURATION");
  cmd->add_option("--max-timed-out", o->max_timed_out,
                  "concurrency with --max-waiters or --timeout: the share of requests that may be turned away (queue "
                  "full, timed out, or needing more permits than the limit), e.g. 1%")
      ->type_name("P%");
  cmd->add_option("--format,-f", o->format, "the trace's format, as admit replay reads it (default plain)")
      ->type_name("plain|nginx|envoy|csv|jsonl");
  cmd->add_option("--time-field", o->time_field, "csv, jsonl: the field holding each request's time (default time)")
      ->type_name("FIELD");
  cmd->add_option("--key-field", o->key_field, "csv, jsonl: the field --per-key client reads (default client)")
      ->type_name("FIELD");
  cmd->add_option("--cost-field", o->cost_field, "csv, jsonl: the field holding each request's tokens (default 1)")
      ->type_name("FIELD");
  cmd->add_option("--duration-field", o->duration_field,
                  "csv, jsonl with concurrency: the field holding each request's duration (default duration)")
      ->type_name("FIELD");
  cmd->add_option("--per-key", o->per_key,
                  "rate algorithms on an access log: the least rate for one limiter per key (client: the client "
                  "address, or a field), such that at most --max-rejected of all requests are rejected")
      ->type_name("client|FIELD");
  cmd->add_flag("--skip-bad-lines", o->skip_bad_lines,
                "access logs: leave out the lines that do not parse (counted in the report)");
  cmd->add_flag("--json", o->json, "print the recommendation as JSON");
  cmd->add_option("--plot", o->plot,
                  "write an SVG chart to FILE: the target against the limit for each limit replayed, the "
                  "recommendation marked (and the frontier without --burst)")
      ->type_name("FILE.svg");
  cmd->add_option("trace", o->trace, "trace file; '-' or absent: standard input")->type_name("TRACE");
  return {cmd, [o] {
            o->stdin_is_terminal = isatty(STDIN_FILENO) == 1;
            o->stderr_is_terminal = isatty(STDERR_FILENO) == 1;
            return run_recommend(*o, std::cin, std::cout, std::cerr);
          }};
}

}  // namespace admit::cli
