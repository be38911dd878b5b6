// cli/inspect/inspect_options.hpp — `admit inspect`'s options and help, shared by its two forms: a distributed
// semaphore on Redis (cli/inspect/redis_inspect.hpp, --redis) and an `admit run` limit on this host
// (cli/inspect/local_inspect.hpp).
#pragma once

#include <string>

namespace admit::cli {

// `admit inspect --help`: what the command does and its exit statuses.
inline constexpr const char* inspect_description =
    "Show the live state of a distributed semaphore (admit::redis::semaphore, and `admit run --redis`) on Redis: "
    "capacity, available, the holders with their fencing token and lease time left (and, for `admit run`, host, pid, "
    "command and run time), the queue in order. Without --redis: the `admit run` limit NAME on this host: its "
    "definition, the rate's tokens now, each class's permits held and asked for, and its holders and waiters with "
    "class, host, pid, command and time.\n"
    "Exit status: 0 shown; 1 no such semaphore or limit; 2 bad input (an option, the URL); 75 (EX_TEMPFAIL) Redis "
    "failed in a way that may pass by waiting (no answer within --timeout, connection refused or lost, LOADING, "
    "BUSY), or without --redis another process held the limit's lock for 2s (a stopped run); 69 (EX_UNAVAILABLE) Redis "
    "failed in a way waiting cannot fix (authentication failed, unknown host, no "
    "such database, not a Redis server); 66 (EX_NOINPUT) without --redis, the limit's files cannot be read (no "
    "permission, an I/O error). The cause goes to stderr.";

struct inspect_options {
  std::string redis;         // URL: redis://[:password@]host:port[/db] or unix:///path (empty: a local limit)
  std::string name;          // the semaphore's name (required)
  std::string most = "100";  // holders and waiters listed at most
  std::string timeout = "1s";
  bool json = false;
};

}  // namespace admit::cli
