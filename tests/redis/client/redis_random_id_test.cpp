// admit::redis::detail::random_id: the identities of semaphore acquisitions and of admit serve's leases. 128 bits as
// 32 lowercase hex digits, never repeated, and not repeated across fork(): a generator whose state a child copies
// would hand the child the parent's next identities (two holders under one identity).
#include "admit/redis/client/detail/random_id.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <string>
#include <unordered_set>

namespace {

using admit::redis::detail::random_id;

TEST(RandomId, Is32LowercaseHexDigits) {
  for (int i = 0; i < 1000; ++i) {
    const std::string id = random_id();
    ASSERT_EQ(id.size(), 32u) << id;
    ASSERT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  }
}

// Every one of the 128 bits takes both values over a few hundred identities: none is fixed, as a 32-bit source
// padded to 128 bits would leave some.
TEST(RandomId, NeverRepeatsAndUsesEveryBit) {
  std::unordered_set<std::string> seen;
  std::array<int, 128> ones{};
  constexpr int count = 4096;
  for (int i = 0; i < count; ++i) {
    const std::string id = random_id();
    ASSERT_TRUE(seen.insert(id).second) << "repeated: " << id;
    for (std::size_t d = 0; d < 32; ++d) {
      const int v = id[d] <= '9' ? id[d] - '0' : id[d] - 'a' + 10;
      for (int b = 0; b < 4; ++b) ones[4 * d + static_cast<std::size_t>(b)] += (v >> b) & 1;
    }
  }
  for (std::size_t bit = 0; bit < ones.size(); ++bit) {
    EXPECT_GT(ones[bit], 0) << "bit " << bit << " never set";
    EXPECT_LT(ones[bit], count) << "bit " << bit << " always set";
  }
}

TEST(RandomId, AForkedChildDoesNotRepeatItsParentsNextIdentities) {
  (void)random_id();  // whatever per-thread state there is, made before the fork
  for (int round = 0; round < 20; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const ::pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const std::string id = random_id();
      const auto written = ::write(fds[1], id.data(), id.size());
      ::_exit(written == static_cast<::ssize_t>(id.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    const std::string mine = random_id();
    std::string theirs(32, '\0');
    std::size_t got = 0;
    while (got < theirs.size()) {
      const auto n = ::read(fds[0], theirs.data() + got, theirs.size() - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(got, theirs.size());
    EXPECT_NE(mine, theirs) << "round " << round;
  }
}

}  // namespace
