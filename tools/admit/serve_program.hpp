// serve_program.hpp — `admit serve` as its own program. The service links gRPC, protobuf and Abseil (some fifty shared
// libraries), whose loading and initialisation took about 5 ms at every start of `admit` — for `admit run`, four
// fifths of what it adds to its command. So the service is the program admit-serve, and `admit serve ...` replaces
// itself with it (execv: the same process, so a supervisor's PID, signals and exit status are the service's), with
// the same command line.
//
//   if (argc > 1 && std::string_view(argv[1]) == "serve") return run_serve_program(argv, std::cerr);
//
// Where admit-serve is looked for, in order: beside this program (a build tree), then at serve_program_from_bindir
// relative to this program's directory (an installation: bin/admit and libexec/admit/admit-serve).
#pragma once

#include <iosfwd>

namespace admit::cli {

// Runs admit-serve in this process's place with `argv` (argv[0] kept, argv[1] "serve"). Returns only when it cannot:
// exit_unavailable (69) with the places looked at named on `err` when admit-serve is not there, exit_failure when it
// is there and the exec fails.
int run_serve_program(char** argv, std::ostream& err);

}  // namespace admit::cli
