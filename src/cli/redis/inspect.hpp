// cli/redis/inspect.hpp — `admit inspect`: the live state of a distributed semaphore (admit::redis::semaphore) as
// Redis holds it — capacity, permits available, the holders with their lease's time left and fencing token, the
// queue in order:
//
//   admit inspect --redis redis://10.0.0.5:6379 db-queries
//   admit inspect --redis redis://10.0.0.5:6379 --json --most 1000 db-queries
//
// Built only with the admit::redis target. Looking creates nothing: a name with no semaphore is an error.
#pragma once

#include <iosfwd>
#include <string>

namespace admit::cli {

// `admit inspect --help`: what the command does and its exit statuses.
inline constexpr const char* inspect_description =
    "Show the live state of a distributed semaphore (admit::redis::semaphore) on Redis: capacity, available, the "
    "holders with their fencing token and lease time left, the queue in order.\n"
    "Exit status: 0 shown; 1 no such semaphore; 2 bad input (an option, the URL); 75 (EX_TEMPFAIL) Redis failed in "
    "a way that may pass by waiting (no answer within --timeout, connection refused or lost, LOADING, BUSY); 69 "
    "(EX_UNAVAILABLE) Redis failed in a way waiting cannot fix (authentication failed, unknown host, no such "
    "database, not a Redis server). The cause goes to stderr.";

struct inspect_options {
  std::string redis;         // URL: redis://[:password@]host:port[/db] or unix:///path (required)
  std::string name;          // the semaphore's name (required)
  std::string most = "100";  // holders and waiters listed at most
  std::string timeout = "1s";
  bool json = false;
};

// Runs `admit inspect`. Returns 0 (the state went to `out`), 2 bad input (a bad URL included), 1 no such semaphore,
// 75 a Redis failure that may pass by waiting, 69 one that will not (see cli/redis/failure.hpp); the message goes to
// `err`, prefixed "admit inspect: ".
int run_inspect(const inspect_options& options, std::ostream& out, std::ostream& err);

}  // namespace admit::cli
