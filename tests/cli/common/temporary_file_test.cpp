// Tests of the command line's unnamed temporary files (src/cli/common/temporary_file.hpp): made in $TMPDIR, else /tmp
// (std::tmpfile, used before, made them in /tmp whatever TMPDIR said), private, and nameless.
#include "cli/common/temporary_file.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace {

using admit::cli::temporary_directory;
using admit::cli::temporary_file;

// TMPDIR set to `value` (unset for nullopt) for the scope, then as it was.
class tmpdir_as {
 public:
  explicit tmpdir_as(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    if (value) {
      ::setenv("TMPDIR", value->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }
  ~tmpdir_as() {
    if (old_) {
      ::setenv("TMPDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }
  tmpdir_as(const tmpdir_as&) = delete;
  tmpdir_as& operator=(const tmpdir_as&) = delete;

 private:
  std::optional<std::string> old_;
};

// Where an open file is, as the kernel names it ("/dir/#1234 (deleted)" for an unnamed one).
std::string where(std::FILE* f) {
  std::array<char, 4096> target{};
  const std::string link = "/proc/self/fd/" + std::to_string(::fileno(f));
  const ssize_t n = ::readlink(link.c_str(), target.data(), target.size() - 1);
  return n > 0 ? std::string(target.data(), static_cast<std::size_t>(n)) : std::string();
}

TEST(TemporaryFile, IsMadeInTmpdirPrivateAndNameless) {
  char pattern[] = "/tmp/admit-tmpdir-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::filesystem::path dir = pattern;
  {
    const tmpdir_as in(dir.string());
    EXPECT_EQ(temporary_directory(), dir);
    const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(temporary_file(), &std::fclose);
    ASSERT_TRUE(f);
    EXPECT_EQ(where(f.get()).rfind(dir.string() + "/", 0), 0U) << where(f.get());
    struct stat st {};
    ASSERT_EQ(::fstat(::fileno(f.get()), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600U);
    EXPECT_TRUE(std::filesystem::is_empty(dir));  // no name left in it
    ASSERT_EQ(std::fputs("events", f.get()), 1);
    std::rewind(f.get());
    std::array<char, 8> back{};
    ASSERT_NE(std::fgets(back.data(), back.size(), f.get()), nullptr);
    EXPECT_EQ(std::string(back.data()), "events");
  }
  {
    const tmpdir_as unset(std::nullopt);
    EXPECT_EQ(temporary_directory(), "/tmp");
    const tmpdir_as empty(std::string{});
    EXPECT_EQ(temporary_directory(), "/tmp");
  }
  {
    const tmpdir_as missing((dir / "missing").string());
    errno = 0;
    EXPECT_EQ(temporary_file(), nullptr);
    EXPECT_EQ(errno, ENOENT);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
