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
      ->add_option("--cold-factor", o->cold_factor,
                   "warmup: how many times slower than --rate a cold limiter serves (default 3, as Guava's)")
      ->type_name("F");
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
  replay
      ->add_option("--format,-f", o->format,
                   "the trace's format: plain (the lines above, the default), nginx (the combined or common log "
                   "format), envoy (Envoy's default access log; its DURATION is the request's duration for "
                   "concurrency), csv (a header line naming the columns), jsonl (one JSON object a line). In an access "
                   "log the first record is time zero and records are replayed in file order")
      ->type_name("plain|nginx|envoy|csv|jsonl");
  replay
      ->add_option("--time-field", o->time_field,
                   "csv, jsonl: the field holding each request's time, seconds or RFC 3339 (default time)")
      ->type_name("FIELD");
  replay->add_option("--key-field", o->key_field, "csv, jsonl: the field --per-key client reads (default client)")
      ->type_name("FIELD");
  replay
      ->add_option("--cost-field", o->cost_field,
                   "csv, jsonl: the field holding each request's tokens (default: each request costs 1)")
      ->type_name("FIELD");
  replay
      ->add_option("--duration-field", o->duration_field,
                   "csv, jsonl with concurrency: the field holding each request's duration, seconds or with a unit "
                   "(default duration)")
      ->type_name("FIELD");
  replay
      ->add_option(
          "--per-key", o->per_key,
          "rate algorithms on an access log: one limiter per key, each starting full on its key's first "
          "request; client is the client address (nginx: $remote_addr; envoy: the first X-Forwarded-For "
          "address; csv, jsonl: --key-field), or name a field. The report adds the keys and those limited most")
      ->type_name("client|FIELD");
  replay->add_flag("--skip-bad-lines", o->skip_bad_lines,
                   "access logs: leave out the lines that do not parse, and count them in the report, instead of "
                   "stopping at the first (exit 2)");
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
