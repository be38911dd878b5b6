// admit — the command line face of the admit library.
//
//   admit replay --algorithm token-bucket --rate 100/s --burst 20 data/sample_trace.txt
//   admit replay --algorithm concurrency --limit 8 --max-waiters 20 --timeout 500ms data/sample_concurrency_trace.txt
//   admit decide --redis redis://127.0.0.1:6379 --rate 10/s --burst 5 nightly-export   (built with admit::redis)
//   admit inspect --redis redis://127.0.0.1:6379 db-queries                              (built with admit::redis)
//   admit run --concurrency 3 --name db -- ./query.sh                                    (--redis URL: across hosts)
//   admit serve --config examples/serve/config                                           (built with ADMIT_SERVE)
//
// Exit status: 0 success (decide: admitted), 2 bad input (an option, the trace, an unreadable file), 1 anything else;
// decide and inspect also 75 (refused, or a Redis failure that may pass) and 69 (one that will not): see their --help;
// run passes its command's status through (cli/run/run.hpp).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <string_view>

#include <unistd.h>

#include "cli/options.hpp"
#include "cli/replay.hpp"
#include "cli/run/inspect.hpp"
#include "cli/run/run.hpp"
#include "help_formatter.hpp"
#ifdef ADMIT_CLI_WITH_REDIS
#include "cli/redis/decide.hpp"
#include "cli/redis/inspect.hpp"
#include "cli/redis/run_source.hpp"
#endif
#ifdef ADMIT_CLI_WITH_SERVE
#include "serve/command/serve_command.hpp"
#endif

namespace {

// "  replay    Replay a trace through a limiter in virtual time and report what it would have done." for each
// command: its name and the first sentence of its description.
std::string command_list(const CLI::App& app) {
  std::string out = "The commands are:\n";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string& d = sub->get_description();
    const auto end = d.find_first_of(".\n(");
    std::string line = "  " + sub->get_name();
    line.append(line.size() < 12 ? 12 - line.size() : 1, ' ');
    out += line + admit::cli::wrap_text(d.substr(0, end), 80, line.size(), 12) + "\n";
  }
  return out + "Run `admit <command> --help` for its options, `admit --version` for the version.\n";
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = admit::cli;
  std::ios::sync_with_stdio(false);

  CLI::App app{"admit: admission control for C++ (rate limiters and concurrency limiters), from the command line.",
               "admit"};
  app.formatter(std::make_shared<cli::wrapping_formatter>(cli::help_width()));
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("admit ") + ADMIT_VERSION, "print the version and exit");

  cli::replay_options o;
  std::string rate, burst, window, slack, warmup, mode, plot, limit, max_waiters, timeout;
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
  replay->add_option("--algorithm,-a", o.algorithm, cli::all_algorithm_names())->required()->type_name("NAME");
  auto* rate_opt =
      replay
          ->add_option(
              "--rate,-r", rate,
              "rate algorithms (required): N/s, N/ms, N/min, N/h, N/day, N/500ms or inf; also N/second, N/minute, "
              "N/hour, N/week, N/month (30 days), N/year (365 days)")
          ->type_name("RATE");
  auto* burst_opt = replay->add_option("--burst,-b", burst, "token-bucket, gcra: tokens the limiter holds (default 1)")
                        ->type_name("N");
  auto* window_opt = replay
                         ->add_option("--window,-w", window,
                                      "fixed-window, sliding-window, sliding-log: window length, e.g. 1s, 500ms "
                                      "(default 1s); the per-window limit is rate * window, which must be a whole "
                                      "number")
                         ->type_name("DURATION");
  auto* slack_opt =
      replay->add_option("--slack", slack, "pacer: requests that idle time may bank (default 10; 0 = no slack)")
          ->type_name("N");
  auto* warmup_opt =
      replay->add_option("--warmup", warmup, "warmup: warm-up period, e.g. 10s (default 10s)")->type_name("DURATION");
  auto* mode_opt =
      replay
          ->add_option("--mode,-m", mode,
                       "allow: admit now or reject; reserve: book the request and admit it after the limiter's "
                       "delay (default: reserve for pacer, allow for the others; windows cannot reserve)")
          ->type_name("allow|reserve");
  auto* limit_opt = replay->add_option("--limit,-l", limit, "concurrency (required): permits in flight at most, e.g. 8")
                        ->type_name("N");
  auto* max_waiters_opt =
      replay
          ->add_option("--max-waiters", max_waiters,
                       "concurrency: requests that may wait at once; the next is rejected (queue full) at once "
                       "(default: unbounded; 0 = never wait)")
          ->type_name("M");
  auto* timeout_opt = replay
                          ->add_option("--timeout", timeout,
                                       "concurrency: how long a request waits for a permit before it gives up, "
                                       "e.g. 500ms (default: no timeout; 0s = never wait)")
                          ->type_name("DURATION");
  replay->add_flag("--events", o.events,
                   "print one line per arrival: <seconds> <n> admit|reject [<delay seconds>]; concurrency: "
                   "<arrival> <duration> <n> admit|queue-full|timeout|exceeds-capacity [<wait seconds>]");
  replay->add_flag("--json", o.json, "print the report as JSON");
  auto* plot_opt =
      replay
          ->add_option(
              "--plot", plot,
              "write an SVG chart to FILE: arrivals vs admissions; concurrency: in flight and waiting over time")
          ->type_name("FILE.svg");
  replay->add_option("trace", o.trace, "trace file; '-' or absent: standard input")->type_name("TRACE");

#ifdef ADMIT_CLI_WITH_REDIS
  cli::decide_options d;
  std::string decide_rate, decide_burst, decide_window, decide_max_wait;
  CLI::App* decide = app.add_subcommand("decide", cli::decide_description);
  decide->add_option("--redis", d.redis, "redis://[:password@]host:port[/db] or unix:///path")
      ->required()
      ->type_name("URL");
  decide
      ->add_option("--algorithm,-a", d.algorithm,
                   "gcra (default), token-bucket, fixed-window, sliding-window, sliding-log")
      ->type_name("NAME");
  auto* decide_rate_opt =
      decide
          ->add_option("--rate,-r", decide_rate,
                       "N/s, N/ms, N/min, N/h, N/day or N/500ms; also N/second, N/minute, N/hour, N/week, "
                       "N/month (30 days), N/year (365 days)")
          ->required()
          ->type_name("RATE");
  auto* decide_burst_opt =
      decide->add_option("--burst,-b", decide_burst, "gcra, token-bucket: tokens the limiter holds (default 1)")
          ->type_name("N");
  auto* decide_window_opt = decide
                                ->add_option("--window,-w", decide_window,
                                             "window algorithms: window length (default 1s); limit = rate * window")
                                ->type_name("DURATION");
  decide->add_option("--name", d.name, "the limiter's name, shared by every process using this limit (default admit)")
      ->type_name("NAME");
  decide->add_option("--cost,-n", d.cost, "tokens this request takes (default 1)")->type_name("N");
  decide->add_option("--timeout", d.timeout, "deadline of connecting, and of each decision (default 1s)")
      ->type_name("DURATION");
  decide->add_flag("--wait", d.wait, "on refusal, sleep for its retry-after and ask again, until admitted");
  auto* decide_max_wait_opt =
      decide->add_option("--max-wait", decide_max_wait, "with --wait: give up (exit 75) rather than wait longer")
          ->type_name("DURATION");
  decide->add_flag("--fail-open", d.fail_open, "admit when Redis cannot decide (default: refuse)");
  decide->add_flag("--json", d.json, "print the decision as JSON");
  decide->add_option("key", d.key, "the key to decide for, e.g. a job or user name")->required()->type_name("KEY");

#endif

  cli::inspect_options ins;
  std::string inspect_lock_dir;
  CLI::App* inspect = app.add_subcommand("inspect", cli::inspect_description);
  auto* inspect_redis_opt = inspect
                                ->add_option("--redis", ins.redis,
                                             "a distributed semaphore: redis://[:password@]host:port[/db], "
                                             "rediss://..., unix:///path, redis+sentinel://...")
                                ->type_name("URL");
  auto* inspect_lock_dir_opt =
      inspect
          ->add_option("--lock-dir", inspect_lock_dir,
                       "without --redis: the directory of `admit run`'s local limits (default as admit run's)")
          ->type_name("DIR");
  inspect->add_option("--most", ins.most, "holders and waiters listed at most (default 100)")->type_name("N");
  inspect->add_option("--timeout", ins.timeout, "deadline of the call (default 1s)")->type_name("DURATION");
  inspect->add_flag("--json", ins.json, "print the state as JSON");
  inspect->add_option("name", ins.name, "the semaphore's (or local limit's) name")->required()->type_name("NAME");

  cli::run::run_options ro;
  CLI::App* run = app.add_subcommand("run", cli::run::description);
  run->add_option("--name", ro.name, "the limit's name, shared by every admit run that uses it (required)")
      ->type_name("NAME");
  run->add_option("--concurrency,-c", ro.concurrency, "at most N permits held at once")->type_name("N");
  run->add_option("--weight", ro.weight, "permits (and rate tokens) this command takes (default 1)")->type_name("K");
  run->add_option("--rate,-r", ro.rate, "start no more often than this: N/s, N/min, N/h, N/day, N/500ms, ...")
      ->type_name("RATE");
  run->add_option("--burst,-b", ro.burst, "with --rate: starts that idle time may bank (default 1)")->type_name("B");
  run->add_option("--redis", ro.redis,
                  "share the limit across hosts through Redis: redis://[user:password@]host:port[/db], rediss://..., "
                  "unix:///path, redis+sentinel://... (default: this host only)")
      ->type_name("URL");
  run->add_option("--lock-dir", ro.lock_dir,
                  "without --redis: the directory of local limits (default $ADMIT_LOCK_DIR, else "
                  "$XDG_RUNTIME_DIR/admit, else /tmp/admit-<uid>)")
      ->type_name("DIR");
  run->add_option("--timeout", ro.timeout, "give up waiting after this (exit 75; the command does not run)")
      ->type_name("DURATION");
  run->add_flag("--no-wait", ro.no_wait, "do not wait: exit 75 unless admitted at once");
  run->add_option("--max-waiters", ro.max_waiters, "at most M waiting (this one included); one more exits 75 at once")
      ->type_name("M");
  run->add_option("--lease-ttl", ro.lease_ttl,
                  "with --redis: the lease's lifetime, renewed every third of it while the command runs (default 10s)")
      ->type_name("DURATION");
  run->add_option("--on-lease-lost", ro.on_lease_lost,
                  "with --redis, when the lease is lost: term (SIGTERM, then SIGKILL after --kill-after; the "
                  "default), kill, ignore")
      ->type_name("term|kill|ignore");
  run->add_option("--kill-after", ro.kill_after, "after --on-lease-lost=term's SIGTERM, SIGKILL (default 10s)")
      ->type_name("DURATION");
  run->add_flag("--set-capacity", ro.set_capacity,
                "with --redis: if the semaphore NAME exists with another capacity, make it --concurrency for every "
                "host (without it, that is refused: one name, one capacity)");
  run->add_flag("--quiet,-q", ro.quiet, "no status line and no notices (errors are still said)");
  run->add_flag("--json", ro.json, "one JSON object per line on stderr per event (waiting, started, exited, ...)");
  // The first word that is not one of admit run's options starts the command: what follows is the command's own.
  run->prefix_command();
  run->footer("COMMAND [ARGS...] follows the options, after -- or at the first word that is not an option.\n");

#ifdef ADMIT_CLI_WITH_SERVE
  admit::serve::serve_options so;
  CLI::App* serve = app.add_subcommand("serve", admit::serve::serve_description);
  serve->add_option("--config", so.config_dir, "the directory of YAML configuration files (*.yaml)")->type_name("DIR");
  serve->add_option("--grpc-port", so.grpc_port, "gRPC port (default 8081; 0: any free port)")->type_name("N");
  serve->add_option("--http-port", so.http_port, "HTTP port (default 8080; 0: any free port)")->type_name("M");
  serve->add_option("--host", so.host, "the address both ports listen on (default 0.0.0.0)")->type_name("ADDR");
  serve
      ->add_option("--redis", so.redis, "count in Redis: redis://..., rediss://..., unix:///path (default: in process)")
      ->type_name("URL");
  serve->add_flag("--redis-required", so.redis_required, "exit 69 when Redis cannot be reached at start");
  serve->add_option("--log-level", so.log_level, "debug, info (default), warn or error")->type_name("LEVEL");
  serve
      ->add_option("--response-headers", so.response_headers,
                   "rate-limit headers in the answer: none (default), ietf (RateLimit-Limit/-Remaining/-Reset) or "
                   "envoy (x-ratelimit-limit/-remaining/-reset)")
      ->type_name("none|ietf|envoy");
  serve->add_flag("--shadow-mode", so.shadow_mode, "decide and count, but answer OK to every request");
  bool serve_fail_open = false, serve_fail_closed = false;
  auto* fail_open_opt =
      serve->add_flag("--fail-open", serve_fail_open, "when the backend fails, answer OK (the default)");
  auto* fail_closed_opt =
      serve->add_flag("--fail-closed", serve_fail_closed, "when the backend fails, answer OVER_LIMIT");
  fail_open_opt->excludes(fail_closed_opt);
  serve->add_option("--drain-timeout", so.drain_timeout, "on SIGTERM, how long calls in flight may take (default 10s)")
      ->type_name("DURATION");
#endif

  int parsed_argc = argc;  // `admit run`: the words before its "--"
  try {
    // `admit run [options] -- COMMAND...`: what follows "--" is the command's, untouched by the option parser
    // (CLI11's prefix_command covers the form without "--").
    if (argc > 1 && std::string_view(argv[1]) == "run") {
      for (int i = 2; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--") {
          parsed_argc = i;
          ro.command.assign(argv + i + 1, argv + argc);
          break;
        }
      }
    }
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
        std::cerr << "admit: a command is required\n";
      } else if (argv[1][0] != '-') {
        std::cerr << "admit: unknown command " << cli::quote(argv[1]) << "\n";
      } else {
        std::cerr << "admit: " << e.what() << "\n";
      }
      std::cerr << command_list(app);
      return cli::exit_bad_input;
    }
    app.exit(e);  // prints the message to stderr
    return cli::exit_bad_input;
  }

#ifdef ADMIT_CLI_WITH_SERVE
  if (serve->parsed()) {
    if (serve_fail_open) so.fail_open = true;
    if (serve_fail_closed) so.fail_open = false;
    try {
      return admit::serve::run_serve(std::move(so), std::cerr);
    } catch (const std::exception& e) {
      std::cerr << "admit serve: " << e.what() << "\n";
      return cli::exit_failure;
    }
  }
#endif
#ifdef ADMIT_CLI_WITH_REDIS
  if (decide->parsed()) {
    if (*decide_rate_opt) d.rate = decide_rate;
    if (*decide_burst_opt) d.burst = decide_burst;
    if (*decide_window_opt) d.window = decide_window;
    if (*decide_max_wait_opt) d.max_wait = decide_max_wait;
    try {
      return cli::run_decide(d, std::cout, std::cerr);
    } catch (const std::exception& e) {
      std::cerr << "admit decide: " << e.what() << "\n";
      return cli::exit_failure;
    }
  }
#endif
  if (inspect->parsed()) {
    try {
      if (*inspect_redis_opt) {
        if (*inspect_lock_dir_opt) {
          std::cerr << "admit inspect: --lock-dir applies only without --redis\n";
          return cli::exit_bad_input;
        }
#ifdef ADMIT_CLI_WITH_REDIS
        return cli::run_inspect(ins, std::cout, std::cerr);
#else
        std::cerr << "admit inspect: --redis: this admit was built without Redis support\n";
        return cli::exit_bad_input;
#endif
      }
      return cli::run::inspect_local(ins.name, *inspect_lock_dir_opt ? inspect_lock_dir : std::string(), ins.most,
                                     ins.json, std::cout, std::cerr);
    } catch (const std::exception& e) {
      std::cerr << "admit inspect: " << e.what() << "\n";
      return cli::exit_failure;
    }
  }
  if (run->parsed()) {
    // Words before the first "--" that are not admit run's options started the command: that "--" was the
    // command's own argument, and what followed it too.
    if (auto rest = run->remaining(); !rest.empty()) {
      if (parsed_argc < argc) rest.push_back("--");
      rest.insert(rest.end(), ro.command.begin(), ro.command.end());
      ro.command = std::move(rest);
    }
    cli::run::redis_source_factory make_redis;
#ifdef ADMIT_CLI_WITH_REDIS
    make_redis = cli::make_redis_run_source;
#endif
    try {
      return cli::run::run_command(ro, std::cerr, isatty(STDERR_FILENO) == 1, make_redis);
    } catch (const std::exception& e) {
      std::cerr << "admit run: " << e.what() << "\n";
      return cli::exit_failure;
    }
  }

  if (*rate_opt) o.rate = rate;
  if (*limit_opt) o.limit = limit;
  if (*max_waiters_opt) o.max_waiters = max_waiters;
  if (*timeout_opt) o.timeout = timeout;
  if (*burst_opt) o.burst = burst;
  if (*window_opt) o.window = window;
  if (*slack_opt) o.slack = slack;
  if (*warmup_opt) o.warmup = warmup;
  if (*mode_opt) o.mode = mode;
  if (*plot_opt) o.plot = plot;
  o.stdin_is_terminal = isatty(STDIN_FILENO) == 1;

  try {
    return cli::run_replay(o, std::cin, std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::cerr << "admit replay: out of memory\n";
    return cli::exit_failure;
  } catch (const std::exception& e) {
    std::cerr << "admit replay: " << e.what() << "\n";
    return cli::exit_failure;
  }
}
