// cli/decide/decide.hpp — `admit decide`: one decision of a distributed limiter on Redis, from the shell, so that
// jobs on many machines can share one limit:
//
//   admit decide --redis redis://10.0.0.5:6379 --rate 10/s --burst 5 nightly-export && run-export
//   admit decide --redis redis://10.0.0.5:6379 --rate 100/min --wait --max-wait 5m api-crawler && crawl
//
// Built only with the admit::redis target. The options are text until run_decide checks them (with
// cli/common/values.hpp, as cli/replay/options.hpp does for replay), so every message names the option and the value.
// Redis counts time in whole microseconds: a --window that is not a whole number of them is refused
// (cli/common/window_limit.hpp), as is a --rate whose interval rounded up to whole microseconds (what gcra and
// token-bucket enforce, admit/redis/gcra.hpp) would slow it by more than 0.1% (rates up to 1,000/s always pass), rather
// than enforce a limit other than the one asked for.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

namespace admit::cli {

// Refused now; the caller may try again later (sysexits' EX_TEMPFAIL).
inline constexpr int exit_refused = 75;

// `admit decide --help`: what the command does and its exit statuses.
inline constexpr const char* decide_description =
    "Ask a distributed limiter on Redis whether KEY may go now, so that processes on many machines share one limit "
    "(state under the Redis key {NAME}:KEY, time from Redis's clock). Prints the decision (remaining, retry after, "
    "reset after, who decided).\n"
    "Exit status: 0 admitted; 75 (EX_TEMPFAIL) refused, or Redis failed in a way that may pass by waiting (no answer "
    "within --timeout, connection refused or lost, LOADING, BUSY); 69 (EX_UNAVAILABLE) Redis failed in a way waiting "
    "cannot fix (authentication failed, unknown host, no such database, not a Redis server); 2 bad input (an option, "
    "the URL, a cost above the limit, a --window that is not whole microseconds, a --rate that Redis, spacing requests "
    "in whole microseconds, would slow by more than 0.1%); 1 anything else. The cause of a Redis failure goes to "
    "stderr. With --wait, "
    "transient failures are retried until --max-wait; with --fail-open, any Redis failure admits (exit 0).";

struct decide_options {
  std::string redis;                  // URL: redis://[:password@]host:port[/db] or unix:///path (required)
  std::string algorithm = "gcra";     // gcra, token-bucket, fixed-window, sliding-window, sliding-log
  std::optional<std::string> rate;    // required: N/s, N/min, ...
  std::optional<std::string> burst;   // gcra, token-bucket (default 1)
  std::optional<std::string> window;  // window algorithms (default 1s); the per-window limit is rate * window
  std::string name = "admit";         // the limiter's name: its keys are {name}:key
  std::string key;                    // the key to decide for (required)
  std::string cost = "1";             // n, tokens the request takes
  std::string timeout = "1s";         // the deadline of connecting, and of each decision
  bool wait = false;  // wait until admitted (retrying after each refusal's retry_after and each transient failure)
  std::optional<std::string> max_wait;  // with wait: give up when admission would come later than this
  bool fail_open = false;               // admit when Redis cannot decide (default: refuse)
  bool json = false;
};

// Runs `admit decide`. Returns 0 admitted (or --fail-open and Redis failed), exit_refused refused or a transient
// Redis failure (no answer, connection refused or lost, LOADING/BUSY: see cli/common/redis_failure.hpp), 69 a Redis
// failure waiting cannot fix (authentication, unknown host, no such database, not Redis), 2 bad input (including a bad
// URL and a cost the limiter can never admit), 1 anything else. The decision goes to `out` (a line, or JSON); messages
// (waiting, why Redis failed) to `err` prefixed "admit decide: ".
int run_decide(const decide_options& options, std::ostream& out, std::ostream& err);

}  // namespace admit::cli
