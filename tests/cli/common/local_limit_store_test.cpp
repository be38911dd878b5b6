// The directory the host-local limit of `admit run` keeps (src/cli/common/local_limit.hpp), as others see it:
// inspect_local lists holders and waiters with their info, tickets increase across runs, an entry removed by hand ends
// the wait naming it, another definition of a name in use is refused; and the checks of the configuration (names,
// weights, the directory, the default directory).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/common/local_queue.hpp"
#include "local_limit_testing.hpp"

namespace {

using namespace admit::cli::local_limit_testing;

TEST_F(LocalLimit, InspectListsHoldersAndWaitersWithTheirInfo) {
  EXPECT_FALSE(inspect_local(dir_, "db").exists);
  auto c = config(3, 2);
  c.info = {"host-h", 1234, "make -j2", 0};
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  c.info = {"host-w", 5678, "cc \xff bad utf-8", 0};
  std::jthread waiter([&] { (void)local_limit(c).acquire(in(10s), false, {}); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  // An entry left by a process that died (not locked) is not listed, and is removed.
  std::ofstream(name_dir() / "h.00000000000000000099") << R"({"weight":3,"pid":1})" << '\n';
  auto r = inspect_local(dir_, "db");
  EXPECT_TRUE(r.exists);
  ASSERT_EQ(r.snapshot.holders.size(), 1u);
  ASSERT_EQ(r.snapshot.waiters.size(), 1u);
  const auto& h = r.snapshot.holders[0];
  EXPECT_EQ(h.ticket, held->ticket());
  EXPECT_EQ(h.weight, 2);
  EXPECT_EQ(h.info.host, "host-h");
  EXPECT_EQ(h.info.pid, 1234);
  EXPECT_EQ(h.info.command, "make -j2");
  EXPECT_GT(h.info.started_unix_ms, 0);
  const auto& w = r.snapshot.waiters[0];
  EXPECT_GT(w.ticket, h.ticket);
  EXPECT_EQ(w.info.host, "host-w");
  EXPECT_EQ(w.info.command.substr(0, 3), "cc ");
  EXPECT_FALSE(fs::exists(name_dir() / "h.00000000000000000099"));
  held->release();
}

TEST_F(LocalLimit, TicketsIncreaseAcrossRuns) {
  auto c = config(1);
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto p = local_limit(c).acquire(std::nullopt, true, {});
    ASSERT_TRUE(p);
    EXPECT_GT(p->ticket(), last);
    last = p->ticket();
  }
}

TEST_F(LocalLimit, WeightAboveCapacityIsRefused) {
  EXPECT_EQ(local_limit(config(2, 3)).acquire(std::nullopt, false, {}).error(), admit::errc::exceeds_capacity);
}

// Every participant of a name gives the same capacity, rate and burst while any of them takes part: another is
// refused before it joins, naming both and who gave the other; once the name is free, a new definition is taken.
TEST_F(LocalLimit, AnotherDefinitionIsRefusedWhileTheNameIsInUse) {
  local_limit one(config(1));
  auto held = one.acquire(std::nullopt, false, {});
  ASSERT_TRUE(held);
  local_limit five(config(5));
  try {
    (void)five.acquire(std::nullopt, true, {});
    FAIL() << "another capacity was admitted";
  } catch (const definition_conflict& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("\"db\" is in use with --concurrency 1 (pid " + std::to_string(::getpid()) +
                        " on host-a: run something), not --concurrency 5"),
              std::string::npos)
        << what;
  }
  local_limit_config rated = config(1);
  rated.interval = std::chrono::milliseconds(100);
  rated.burst = 2;
  EXPECT_THROW((void)local_limit(rated).acquire(std::nullopt, true, {}), definition_conflict);
  EXPECT_EQ(describe(local_limit(rated).definition()), "--concurrency 1 --rate 10/s --burst 2");
  EXPECT_EQ(files("w."), 0u);  // refused before joining
  held->release();
  auto redefined = five.acquire(std::nullopt, true, {});
  EXPECT_TRUE(redefined);
}

TEST_F(LocalLimit, BadNamesAndValuesAreRefused) {
  for (const std::string& name :
       std::vector<std::string>{"", ".", "..", "a/b", "a b", "caf\xc3\xa9", "x\n", std::string(201, 'n')}) {
    auto c = config(1);
    c.name = name;
    try {
      local_limit limit(c);
      ADD_FAILURE() << "accepted \"" << name << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("\"" + name + "\""), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("A-Z a-z 0-9 . _ -"), std::string::npos) << e.what();
    }
    EXPECT_THROW(inspect_local(dir_, name), std::invalid_argument);
  }
  EXPECT_NO_THROW(check_local_name(std::string(200, 'n')));
  EXPECT_NO_THROW(check_local_name("build.cache_v2-x"));
  auto bad = [&](auto edit) {
    auto c = config(1);
    edit(c);
    EXPECT_THROW(local_limit{c}, std::invalid_argument);
  };
  bad([](auto& c) { c.weight = 0; });
  bad([](auto& c) { c.capacity = -1; });
  bad([](auto& c) { c.capacity = 0; });  // and no rate
  bad([](auto& c) { c.interval = 0ns; });
  bad([](auto& c) { c.interval = 1s, c.burst = 0; });
  bad([](auto& c) { c.poll_interval = 0ns; });
}

TEST_F(LocalLimit, EntryRemovedByHandEndsTheWaitNamingIt) {
  auto c = config(1);
  auto held = local_limit(c).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  std::string message;
  std::jthread waiter([&] {
    try {
      (void)local_limit(c).acquire(in(10s), false, {});
    } catch (const std::system_error& e) {
      message = e.what();
    }
  });
  ASSERT_TRUE(eventually([&] { return files("w.") == 1; }));
  for (const auto& e : fs::directory_iterator(name_dir())) {
    if (e.path().filename().string().starts_with("w.")) fs::remove(e.path());
  }
  waiter.join();
  EXPECT_NE(message.find((name_dir() / "w.0000000000000000000").string()), std::string::npos) << message;
}

TEST_F(LocalLimit, DirectoryThatCannotBeCreatedNamesThePath) {
  std::ofstream(root_ / "a file") << "x";
  auto c = config(1);
  c.directory = root_ / "a file" / "limits";
  try {
    local_limit limit(c);
    ADD_FAILURE() << "created a directory under a file";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find((root_ / "a file").string()), std::string::npos) << e.what();
  }
}

// The per-user directory in /tmp is used only when it is this user's own (another user could make it first, and
// then move the limits' directories in it, or link them elsewhere: it was used as found).
TEST_F(LocalLimit, APerUserDirectoryOthersCanWriteOrALinkIsRefused) {
  const auto refusal = [](const fs::path& d) {
    try {
      admit::cli::run::local::check_private(d);
      return std::string();
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::permission_denied);
      return std::string(e.what());
    }
  };
  const fs::path mine = root_ / "mine";
  fs::create_directory(mine);
  fs::permissions(mine, fs::perms::owner_all, fs::perm_options::replace);
  EXPECT_EQ(refusal(mine), "");
  EXPECT_EQ(refusal(root_ / "absent"), "");  // made later, mode 0700
  fs::permissions(mine, fs::perms::all, fs::perm_options::replace);
  EXPECT_NE(refusal(mine).find("may be written by others (mode 0777)"), std::string::npos) << refusal(mine);
  fs::create_directory_symlink(mine, root_ / "link");
  EXPECT_NE(refusal(root_ / "link").find("is a symbolic link"), std::string::npos) << refusal(root_ / "link");
  std::ofstream(root_ / "file") << "x";
  EXPECT_NE(refusal(root_ / "file").find("is not a directory"), std::string::npos) << refusal(root_ / "file");
  if (::getuid() == 0) {  // another user's (only root can give it one)
    fs::permissions(mine, fs::perms::owner_all, fs::perm_options::replace);
    ASSERT_EQ(::chown(mine.c_str(), 65534, 65534), 0);
    EXPECT_NE(refusal(mine).find("belongs to uid 65534"), std::string::npos) << refusal(mine);
  }
  EXPECT_EQ(admit::cli::run::local::per_user_tmp_directory(), fs::path("/tmp/admit-" + std::to_string(::getuid())));
}

// Sets environment variables for the scope of a test, and puts back what was there, however the test ends.
class scoped_environment {
 public:
  scoped_environment() = default;
  scoped_environment(const scoped_environment&) = delete;
  scoped_environment& operator=(const scoped_environment&) = delete;
  ~scoped_environment() {
    for (const auto& [name, was] : saved_) was ? ::setenv(name.c_str(), was->c_str(), 1) : ::unsetenv(name.c_str());
  }
  void set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void save(const std::string& name) {
    for (const auto& s : saved_) {
      if (s.first == name) return;
    }
    const char* v = std::getenv(name.c_str());
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// XDG_RUNTIME_DIR is used only when it names a directory of this user's: a relative one (which named another limit
// in each working directory), a missing one (whose parents were made) and another user's (where root, after `su`
// without `-`, made a directory of its own that locked the user out of every limit) are not.
TEST_F(LocalLimit, TheDefaultDirectoryFollowsTheEnvironment) {
  scoped_environment env;
  const fs::path tmp = "/tmp/admit-" + std::to_string(::getuid());
  const fs::path mine = root_ / "run user";
  fs::create_directory(mine);
  env.set("ADMIT_LOCK_DIR", "/some where/locks");
  env.set("XDG_RUNTIME_DIR", mine.string());
  EXPECT_EQ(default_lock_directory(), fs::path("/some where/locks"));
  env.unset("ADMIT_LOCK_DIR");
  EXPECT_EQ(default_lock_directory(), mine / "admit");
  env.set("XDG_RUNTIME_DIR", "");
  EXPECT_EQ(default_lock_directory(), tmp);
  env.set("XDG_RUNTIME_DIR", "run user");
  EXPECT_EQ(default_lock_directory(), tmp);
  env.set("XDG_RUNTIME_DIR", (root_ / "absent" / "run").string());
  EXPECT_EQ(default_lock_directory(), tmp);
  // Another user's: root's "/" for anyone else; for root, a directory it gives to another user.
  env.set("XDG_RUNTIME_DIR", "/");
  EXPECT_EQ(default_lock_directory(), ::getuid() == 0 ? fs::path("/admit") : tmp);
  if (::getuid() == 0) {
    const fs::path theirs = root_ / "run 65534";
    fs::create_directory(theirs);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    env.set("XDG_RUNTIME_DIR", theirs.string());
    EXPECT_EQ(default_lock_directory(), tmp);
  }
}

// The runtime directory's `admit` is checked as /tmp's is: one that others may write, or (made by root in the user's
// runtime directory) another user's, is named with what to do, where a run used it as found or failed with "cannot
// create the directory ...: Permission denied".
TEST_F(LocalLimit, TheRuntimeDirectorysLimitsMustBeThisUsersOwn) {
  scoped_environment env;
  const fs::path mine = root_ / "run user";
  fs::create_directory(mine);
  fs::create_directory(mine / "admit");
  env.set("XDG_RUNTIME_DIR", mine.string());
  const auto refusal = [] {
    try {
      admit::cli::run::local::queue_dir(default_lock_directory(), "db", true);
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::permission_denied);
      return std::string(e.what());
    }
    return std::string();
  };
  fs::permissions(mine / "admit", fs::perms::all, fs::perm_options::replace);
  const std::string open_to_all = refusal();
  EXPECT_NE(open_to_all.find("\"" + (mine / "admit").string() + "\" may be written by others (mode 0777)"),
            std::string::npos)
      << open_to_all;
  EXPECT_EQ(open_to_all.find("Permission denied"), std::string::npos) << open_to_all;
  if (::getuid() == 0) {  // another user's (only root can give it one)
    fs::permissions(mine / "admit", fs::perms::owner_all, fs::perm_options::replace);
    ASSERT_EQ(::chown((mine / "admit").c_str(), 65534, 65534), 0);
    const std::string theirs = refusal();
    EXPECT_NE(theirs.find("\"" + (mine / "admit").string() + "\" belongs to uid 65534"), std::string::npos) << theirs;
  }
}

}  // namespace
