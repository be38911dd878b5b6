// cli/common/temporary_file.hpp — an unnamed temporary file in $TMPDIR (else /tmp), as std::tmpfile() makes one in
// /tmp whatever TMPDIR says: the copy of a trace `admit recommend` replays, the events `--json --events` holds back.
//
//   std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(temporary_file(), &std::fclose);
//   if (!f) fail(std::strerror(errno));
//
// The file has no name (O_TMPFILE; where the file system has none, a name removed at once), mode 0600, and is gone
// when closed or when the program ends. Thread safety: a pure function.
#pragma once

#include <cstdio>
#include <filesystem>

namespace admit::cli {

// The directory: $TMPDIR when set and not empty, else /tmp.
[[nodiscard]] std::filesystem::path temporary_directory();

// A new temporary file open for reading and writing, or nullptr with errno set.
[[nodiscard]] std::FILE* temporary_file();

}  // namespace admit::cli
