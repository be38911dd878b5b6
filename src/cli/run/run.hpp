// cli/run/run.hpp — `admit run`: runs a command under a concurrency and rate limit shared by every process that uses
// the same name, on this host (a directory of lock files) or across hosts (Redis).
//
//   admit run --concurrency 3 --name db -- ./query.sh            # at most 3 at once on this host
//   admit run --redis redis://db-lock:6379 --concurrency 3 --rate 10/s --name db -- ./query.sh
//
// It finds the command first (127/126 without waiting), waits for the permit (75 when not had: --timeout, --no-wait,
// --max-waiters; a terminating signal while waiting: 128+N), runs the command as its child with the terminal and
// standard streams untouched and ADMIT_NAME, ADMIT_FENCING_TOKEN, ADMIT_LEASE_ID in its environment, forwards
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 to it, releases the permit when it exits and exits with its
// status (128+N when killed by signal N); 124 when the permit was lost while it ran.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>

#include "cli/common/local_limit.hpp"
#include "cli/run/options.hpp"
#include "cli/run/permit_source.hpp"
#include "cli/run/reporter.hpp"

namespace admit::cli::run {

// `admit run --help`: what the command does and its exit statuses.
inline constexpr const char* description =
    "Run COMMAND when a limit shared by every `admit run` of the same --name allows it: at most --concurrency N at "
    "once, no more often than --rate R, or both (the rate is taken when the command may start). Without --redis the "
    "limit is this host's (lock files in --lock-dir; a holder that dies frees its permit at once); with --redis it is "
    "shared by every host (a lease renewed while COMMAND runs). Waiters are served in arrival order. COMMAND keeps "
    "the terminal and standard streams, gets ADMIT_NAME, ADMIT_FENCING_TOKEN (strictly increasing) and ADMIT_LEASE_ID "
    "in its environment and the signals admit run gets (INT, TERM, HUP, QUIT, USR1, USR2), and is killed if admit "
    "run dies.\n"
    "Exit status: COMMAND's (128+N when killed by signal N); 75 (EX_TEMPFAIL) not admitted (--timeout, --no-wait, "
    "--max-waiters, or Redis failed in a way that may pass) and COMMAND did not run; 124 the lease was lost while "
    "COMMAND ran; 127 COMMAND not found; 126 COMMAND not executable; 69 (EX_UNAVAILABLE) Redis failed in a way "
    "waiting cannot fix; 73 (EX_CANTCREAT) the lock directory cannot be made or used; 2 bad input; 128+N a signal N "
    "ended the wait.";

// Makes the Redis permit source (cli/run/redis_source.hpp) when the tool is built with admit::redis; throws
// usage_error for a bad URL.
using redis_source_factory = std::function<std::unique_ptr<permit_source>(const run_settings&, const entry_info&)>;

// Runs `admit run`; returns the exit status. Messages and events go to `err`. Must be called on the main thread
// before any other thread is started (it blocks the signals it handles for every thread it starts).
int run_command(const run_options& options, std::ostream& err, bool stderr_is_terminal,
                const redis_source_factory& make_redis);

}  // namespace admit::cli::run
