// cli/inspect/local_inspect.hpp — `admit inspect NAME` without --redis: an `admit run` limit on this host
// (cli/common/local_limit.hpp) — its holders and waiters in order, each with host, pid, command line and how long it
// has held or waited.
#pragma once

#include <iosfwd>
#include <string>

namespace admit::cli::run {

// `lock_directory` empty: the default (default_lock_directory()). Returns 0 (shown), 1 no such limit, 2 bad input, 66
// (EX_NOINPUT) the limit's files cannot be read (another user's, an I/O error), 75 (EX_TEMPFAIL) another process held
// the limit's lock for all of inspect_patience.
int inspect_local(const std::string& name, const std::string& lock_directory, const std::string& most, bool json,
                  std::ostream& out, std::ostream& err);

}  // namespace admit::cli::run
