// serve_program.hpp — `admit serve` as its own program. The service links gRPC, protobuf and Abseil (some fifty shared
// libraries), whose loading and initialisation made every start of `admit` three times as long (`admit --version`:
// 11.8 ms with them, 3.7 ms without, on a 2-core machine) — `admit run`'s too. So the service is the program
// admit-serve, and `admit serve ...` replaces itself with it (execv: the same process, so a supervisor's PID, signals
// and exit status are the service's), with the same command line.
//
//   if (argc > 1 && std::string_view(argv[1]) == "serve") return run_serve_program(argv, std::cerr);
//
// Where admit-serve is looked for, in order: beside this program (a build tree), at ADMIT_SERVE_PROGRAM_FROM_BINDIR
// relative to this program's directory (an installation: bin/admit and libexec/admit/admit-serve, wherever it was
// moved), then where the install prefix put it (ADMIT_SERVE_PROGRAM_INSTALLED: when /proc cannot say where admit is).
#pragma once

#include <iosfwd>

namespace admit::cli {

// Runs admit-serve in this process's place with `argv` (argv[0] kept, argv[1] "serve"). Returns only when it cannot:
// exit_unavailable (69) with the places looked at named on `err` when no regular executable file is at any of them,
// exit_failure when one is and the exec fails.
int run_serve_program(char** argv, std::ostream& err);

}  // namespace admit::cli
